// The values a Jinja template computes with: Python's None, bool, int, float, str, list,
// tuple and dict, plus jinja2's Undefined and callables (macros, builtins, bound methods).
// Copying a Value is cheap: strings, lists and dicts are shared and never mutated in place,
// except a namespace() dict, the one object a template may assign into.
#ifndef PAGODA_LIB_JINJA_VALUE_H_
#define PAGODA_LIB_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pagoda::jinja {

class Value;
using ValueList = std::vector<Value>;

// See Value::depth().
inline constexpr int kNamespaceDepth = 128;

// A dict that keeps insertion order, as Python's does. Keys are what Python can hash: None,
// bool, int, float, str and tuples of those; 1, 1.0 and True are one key, as in Python.
class ValueDict {
 public:
  // The value under the str `key`, or null.
  const Value* Find(absl::string_view key) const;
  // The value under `key`, or null (also when `key` cannot be hashed).
  const Value* Find(const Value& key) const;
  // Inserts, or replaces the value of an existing key in place (order unchanged).
  void Set(std::string key, Value value);
  // As Set, for any key; TypeError ("unhashable type: 'list'") for a list, dict or callable.
  absl::Status SetKey(const Value& key, Value value);
  size_t size() const;  // defined below Value: a pair with an incomplete Value cannot be sized
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  void Clear();

 private:
  std::vector<std::pair<Value, Value>> entries_;
  absl::flat_hash_map<std::string, size_t> str_index_;    // str keys
  absl::flat_hash_map<std::string, size_t> other_index_;  // the rest, by HashKey()
};

// Call arguments: positional, then keyword in call order.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using NativeFunction = std::function<absl::StatusOr<Value>(CallArgs&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  // jinja2's Undefined; `error` is what using it (attribute, call, arithmetic) raises.
  Value() : kind_(Kind::kUndefined) {}
  static Value Undefined(std::string error);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value String(std::string s);
  // markupsafe's Markup: a str marked safe (`|safe`, `|escape`). Adding a plain str to it
  // escapes that str first, as jinja2 does even with autoescape off.
  static Value Markup(std::string s);
  static Value List(ValueList items, bool is_tuple = false);
  // What jinja2's select, reject and map return: a generator. It iterates as a list does,
  // but is always true, has no len(), no items by index, and json.dumps refuses it.
  static Value Generator(ValueList items);
  static Value Dict(std::shared_ptr<ValueDict> dict, bool is_namespace = false);
  static Value Callable(std::string name, NativeFunction fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // Python's numbers.Number: bool counts.
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return kind_ == Kind::kString && is_markup_; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && is_tuple_; }
  bool is_generator() const { return kind_ == Kind::kList && is_generator_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kDict && is_namespace_; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return bool_; }
  // Ints and bools as Python ints.
  int64_t as_int() const { return is_bool() ? (bool_ ? 1 : 0) : int_; }
  double as_float() const { return is_float() ? float_ : static_cast<double>(as_int()); }
  const std::string& as_string() const { return *string_; }
  const ValueList& as_list() const { return *list_; }
  const ValueDict& as_dict() const { return *dict_; }
  // REQUIRES: is_namespace().
  ValueDict& mutable_namespace() const { return *dict_; }
  const std::shared_ptr<ValueDict>& dict_ptr() const { return dict_; }
  // The message an undefined raises when used; the callable's name.
  const std::string& undefined_error() const { return *string_; }
  const std::string& callable_name() const { return *string_; }
  NativeFunction& function() const { return *function_; }

  // How many lists and dicts nest in this value (0 for a scalar). A namespace counts as
  // kNamespaceDepth so that nothing holding one can be stored in one: no cycles, no chains.
  int depth() const { return depth_; }

  // Python's bool(x).
  bool Truthy() const;
  // Python's type name ("str", "dict", "NoneType").
  std::string TypeName() const;

 private:
  Kind kind_;
  bool bool_ = false;
  bool is_tuple_ = false;
  bool is_namespace_ = false;
  bool is_markup_ = false;
  bool is_generator_ = false;
  int depth_ = 0;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> string_;  // str, undefined's error, callable's name
  std::shared_ptr<const ValueList> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<NativeFunction> function_;
};

// Python's `a == b` (1 == 1.0 == True; lists and dicts element-wise; Undefined == Undefined).
bool Equals(const Value& a, const Value& b);

// Whether Python can hash `v` (and so use it as a dict key): not a list, dict or callable,
// nor a tuple holding one.
bool IsHashable(const Value& v);

// Python's float repr: "1.0", "1e+20", "1.5e-07".
std::string FormatFloat(double f);

inline size_t ValueDict::size() const { return entries_.size(); }

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_VALUE_H_
