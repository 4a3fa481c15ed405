// jinja2's filters on lists and dicts: first, items, join, select, map, sort, unique, sum, ...
#include <algorithm>
#include <optional>
#include <string>

#include "common/status_macros.h"
#include "lib/jinja/builtin_util.h"
#include "lib/jinja/builtins.h"
#include "lib/jinja/filters.h"
#include "lib/jinja/operators.h"
#include "lib/jinja/text.h"
#include "lib/text/utf8.h"

namespace pagoda::jinja {
namespace {

absl::StatusOr<Value> FilterFirst(Interpreter& interp, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(const ValueList items, Iterate(interp, v));
  if (items.empty()) return Value::Undefined("UndefinedError: No first item, sequence was empty.");
  return items.front();
}

absl::StatusOr<Value> FilterLast(Interpreter& interp, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(const ValueList items, Iterate(interp, v));
  if (items.empty()) return Value::Undefined("UndefinedError: No last item, sequence was empty.");
  return items.back();
}

absl::StatusOr<Value> FilterList(Interpreter& interp, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(ValueList items, Iterate(interp, v));
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(items.size())));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> FilterReverse(Interpreter& interp, const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::u32string cps = DecodeUtf8(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value::String(EncodeUtf8(cps));
  }
  ASSIGN_OR_RETURN(ValueList items, Iterate(interp, v));
  std::reverse(items.begin(), items.end());
  return Value::List(std::move(items));
}

absl::StatusOr<Value> FilterItems(Interpreter& interp, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::List({});
  if (!v.is_dict() || v.is_namespace()) {
    return TemplateError("FilterArgumentError", "Can only get item pairs from a mapping.");
  }
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(v.as_dict().size())));
  ValueList out;
  for (const auto& [key, value] : v.as_dict().entries()) {
    out.push_back(Value::List({key, value}, /*is_tuple=*/true));
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> FilterDictsort(Interpreter& interp, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(Value pairs, FilterItems(interp, v, args));
  const bool case_sensitive = BoolArg(args, 0, "case_sensitive", false);
  const Value* by = Arg(args, 1, "by");
  const bool reverse = BoolArg(args, 2, "reverse", false);
  const size_t pos = by && by->is_string() && by->as_string() == "value" ? 1 : 0;
  ValueList items = pairs.as_list();
  RETURN_IF_ERROR(SortBy(items, !case_sensitive, reverse,
                         [pos](const Value& pair) { return pair.as_list()[pos]; }));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> FilterJoin(Interpreter& interp, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(const ValueList items, Iterate(interp, v));
  const Value* sep_value = Arg(args, 0, "d");
  std::string sep;
  if (sep_value) {
    ASSIGN_OR_RETURN(sep, Str(*sep_value));
  }
  const Value* attribute = Arg(args, 1, "attribute");
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    Value item = items[i];
    if (attribute && !attribute->is_none()) {
      ASSIGN_OR_RETURN(const std::string path, Str(*attribute));
      item = LookupPath(interp, item, path);
    }
    ASSIGN_OR_RETURN(const std::string s, Str(item));
    out += s;
    RETURN_IF_ERROR(interp.CheckSize(static_cast<int64_t>(out.size())));
  }
  RETURN_IF_ERROR(interp.ChargeBytes(static_cast<int64_t>(out.size())));
  return Value::String(std::move(out));
}

// select / reject / selectattr / rejectattr share this: keep items whose test result (or
// truthiness, with no test) equals `keep`.
absl::StatusOr<Value> Select(Interpreter& interp, const Value& v, CallArgs& args, bool on_attribute,
                             bool keep) {
  // jinja2 skips a false subject (`if value:`) before iterating: none | select is empty.
  if (!v.Truthy()) return Value::Generator({});
  ASSIGN_OR_RETURN(const ValueList items, Iterate(interp, v));
  size_t next = 0;
  std::string attribute;
  if (on_attribute) {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      return TemplateError("FilterArgumentError", "Missing parameter for attribute name");
    }
    attribute = args.positional[next++].as_string();
  }
  std::optional<std::string> test;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) {
      return TemplateError("TypeError", "the test name must be a string");
    }
    test = args.positional[next++].as_string();
  }
  CallArgs test_args;
  test_args.positional.assign(args.positional.begin() + next, args.positional.end());
  test_args.keyword = args.keyword;
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(items.size())));
  ValueList out;
  for (const Value& item : items) {
    const Value subject = on_attribute ? LookupPath(interp, item, attribute) : item;
    bool result;
    if (test) {
      CallArgs copy = test_args;
      ASSIGN_OR_RETURN(result, ApplyTest(interp, *test, subject, copy));
    } else {
      result = subject.Truthy();
    }
    if (result == keep) out.push_back(item);
  }
  return Value::Generator(std::move(out));
}

absl::StatusOr<Value> FilterSelect(Interpreter& i, const Value& v, CallArgs& a) {
  return Select(i, v, a, false, true);
}
absl::StatusOr<Value> FilterReject(Interpreter& i, const Value& v, CallArgs& a) {
  return Select(i, v, a, false, false);
}
absl::StatusOr<Value> FilterSelectattr(Interpreter& i, const Value& v, CallArgs& a) {
  return Select(i, v, a, true, true);
}
absl::StatusOr<Value> FilterRejectattr(Interpreter& i, const Value& v, CallArgs& a) {
  return Select(i, v, a, true, false);
}

absl::StatusOr<Value> FilterMap(Interpreter& interp, const Value& v, CallArgs& args) {
  // As select: jinja2 maps nothing over a false subject, None included.
  if (!v.Truthy()) return Value::Generator({});
  ASSIGN_OR_RETURN(const ValueList items, Iterate(interp, v));
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(items.size())));
  ValueList out;
  if (args.positional.empty()) {
    const Value* attribute = Arg(args, 99, "attribute");
    if (attribute == nullptr || !attribute->is_string()) {
      return TemplateError("FilterArgumentError", "map needs a filter name or attribute=");
    }
    const Value* fallback = Arg(args, 99, "default");
    for (const Value& item : items) {
      Value x = LookupPath(interp, item, attribute->as_string());
      if (x.is_undefined() && fallback) x = *fallback;
      out.push_back(std::move(x));
    }
    return Value::Generator(std::move(out));
  }
  if (!args.positional[0].is_string())
    return TemplateError("TypeError", "map's filter must be named");
  const std::string filter = args.positional[0].as_string();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    CallArgs copy = rest;
    ASSIGN_OR_RETURN(Value x, ApplyFilter(interp, filter, item, copy));
    out.push_back(std::move(x));
  }
  return Value::Generator(std::move(out));
}

absl::StatusOr<Value> FilterSort(Interpreter& interp, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(ValueList items, Iterate(interp, v));
  const bool reverse = BoolArg(args, 0, "reverse", false);
  const bool case_sensitive = BoolArg(args, 1, "case_sensitive", false);
  const Value* attribute = Arg(args, 2, "attribute");
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(items.size())));
  RETURN_IF_ERROR(SortBy(items, !case_sensitive, reverse, [&](const Value& item) {
    return attribute && attribute->is_string() ? LookupPath(interp, item, attribute->as_string())
                                               : item;
  }));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> FilterUnique(Interpreter& interp, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(const ValueList items, Iterate(interp, v));
  const bool case_sensitive = BoolArg(args, 0, "case_sensitive", false);
  const Value* attribute = Arg(args, 1, "attribute");
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(items.size() * items.size() / 256 + 1)));
  ValueList out;
  ValueList seen;
  for (const Value& item : items) {
    Value key = attribute && attribute->is_string()
                    ? LookupPath(interp, item, attribute->as_string())
                    : item;
    if (!case_sensitive && key.is_string()) key = Value::String(AsciiLower(key.as_string()));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return Equals(s, key); })) {
      continue;
    }
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> MinMax(Interpreter& interp, const Value& v, CallArgs& args, bool max) {
  ASSIGN_OR_RETURN(ValueList items, Iterate(interp, v));
  if (items.empty())
    return Value::Undefined("UndefinedError: No aggregated item, sequence was empty.");
  const bool case_sensitive = BoolArg(args, 0, "case_sensitive", false);
  const Value* attribute = Arg(args, 1, "attribute");
  RETURN_IF_ERROR(SortBy(items, !case_sensitive, false, [&](const Value& item) {
    return attribute && attribute->is_string() ? LookupPath(interp, item, attribute->as_string())
                                               : item;
  }));
  return max ? items.back() : items.front();
}

absl::StatusOr<Value> FilterMin(Interpreter& i, const Value& v, CallArgs& a) {
  return MinMax(i, v, a, false);
}
absl::StatusOr<Value> FilterMax(Interpreter& i, const Value& v, CallArgs& a) {
  return MinMax(i, v, a, true);
}

absl::StatusOr<Value> FilterSum(Interpreter& interp, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(const ValueList items, Iterate(interp, v));
  const Value* attribute = Arg(args, 0, "attribute");
  const Value* start = Arg(args, 1, "start");
  Value total = start ? *start : Value::Int(0);
  for (const Value& item : items) {
    const Value x = attribute && attribute->is_string()
                        ? LookupPath(interp, item, attribute->as_string())
                        : item;
    if (!total.is_number() || !x.is_number()) {
      return TemplateError("TypeError", "sum() can only add numbers");
    }
    if (total.is_float() || x.is_float()) {
      total = Value::Float(total.as_float() + x.as_float());
    } else {
      ASSIGN_OR_RETURN(total, IntResult(static_cast<__int128>(total.as_int()) + x.as_int()));
    }
  }
  return total;
}

}  // namespace

void AddSequenceFilters(FilterTable& table) {
  table.insert({
      {"dictsort", FilterDictsort},
      {"first", FilterFirst},
      {"items", FilterItems},
      {"join", FilterJoin},
      {"last", FilterLast},
      {"list", FilterList},
      {"map", FilterMap},
      {"max", FilterMax},
      {"min", FilterMin},
      {"reject", FilterReject},
      {"rejectattr", FilterRejectattr},
      {"reverse", FilterReverse},
      {"select", FilterSelect},
      {"selectattr", FilterSelectattr},
      {"sort", FilterSort},
      {"sum", FilterSum},
      {"unique", FilterUnique},
  });
}

}  // namespace pagoda::jinja
