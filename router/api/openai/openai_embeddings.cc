#include "router/api/openai/openai_embeddings.h"

#include <bit>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "router/api/openai/openai_error.h"
#include "router/api/openai/request_json.h"
#include "router/api/request_policy.h"

namespace pagoda {
namespace {

// The fields this endpoint reads; any other (unless null) is refused by name, not ignored.
constexpr const char* kKnownFields[] = {"model",      "input", "encoding_format",
                                        "dimensions", "user",  "add_special_tokens"};

// A list of token ids: compact (request_json.h) or, with something else in it, an array.
bool IsTokenIds(const OrderedJson& v) {
  return IsIdList(v) || (v.is_array() && !v.empty() && v.front().is_number());
}

absl::Status ReadTokenIds(const OrderedJson& v, int max_model_len, int vocab_size,
                          std::vector<int>* out) {
  const int64_t count = IsIdList(v) ? IdListSize(v) : static_cast<int64_t>(v.size());
  if (count >= max_model_len) {
    return BadField(
        "input",
        absl::StrCat(count, " tokens leave no room in the model length of ", max_model_len),
        kContextLengthExceeded);
  }
  if (IsIdList(v)) {
    AppendIdList(v, out);
    for (int id : *out) {
      if (id >= vocab_size) {
        return BadField("input",
                        absl::StrCat("each token id must be an integer in [0, ", vocab_size, ")"));
      }
    }
    return absl::OkStatus();
  }
  for (const OrderedJson& id : v) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size) {
      return BadField("input",
                      absl::StrCat("each token id must be an integer in [0, ", vocab_size, ")"));
    }
    out->push_back(id.get<int>());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Pooling> ParsePooling(const std::string& name) {
  if (name == "last") return Pooling::kLast;
  if (name == "mean") return Pooling::kMean;
  return absl::InvalidArgumentError(absl::StrCat("--pooling must be last or mean, not ", name));
}

absl::StatusOr<EmbeddingCall> ParseEmbeddingRequest(const OrderedJson& body,
                                                    const OpenAiContext& context, Pooling pooling) {
  for (const auto& [key, value] : body.items()) {
    if (value.is_null()) continue;  // absent, as every endpoint reads it (openai_fields.h)
    bool known = false;
    for (const char* field : kKnownFields) known = known || key == field;
    if (!known) return BadField(key.substr(0, 64), "is not supported", kUnsupportedParameter);
  }
  EmbeddingCall call;
  if (const OrderedJson* m = JsonMember(body, "model")) {
    if (!m->is_string()) return BadField("model", "must be a string", kInvalidType);
    call.model = m->get<std::string>();
  }
  if (const OrderedJson* u = JsonMember(body, "user"); u != nullptr && !u->is_string()) {
    return BadField("user", "must be a string", kInvalidType);
  }
  if (const OrderedJson* f = JsonMember(body, "encoding_format")) {
    if (!f->is_string() || (*f != "float" && *f != "base64")) {
      return BadField("encoding_format", "must be \"float\" or \"base64\"");
    }
    call.base64 = *f == "base64";
  }
  const int dim = context.cluster->config().dim;
  if (const OrderedJson* d = JsonMember(body, "dimensions")) {
    // The model's vectors are not truncatable (not trained Matryoshka-style): only its dim.
    if (!d->is_number_integer() || d->get<int64_t>() != dim) {
      return BadField("dimensions", absl::StrCat("only the model's own ", dim, " is supported"),
                      kUnsupportedParameter);
    }
  }
  bool add_special_tokens = true;
  if (const OrderedJson* a = JsonMember(body, "add_special_tokens")) {
    if (!a->is_boolean())
      return BadField("add_special_tokens", "must be true or false", kInvalidType);
    add_special_tokens = a->get<bool>();
  }
  const OrderedJson* input = JsonMember(body, "input");
  if (input == nullptr) return BadField("input", "is required", kMissingRequired);
  std::vector<const OrderedJson*> inputs;
  if (input->is_string() || IsTokenIds(*input)) {
    inputs.push_back(input);
  } else if (input->is_array() && !input->empty() &&
             input->size() <= static_cast<size_t>(kMaxEmbeddingInputs)) {
    for (const OrderedJson& i : *input) inputs.push_back(&i);
  } else {
    return BadField("input",
                    absl::StrCat("must be a string, a list of token ids, or a list of 1 to ",
                                 kMaxEmbeddingInputs, " of either"));
  }
  const int max_len = context.cluster->max_model_len();
  int64_t total = 0;
  for (const OrderedJson* i : inputs) {
    GenerationRequest r;
    r.pooling = pooling;
    if (i->is_string()) {
      const std::string& text = i->get_ref<const std::string&>();
      if (text.empty()) return BadField("input", "must not be empty");
      ASSIGN_OR_RETURN(r.prompt_ids, EncodePrompt(*context.tokenizer, text, max_len, "input",
                                                  add_special_tokens));
    } else if (IsTokenIds(*i)) {
      RETURN_IF_ERROR(
          ReadTokenIds(*i, max_len, context.cluster->config().vocab_size, &r.prompt_ids));
    } else {
      return BadField("input", "each input must be a non-empty string or list of token ids");
    }
    if (r.prompt_ids.empty()) return BadField("input", "an input has no tokens");
    total += static_cast<int64_t>(r.prompt_ids.size());
    if (total > kMaxEmbeddingTokens) {
      return BadField("input", absl::StrCat("more than ", kMaxEmbeddingTokens, " tokens in all"));
    }
    call.requests.push_back(std::move(r));
  }
  return call;
}

std::string EmbeddingResponseBody(const EmbeddingCall& call,
                                  const std::vector<std::vector<float>>& embeddings,
                                  int64_t prompt_tokens, const std::string& model) {
  OrderedJson data = OrderedJson::array();
  for (size_t i = 0; i < embeddings.size(); ++i) {
    const std::vector<float>& v = embeddings[i];
    OrderedJson e = {{"object", "embedding"}, {"index", i}};
    if (call.base64) {
      // OpenAI's form: the float32 array's bytes, little-endian (this machine's order).
      static_assert(std::endian::native == std::endian::little);
      std::string bytes(v.size() * sizeof(float), '\0');
      std::memcpy(bytes.data(), v.data(), bytes.size());
      e["embedding"] = absl::Base64Escape(bytes);
    } else {
      e["embedding"] = v;
    }
    data.push_back(std::move(e));
  }
  const OrderedJson body = {
      {"object", "list"},
      {"data", std::move(data)},
      {"model", model},
      {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
  return body.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

}  // namespace pagoda
