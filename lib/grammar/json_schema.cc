#include "lib/grammar/json_schema.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "lib/grammar/integer_range.h"
#include "lib/grammar/regex_to_gbnf.h"

namespace pagoda {
namespace {

constexpr int kMaxCount = 10000;  // GrammarLimits::max_repetition
constexpr int kMaxDepth = 64;

// The rules every JSON grammar uses. A value's rule has no whitespace around it; containers
// put `ws` after each opening bracket, comma, colon and value.
constexpr char kBaseRules[] = R"(ws ::= | " " | "\n" [ \t]{0,20}
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
number ::= integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws ( string ws ":" ws value ws ("," ws string ws ":" ws value ws)* )? "}"
array ::= "[" ws ( value ws ("," ws value ws)* )? "]"
date ::= [0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])
time ::= ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,9})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])
uuid ::= [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}
)";

const std::set<std::string>& Annotations() {
  static const auto* k = new std::set<std::string>{
      "title",    "description", "default",     "examples",   "$schema",  "$id",
      "$comment", "$defs",       "definitions", "deprecated", "readOnly", "writeOnly"};
  return *k;
}

const std::set<std::string>& Supported() {
  static const auto* k = new std::set<std::string>{"type",
                                                   "properties",
                                                   "required",
                                                   "additionalProperties",
                                                   "items",
                                                   "minItems",
                                                   "maxItems",
                                                   "enum",
                                                   "const",
                                                   "anyOf",
                                                   "oneOf",
                                                   "allOf",
                                                   "$ref",
                                                   "minLength",
                                                   "maxLength",
                                                   "pattern",
                                                   "format",
                                                   "minimum",
                                                   "maximum",
                                                   "exclusiveMinimum",
                                                   "exclusiveMaximum"};
  return *k;
}

absl::Status Unsupported(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("JSON Schema: ", what));
}

class SchemaConverter {
 public:
  SchemaConverter(const OrderedJson& root, std::string_view prefix)
      : root_(root), prefix_(prefix) {}

  // With a prefix, the rules only (JsonSchemaRulesGbnf).
  absl::StatusOr<std::string> Convert() {
    ASSIGN_OR_RETURN(std::string top, Visit(root_, "root-value", 0));
    std::string out =
        absl::StrCat(prefix_, "root ::= ", top, "\n", prefix_.empty() ? kBaseRules : "");
    for (const std::string& rule : rules_) absl::StrAppend(&out, rule, "\n");
    return out;
  }

 private:
  // A new rule for `body`, named after `hint`.
  std::string AddRule(const std::string& hint, const std::string& body) {
    std::string name;
    for (char c : hint) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      name += ok ? c : '-';
    }
    name = absl::StrCat(prefix_, "s-", name.substr(0, 40), "-", rules_.size());
    rules_.push_back(absl::StrCat(name, " ::= ", body));
    return name;
  }

  absl::StatusOr<int> Count(const OrderedJson& s, const char* key, int fallback) {
    if (!s.contains(key)) return fallback;
    const OrderedJson& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return Unsupported(absl::StrCat("'", key, "' must be a non-negative integer"));
    }
    if (v.get<int64_t>() > kMaxCount) {
      return Unsupported(absl::StrCat("'", key, "' over ", kMaxCount));
    }
    return v.get<int>();
  }

  absl::StatusOr<std::string> Ref(const std::string& ref, int depth) {
    auto it = refs_.find(ref);
    if (it != refs_.end()) return it->second;
    const OrderedJson* target = &root_;
    if (ref != "#") {
      std::string name;
      for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
        if (ref.starts_with(prefix)) {
          name = ref.substr(std::string_view(prefix).size());
          const std::string section =
              std::string(prefix).substr(2, std::string_view(prefix).size() - 3);
          if (!root_.contains(section) || !root_[section].is_object() ||
              !root_[section].contains(name)) {
            return Unsupported(absl::StrCat("$ref '", ref, "' points at nothing"));
          }
          target = &root_[section][name];
        }
      }
      if (name.empty()) {
        return Unsupported(
            absl::StrCat("$ref '", ref, "': only #/$defs/... and #/definitions/..."));
      }
    }
    // Named before it is visited, so a schema can refer to itself.
    const std::string rule = AddRule(ref == "#" ? "root" : ref.substr(ref.rfind('/') + 1), "");
    refs_[ref] = rule;
    const size_t index = rules_.size() - 1;
    ASSIGN_OR_RETURN(std::string body, Visit(*target, rule, depth + 1));
    rules_[index] = absl::StrCat(rule, " ::= ", body);
    return rule;
  }

  absl::StatusOr<std::string> Visit(const OrderedJson& s, const std::string& hint, int depth) {
    if (depth > kMaxDepth) return Unsupported("schema nested too deep");
    if (s.is_boolean()) {
      if (!s.get<bool>()) return Unsupported("the schema false accepts nothing");
      return std::string("value");
    }
    if (!s.is_object()) return Unsupported("a schema must be an object or a boolean");
    for (const auto& [key, v] : s.items()) {
      if (!Supported().contains(key) && !Annotations().contains(key)) {
        return Unsupported(absl::StrCat("keyword '", key, "' is not supported"));
      }
    }
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) return Unsupported("'$ref' must be a string");
      return Ref(s["$ref"].get<std::string>(), depth);
    }
    if (s.contains("const")) return GbnfLiteral(s["const"].dump());
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) {
        return Unsupported("'enum' must be a non-empty array");
      }
      std::vector<std::string> alts;
      for (const OrderedJson& v : s["enum"]) alts.push_back(GbnfLiteral(v.dump()));
      return AddRule(hint, absl::StrJoin(alts, " | "));
    }
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
      if (!s.contains(key)) continue;
      const OrderedJson& list = s[key];
      if (!list.is_array() || list.empty()) {
        return Unsupported(absl::StrCat("'", key, "' must be a non-empty array"));
      }
      if (std::string_view(key) == "allOf" && list.size() != 1) {
        return Unsupported("'allOf' with more than one schema is not supported");
      }
      std::vector<std::string> alts;
      for (size_t i = 0; i < list.size(); ++i) {
        ASSIGN_OR_RETURN(std::string alt, Visit(list[i], absl::StrCat(hint, "-", i), depth + 1));
        alts.push_back(alt);
      }
      return AddRule(hint, absl::StrJoin(alts, " | "));
    }
    if (s.contains("type")) {
      const OrderedJson& type = s["type"];
      if (type.is_array()) {
        if (type.empty()) return Unsupported("'type' must not be an empty list");
        std::vector<std::string> alts;
        for (const OrderedJson& t : type) {
          if (!t.is_string()) return Unsupported("'type' lists names");
          ASSIGN_OR_RETURN(std::string alt, Typed(s, t.get<std::string>(), hint, depth));
          alts.push_back(alt);
        }
        return AddRule(hint, absl::StrJoin(alts, " | "));
      }
      if (!type.is_string()) return Unsupported("'type' must be a name or a list of names");
      return Typed(s, type.get<std::string>(), hint, depth);
    }
    if (s.contains("properties") || s.contains("additionalProperties")) {
      return Typed(s, "object", hint, depth);
    }
    if (s.contains("items")) return Typed(s, "array", hint, depth);
    return std::string("value");
  }

  absl::StatusOr<std::string> Typed(const OrderedJson& s, const std::string& type,
                                    const std::string& hint, int depth) {
    if (type == "object") return Object(s, hint, depth);
    if (type == "array") return Array(s, hint, depth);
    if (type == "string") return String(s, hint);
    if (type == "integer") return Integer(s, hint);
    if (type == "number") {
      for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
        if (s.contains(key)) {
          return Unsupported(absl::StrCat("'", key, "' on a number (only on an integer)"));
        }
      }
      return std::string("number");
    }
    if (type == "boolean" || type == "null") return type;
    return Unsupported(absl::StrCat("type '", type, "' is not supported"));
  }

  absl::StatusOr<std::string> Object(const OrderedJson& s, const std::string& hint, int depth) {
    std::vector<std::string> kvs;  // "key" ws ":" ws value ws, in declared order
    std::vector<bool> required;
    std::set<std::string> names;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Unsupported("'required' must be an array");
      for (const OrderedJson& r : s["required"]) {
        if (!r.is_string()) return Unsupported("'required' lists names");
        names.insert(r.get<std::string>());
      }
    }
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return Unsupported("'properties' must be an object");
      for (const auto& [key, sub] : s["properties"].items()) {
        ASSIGN_OR_RETURN(std::string v, Visit(sub, key, depth + 1));
        kvs.push_back(
            absl::StrCat(GbnfLiteral(OrderedJson(key).dump()), " ws \":\" ws ", v, " ws"));
        required.push_back(names.erase(key) > 0);
      }
    }
    if (!names.empty()) {
      return Unsupported(
          absl::StrCat("required property '", *names.begin(), "' not in 'properties'"));
    }
    std::string extra;  // the rule of one extra key-value pair, if any are allowed
    if (s.contains("additionalProperties") && s["additionalProperties"] != false) {
      ASSIGN_OR_RETURN(std::string v, Visit(s["additionalProperties"], hint + "-extra", depth + 1));
      extra = AddRule(hint + "-kv", absl::StrCat("string ws \":\" ws ", v, " ws"));
    }
    // rest_i: properties i.. after at least one was written (each after a comma);
    // first_i: properties i.. with none written yet.
    const int n = kvs.size();
    std::string rest =
        extra.empty() ? "\"\"" : AddRule(hint + "-rest", absl::StrCat("(\",\" ws ", extra, ")*"));
    std::string first = extra.empty()
                            ? "\"\""
                            : AddRule(hint + "-first", absl::StrCat("(", extra, " ", rest, ")?"));
    for (int i = n - 1; i >= 0; --i) {
      const std::string next_rest = required[i] ? absl::StrCat("\",\" ws ", kvs[i], " ", rest)
                                                : absl::StrCat("(\",\" ws ", kvs[i], ")? ", rest);
      const std::string next_first = required[i] ? absl::StrCat(kvs[i], " ", rest)
                                                 : absl::StrCat(kvs[i], " ", rest, " | ", first);
      rest = AddRule(hint + "-rest", next_rest);
      first = AddRule(hint + "-first", next_first);
    }
    return AddRule(hint, absl::StrCat("\"{\" ws ", first, " \"}\""));
  }

  absl::StatusOr<std::string> Array(const OrderedJson& s, const std::string& hint, int depth) {
    std::string item = "value";
    if (s.contains("prefixItems")) return Unsupported("keyword 'prefixItems' is not supported");
    if (s.contains("items")) {
      ASSIGN_OR_RETURN(item, Visit(s["items"], hint + "-item", depth + 1));
    }
    ASSIGN_OR_RETURN(const int min, Count(s, "minItems", 0));
    ASSIGN_OR_RETURN(const int max, Count(s, "maxItems", -1));
    if (max >= 0 && max < min) return Unsupported("'maxItems' below 'minItems'");
    if (max == 0) return AddRule(hint, "\"[\" ws \"]\"");
    const std::string more = max < 0 ? absl::StrCat("{", std::max(min - 1, 0), ",}")
                                     : absl::StrCat("{", std::max(min - 1, 0), ",", max - 1, "}");
    std::string body = absl::StrCat(item, " ws (\",\" ws ", item, " ws)", more);
    if (min == 0) body = absl::StrCat("(", body, ")?");
    return AddRule(hint, absl::StrCat("\"[\" ws ", body, " \"]\""));
  }

  absl::StatusOr<std::string> String(const OrderedJson& s, const std::string& hint) {
    if (s.contains("format")) {
      const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
      static const std::map<std::string, std::string> kFormats = {
          {"date", "date"}, {"time", "time"}, {"date-time", "date \"T\" time"}, {"uuid", "uuid"}};
      auto it = kFormats.find(f);
      if (it == kFormats.end())
        return Unsupported(absl::StrCat("format '", f, "' is not supported"));
      return AddRule(hint, absl::StrCat("\"\\\"\" ", it->second, " \"\\\"\""));
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return Unsupported("'pattern' must be a string");
      auto body = RegexToGbnf(s["pattern"].get<std::string>());
      if (!body.ok()) return Unsupported(std::string(body.status().message()));
      return AddRule(hint, absl::StrCat("\"\\\"\" ", *body, " \"\\\"\""));
    }
    ASSIGN_OR_RETURN(const int min, Count(s, "minLength", 0));
    ASSIGN_OR_RETURN(const int max, Count(s, "maxLength", -1));
    if (min == 0 && max < 0) return std::string("string");
    if (max >= 0 && max < min) return Unsupported("'maxLength' below 'minLength'");
    const std::string count =
        max < 0 ? absl::StrCat("{", min, ",}") : absl::StrCat("{", min, ",", max, "}");
    return AddRule(hint, absl::StrCat("\"\\\"\" char", count, " \"\\\"\""));
  }

  absl::StatusOr<std::string> Integer(const OrderedJson& s, const std::string& hint) {
    std::optional<int64_t> lo, hi;
    for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      if (!s.contains(key)) continue;
      const OrderedJson& v = s[key];
      if (!v.is_number() || std::abs(v.get<double>()) > 1e15) {
        return Unsupported(absl::StrCat("'", key, "' must be a number within 1e15"));
      }
      const std::string k = key;
      const double d = v.get<double>();
      if (k == "minimum") lo = static_cast<int64_t>(std::ceil(d));
      if (k == "exclusiveMinimum") lo = static_cast<int64_t>(std::floor(d)) + 1;
      if (k == "maximum") hi = static_cast<int64_t>(std::floor(d));
      if (k == "exclusiveMaximum") hi = static_cast<int64_t>(std::ceil(d)) - 1;
    }
    if (!lo && !hi) return std::string("integer");
    if (lo && hi && *lo > *hi) return Unsupported("'minimum' above 'maximum'");
    return AddRule(hint, IntegerRangeGbnf(lo, hi));
  }

  const OrderedJson& root_;
  const std::string prefix_;
  std::vector<std::string> rules_;
  std::map<std::string, std::string> refs_;
};

}  // namespace

absl::StatusOr<std::string> JsonSchemaValueToGbnf(const OrderedJson& schema) {
  return SchemaConverter(schema, "").Convert();
}

absl::StatusOr<std::string> JsonSchemaRulesGbnf(const OrderedJson& schema,
                                                std::string_view prefix) {
  if (prefix.empty()) return absl::InvalidArgumentError("JsonSchemaRulesGbnf needs a prefix");
  return SchemaConverter(schema, prefix).Convert();
}

std::string JsonBaseGbnf() { return kBaseRules; }

absl::StatusOr<std::string> JsonSchemaToGbnf(std::string_view schema) {
  OrderedJson parsed = OrderedJson::parse(schema, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Unsupported("the schema is not valid JSON");
  return JsonSchemaValueToGbnf(parsed);
}

std::string JsonObjectGbnf() { return absl::StrCat("root ::= object\n", kBaseRules); }

}  // namespace pagoda
