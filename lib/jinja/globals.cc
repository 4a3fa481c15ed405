// The globals: range (bounded like jinja2's sandbox), namespace, dict, raise_exception,
// strftime_now.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "lib/jinja/builtin_util.h"
#include "lib/jinja/builtins.h"
#include "lib/jinja/text.h"
#include "lib/jinja/value_format.h"

namespace pagoda::jinja {
namespace {

// jinja2's sandbox: ranges longer than this are refused (sandbox.MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

absl::StatusOr<Value> Range(Interpreter& interp, CallArgs& args) {
  std::vector<int64_t> bounds;
  for (const Value& a : args.positional) {
    if (!a.is_int() && !a.is_bool()) {
      return TemplateError(
          "TypeError",
          absl::StrCat("'", a.TypeName(), "' object cannot be interpreted as an integer"));
    }
    bounds.push_back(a.as_int());
  }
  if (bounds.empty() || bounds.size() > 3) {
    return TemplateError("TypeError", "range expected 1 to 3 arguments");
  }
  const int64_t start = bounds.size() == 1 ? 0 : bounds[0];
  const int64_t stop = bounds.size() == 1 ? bounds[0] : bounds[1];
  const int64_t step = bounds.size() == 3 ? bounds[2] : 1;
  if (step == 0) return TemplateError("ValueError", "range() arg 3 must not be zero");
  const __int128 span =
      step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 stride = step > 0 ? static_cast<__int128>(step) : -static_cast<__int128>(step);
  const __int128 count = span <= 0 ? 0 : (span + stride - 1) / stride;
  if (count > kMaxRange) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (",
        kMaxRange, ")."));
  }
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(count)));
  ValueList out;
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i)
    out.push_back(Value::Int(start + i * step));
  return Value::List(std::move(out));
}

absl::StatusOr<Value> StrftimeNow(Interpreter& interp, CallArgs& args) {
  const Value* format = Arg(args, 0, "format");
  if (format == nullptr || !format->is_string()) {
    return TemplateError("TypeError", "strftime_now takes a format string");
  }
  const std::string& f = format->as_string();
  if (f.empty()) return Value::String("");
  if (f.size() > 1024) return TemplateError("ValueError", "strftime_now format is too long");
  // Every conversion expands to at most a few dozen bytes.
  std::string out(f.size() * 64 + 64, '\0');
  const size_t n = std::strftime(out.data(), out.size(), f.c_str(), &interp.now());
  out.resize(n);
  return Value::String(std::move(out));
}

}  // namespace

void AddGlobals(Interpreter& interp, Scope& scope) {
  Interpreter* const in = &interp;
  scope.Set("range", Value::Callable("range", [in](CallArgs& args) { return Range(*in, args); }));
  scope.Set("namespace",
            Value::Callable("namespace", [in](CallArgs& args) -> absl::StatusOr<Value> {
              Value ns = in->NewNamespace();
              for (const Value& a : args.positional) {
                if (!a.is_dict()) return TemplateError("TypeError", "namespace() takes a dict");
                for (const auto& [key, value] : a.as_dict().entries()) {
                  if (!key.is_string()) {
                    return TemplateError("TypeError", "namespace() keywords must be strings");
                  }
                  RETURN_IF_ERROR(StoreInNamespace(ns, key.as_string(), value));
                }
              }
              for (auto& [key, value] : args.keyword) {
                RETURN_IF_ERROR(StoreInNamespace(ns, key, value));
              }
              return ns;
            }));
  scope.Set("dict", Value::Callable("dict", [](CallArgs& args) -> absl::StatusOr<Value> {
              auto dict = std::make_shared<ValueDict>();
              for (const Value& a : args.positional) {
                if (!a.is_dict()) return TemplateError("TypeError", "dict() takes a dict");
                for (const auto& [key, value] : a.as_dict().entries()) {
                  RETURN_IF_ERROR(dict->SetKey(key, value));
                }
              }
              for (auto& [key, value] : args.keyword) dict->Set(key, value);
              return Value::Dict(std::move(dict));
            }));
  scope.Set("raise_exception",
            Value::Callable("raise_exception", [](CallArgs& args) -> absl::StatusOr<Value> {
              std::string message;
              if (const Value* m = Arg(args, 0, "message")) {
                ASSIGN_OR_RETURN(message, ToPythonStr(*m));
              }
              absl::Status status = absl::InvalidArgumentError(message);
              status.SetPayload(kRaisedPayload, absl::Cord("1"));
              return status;
            }));
  scope.Set("strftime_now", Value::Callable("strftime_now", [in](CallArgs& args) {
              return StrftimeNow(*in, args);
            }));
}

}  // namespace pagoda::jinja
