#include "router/api/openai/request_json.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json.h"

namespace pagoda {
namespace {

// Estimated bytes of the tree (on x86-64 with glibc): a value is a 16-byte node in its
// parent's vector, which may hold twice its size; a container, string or key adds its heap
// object; a string longer than the small-string buffer adds its characters.
constexpr int64_t kValueBytes = 32;
constexpr int64_t kContainerBytes = 32;
constexpr int64_t kStringBytes = 32;
constexpr int64_t kKeyBytes = 64;
constexpr size_t kSmallString = 15;
constexpr int64_t kIdBytes = 4;

// Builds the tree as nlohmann's DOM parser does, within the limits.
class BoundedBuilder final : public nlohmann::json_sax<OrderedJson> {
 public:
  BoundedBuilder(const RequestJsonLimits& limits, int64_t max_bytes, absl::string_view what)
      : limits_(limits), max_bytes_(max_bytes), what_(what) {}

  bool null() override { return Put(OrderedJson(nullptr)); }
  bool boolean(bool b) override { return Put(OrderedJson(b)); }
  bool number_integer(number_integer_t i) override { return Put(OrderedJson(i)); }
  bool number_unsigned(number_unsigned_t u) override {
    if (compact_depth_ > 0 && u <= static_cast<uint64_t>(INT32_MAX)) {
      const int32_t id = static_cast<int32_t>(u);
      const size_t at = ids_.size();
      ids_.resize(at + sizeof(id));
      std::memcpy(ids_.data() + at, &id, sizeof(id));
      return Spend(kIdBytes);
    }
    return Put(OrderedJson(u));
  }
  bool number_float(number_float_t f, const string_t&) override { return Put(OrderedJson(f)); }
  bool string(string_t& s) override {
    if (!Spend(kStringBytes + (s.size() > kSmallString ? static_cast<int64_t>(s.size()) : 0))) {
      return false;
    }
    return Put(OrderedJson(std::move(s)));
  }
  bool binary(binary_t&) override { return Fail("binary values are not JSON"); }

  bool start_object(std::size_t) override { return Open(OrderedJson::object()); }
  bool key(string_t& k) override {
    if (++keys_.back() > limits_.max_object_keys) {
      return Fail(absl::StrCat("a JSON object with more than ", limits_.max_object_keys, " keys"));
    }
    if (++num_keys_ > limits_.max_keys) {
      return Fail(absl::StrCat("more than ", limits_.max_keys, " JSON object keys"));
    }
    if (!Spend(kKeyBytes + (k.size() > kSmallString ? static_cast<int64_t>(k.size()) : 0))) {
      return false;
    }
    if (stack_.size() == 1) {
      in_id_field_ = std::find(limits_.id_fields.begin(), limits_.id_fields.end(), k) !=
                     limits_.id_fields.end();
    }
    element_ = &(*stack_.back())[std::move(k)];
    return true;
  }
  bool end_object() override { return Close(); }

  bool start_array(std::size_t) override {
    if (!Open(OrderedJson::array())) return false;
    // The field's own list, or a list in it.
    const size_t depth = stack_.size();
    if (in_id_field_ && (depth == 2 || (depth == 3 && stack_[1]->is_array()))) {
      compact_depth_ = depth;
    }
    return true;
  }
  bool end_array() override {
    if (compact_depth_ == stack_.size()) {
      compact_depth_ = 0;
      // Not shrunk to fit: that would copy the list while it is whole.
      if (!ids_.empty()) {
        *stack_.back() = OrderedJson::binary(std::move(ids_), kIdListSubtype);
        ids_ = {};
      }
    }
    return Close();
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    if (error_.ok()) error_ = absl::InvalidArgumentError(absl::StrCat(what_, kNotJson));
    return false;
  }

  absl::StatusOr<OrderedJson> Result() && {
    if (!error_.ok()) return error_;
    return std::move(root_);
  }

 private:
  bool Fail(const std::string& message) {
    error_ = absl::InvalidArgumentError(absl::StrCat(what_, ": ", message));
    return false;
  }

  bool Spend(int64_t bytes) {
    bytes_ += bytes;
    if (bytes_ <= max_bytes_) return true;
    return Fail(absl::StrCat("its JSON needs more than ", max_bytes_,
                             " bytes of memory to hold (too many values for its size)"));
  }

  // Places a value where the parser is: the root, an array's end, or the last key's value.
  OrderedJson* Place(OrderedJson v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    if (stack_.back()->is_array()) {
      stack_.back()->push_back(std::move(v));
      return &stack_.back()->back();
    }
    *element_ = std::move(v);
    return element_;
  }

  bool Put(OrderedJson v) {
    if (compact_depth_ > 0 && !Flush()) return false;
    if (!Spend(kValueBytes)) return false;
    Place(std::move(v));
    return true;
  }

  bool Open(OrderedJson container) {
    // A container inside a candidate list: that list holds more than ids.
    if (compact_depth_ > 0 && !Flush()) return false;
    if (static_cast<int>(stack_.size()) >= limits_.max_depth) {
      return Fail(absl::StrCat("JSON nested deeper than ", limits_.max_depth, " levels"));
    }
    if (!Spend(kValueBytes + kContainerBytes)) return false;
    stack_.push_back(Place(std::move(container)));
    keys_.push_back(0);
    return true;
  }

  bool Close() {
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }

  // The candidate list holds something other than ids: its ids become ordinary values.
  bool Flush() {
    OrderedJson* list = stack_[compact_depth_ - 1];
    compact_depth_ = 0;
    const size_t n = ids_.size() / sizeof(int32_t);
    if (!Spend(static_cast<int64_t>(n) * (kValueBytes - kIdBytes))) return false;
    for (size_t i = 0; i < n; ++i) {
      int32_t id;
      std::memcpy(&id, ids_.data() + i * sizeof(id), sizeof(id));
      list->push_back(id);
    }
    ids_ = {};
    return true;
  }

  const RequestJsonLimits& limits_;
  const int64_t max_bytes_;
  const absl::string_view what_;
  OrderedJson root_;
  std::vector<OrderedJson*> stack_;  // the open containers, outermost first
  std::vector<int64_t> keys_;        // (stack_) keys so far in each
  OrderedJson* element_ = nullptr;   // where the last key's value goes
  int64_t num_keys_ = 0;
  int64_t bytes_ = 0;
  bool in_id_field_ = false;  // the current top-level key is one of id_fields
  size_t compact_depth_ = 0;  // stack_.size() of the list being read as ids; 0: none
  std::vector<uint8_t> ids_;  // its ids so far, 4 bytes each
  absl::Status error_;
};

}  // namespace

absl::StatusOr<OrderedJson> ParseRequestJson(absl::string_view text,
                                             const RequestJsonLimits& limits,
                                             absl::string_view what) {
  const int64_t max_bytes =
      static_cast<int64_t>(limits.max_tree_bytes_per_body_byte * static_cast<double>(text.size())) +
      RequestJsonLimits::kTreeSlackBytes;
  BoundedBuilder builder(limits, max_bytes, what);
  OrderedJson::sax_parse(std::string_view(text.data(), text.size()), &builder);
  return std::move(builder).Result();
}

bool IsIdList(const OrderedJson& v) {
  return v.is_binary() && v.get_binary().has_subtype() &&
         v.get_binary().subtype() == kIdListSubtype;
}

int64_t IdListSize(const OrderedJson& v) {
  return static_cast<int64_t>(v.get_binary().size() / sizeof(int32_t));
}

void AppendIdList(const OrderedJson& v, std::vector<int>* out) {
  const std::vector<uint8_t>& bytes = v.get_binary();
  const size_t n = bytes.size() / sizeof(int32_t);
  const size_t at = out->size();
  out->resize(at + n);
  static_assert(sizeof(int) == sizeof(int32_t));
  std::memcpy(out->data() + at, bytes.data(), n * sizeof(int32_t));
}

}  // namespace pagoda
