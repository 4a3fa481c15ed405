#include "router/api/openai/tools/tool_grammar.h"

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "lib/grammar/json_schema.h"

namespace pagoda {
namespace {

// Points `schema`'s local $refs at its definitions' new home, `#/$defs/<prefix>name`, so
// that several tools' schemas can share one document ("#" is the tool's own root).
void RewriteRefs(OrderedJson* schema, const std::string& prefix) {
  if (schema->is_array()) {
    for (OrderedJson& v : *schema) RewriteRefs(&v, prefix);
    return;
  }
  if (!schema->is_object()) return;
  for (auto& [key, value] : schema->items()) {
    if (key == "$ref" && value.is_string()) {
      const std::string ref = value.get<std::string>();
      if (ref == "#") {
        value = absl::StrCat("#/$defs/", prefix, "root");
      } else if (ref.starts_with("#/$defs/")) {
        value = absl::StrCat("#/$defs/", prefix, ref.substr(8));
      } else if (ref.starts_with("#/definitions/")) {
        value = absl::StrCat("#/$defs/", prefix, ref.substr(14));
      }
    } else {
      RewriteRefs(&value, prefix);
    }
  }
}

// A format's call: the key its arguments go under.
const char* ArgumentsKey(ToolCallFormat format) {
  return format == ToolCallFormat::kLlama3Json ? "parameters" : "arguments";
}

// The id of `marker`'s special token, else -1.
int SpecialId(const char* marker, const SpecialTokenIds& special) {
  return special ? special(marker) : -1;
}

// `marker` as GBNF: its token's terminal when it is one special token, else a literal.
std::string Marker(const char* marker, const SpecialTokenIds& special) {
  const int id = SpecialId(marker, special);
  if (id >= 0) return absl::StrCat("<[", id, "]>");
  return absl::StrCat("\"", marker, "\"");
}

// Mistral Small 3.2's form, for a tokenizer that has [ARGS] (the one that model was trained on):
// [TOOL_CALLS]name[ARGS]{...} per call, each tool's arguments its own schema's rules.
absl::StatusOr<std::string> MistralArgsGbnf(const std::vector<ToolSpec>& tools, bool parallel,
                                            int calls_id, int args_id) {
  std::string calls, rules;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string prefix = absl::StrCat("t", i, "-");
    const OrderedJson parameters =
        tools[i].parameters.is_null()
            ? OrderedJson{{"type", "object"}, {"additionalProperties", true}}
            : tools[i].parameters;
    absl::StatusOr<std::string> gbnf = JsonSchemaRulesGbnf(parameters, prefix);
    if (!gbnf.ok()) return gbnf.status();
    // Tool names are [a-zA-Z0-9_-]: a literal as they are.
    absl::StrAppend(&calls, i == 0 ? "" : " | ", "\"", tools[i].name, "\" <[", args_id, "]> ",
                    prefix, "root");
    rules += *gbnf;
  }
  return absl::StrCat("root ::= one-call", parallel ? "+" : "", "\none-call ::= <[", calls_id,
                      "]> (", calls, ")\n", rules, JsonBaseGbnf());
}

}  // namespace

absl::StatusOr<std::string> ToolCallGbnf(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                                         bool parallel, const SpecialTokenIds& special) {
  if (format == ToolCallFormat::kNone) {
    return absl::InvalidArgumentError(
        "this server parses no tool calls (start the router with --tool-call-parser=NAME)");
  }
  if (format == ToolCallFormat::kMistral) {
    const int calls_id = SpecialId("[TOOL_CALLS]", special);
    const int args_id = SpecialId("[ARGS]", special);
    if (calls_id >= 0 && args_id >= 0) return MistralArgsGbnf(tools, parallel, calls_id, args_id);
  }
  OrderedJson defs = OrderedJson::object();
  OrderedJson calls = OrderedJson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string prefix = absl::StrCat("t", i, "-");
    OrderedJson parameters = tools[i].parameters.is_null()
                                 ? OrderedJson{{"type", "object"}, {"additionalProperties", true}}
                                 : tools[i].parameters;
    RewriteRefs(&parameters, prefix);
    for (const char* section : {"$defs", "definitions"}) {
      auto it = parameters.find(section);
      if (it == parameters.end()) continue;
      if (it->is_object()) {
        for (auto& [name, def] : it->items()) defs[prefix + name] = def;
      }
      parameters.erase(it);
    }
    defs[prefix + "root"] = parameters;
    calls.push_back(OrderedJson{
        {"type", "object"},
        {"properties",
         {{"name", {{"const", tools[i].name}}},
          {ArgumentsKey(format), {{"$ref", absl::StrCat("#/$defs/", prefix, "root")}}}}},
        {"required", {"name", ArgumentsKey(format)}},
        {"additionalProperties", false}});
  }
  OrderedJson schema = calls.size() == 1 ? calls[0] : OrderedJson{{"anyOf", calls}};
  schema["$defs"] = std::move(defs);
  absl::StatusOr<std::string> gbnf = JsonSchemaValueToGbnf(schema);
  if (!gbnf.ok()) return gbnf.status();
  // The schema's start rule becomes one call; the format's frame is the new start.
  if (!gbnf->starts_with("root ::= ")) {
    return absl::InternalError("the schema's grammar does not start with its root rule");
  }
  std::string out;
  std::string call;
  const char* separator = nullptr;
  switch (format) {
    case ToolCallFormat::kHermes:
      out = "root ::= one-call";
      call = absl::StrCat("one-call ::= ", Marker("<tool_call>", special),
                          " \"\\n\" tool-call \"\\n\" ", Marker("</tool_call>", special), "\n");
      separator = "\"\\n\"";
      break;
    case ToolCallFormat::kLlama3Json:
      out = "root ::= one-call";
      call = "one-call ::= tool-call\n";
      separator = "\"; \"";
      break;
    case ToolCallFormat::kMistral:
      out = absl::StrCat("root ::= ", Marker("[TOOL_CALLS]", special), " \"[\" one-call");
      call = "one-call ::= tool-call\n";
      separator = "\", \"";
      break;
    case ToolCallFormat::kNone:
      break;
  }
  if (parallel) absl::StrAppend(&out, " (", separator, " one-call)*");
  if (format == ToolCallFormat::kMistral) out += " \"]\"";
  absl::StrAppend(&out, "\n", call, "tool-call ::= ", gbnf->substr(9));
  return out;
}

}  // namespace pagoda
