#include "router/api/openai/openai_tools.h"

#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "router/api/openai/openai_error.h"
#include "router/api/openai/tools/tool_grammar.h"

namespace pagoda {
namespace {

// Nesting of a tool call's arguments (JSON text in a message) at most: parsing recurses.
constexpr JsonShapeLimits kArgumentsShape = {.max_depth = 64};

bool IsFunctionName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// `tools` checked: each {"type": "function", "function": {"name", "description"?,
// "parameters"?, "strict"?}}; their specs in order.
absl::StatusOr<std::vector<ToolSpec>> ReadTools(const OrderedJson& tools) {
  constexpr char kField[] = "tools";
  if (!tools.is_array() || tools.size() > kMaxTools) {
    return BadField(kField, absl::StrCat("must be a list of at most ", kMaxTools, " tools"),
                    kInvalidType);
  }
  std::vector<ToolSpec> specs;
  absl::flat_hash_set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const OrderedJson& tool = tools[i];
    const std::string at = absl::StrCat("tools[", i, "]");
    if (!tool.is_object()) return BadField(kField, at + " must be an object");
    const OrderedJson* type = JsonMember(tool, "type");
    if (type == nullptr || *type != "function") {
      return BadField(kField, at + ".type must be \"function\" (the only tool type served)");
    }
    for (const auto& [key, value] : tool.items()) {
      if (key != "type" && key != "function") {
        return BadField(kField,
                        absl::StrCat(at, " has an unknown field \"", key.substr(0, 64), "\""),
                        kUnsupportedParameter);
      }
    }
    const OrderedJson* function = JsonMember(tool, "function");
    if (function == nullptr || !function->is_object()) {
      return BadField(kField, at + ".function must be an object", kMissingRequired);
    }
    ToolSpec spec;
    for (const auto& [key, value] : function->items()) {
      if (value.is_null()) continue;
      if (key == "name") {
        if (!value.is_string() || !IsFunctionName(value.get<std::string>())) {
          return BadField(kField, at + ".function.name must match [a-zA-Z0-9_-]{1,64}");
        }
        spec.name = value.get<std::string>();
      } else if (key == "description") {
        if (!value.is_string())
          return BadField(kField, at + ".function.description must be a string");
      } else if (key == "parameters") {
        if (!value.is_object()) {
          return BadField(kField, at + ".function.parameters must be a JSON Schema object");
        }
        spec.parameters = value;
      } else if (key == "strict") {
        // Enforced calls follow the schema either way; free ("auto") calls are not checked.
        if (!value.is_boolean()) return BadField(kField, at + ".function.strict must be a boolean");
      } else {
        return BadField(
            kField, absl::StrCat(at, ".function has an unknown field \"", key.substr(0, 64), "\""),
            kUnsupportedParameter);
      }
    }
    if (spec.name.empty())
      return BadField(kField, at + ".function.name is required", kMissingRequired);
    if (!names.insert(spec.name).second) {
      return BadField(kField, absl::StrCat("two tools are named \"", spec.name, "\""));
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace

absl::StatusOr<ToolRequest> ReadToolRequest(const OrderedJson& body, ToolCallFormat format,
                                            bool build_grammar, const SpecialTokenIds& special) {
  ToolRequest out;
  std::vector<ToolSpec> specs;
  if (const OrderedJson* tools = JsonMember(body, "tools")) {
    ASSIGN_OR_RETURN(specs, ReadTools(*tools));
    if (!specs.empty()) out.tools = *tools;
  }
  bool parallel = true;
  if (const OrderedJson* p = JsonMember(body, "parallel_tool_calls")) {
    if (!p->is_boolean())
      return BadField("parallel_tool_calls", "must be true or false", kInvalidType);
    parallel = p->get<bool>();
  }
  if (!parallel) out.max_calls = 1;
  // OpenAI's default: "auto" with tools, "none" without.
  std::string choice = specs.empty() ? "none" : "auto";
  std::vector<ToolSpec> enforced;
  if (const OrderedJson* c = JsonMember(body, "tool_choice")) {
    if (c->is_string()) {
      choice = c->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required") {
        return BadField("tool_choice",
                        "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                        "\"function\": {\"name\": ...}}");
      }
      if (choice == "required") enforced = specs;
    } else {
      const OrderedJson* type = c->is_object() ? JsonMember(*c, "type") : nullptr;
      const OrderedJson* function = c->is_object() ? JsonMember(*c, "function") : nullptr;
      const OrderedJson* name =
          function != nullptr && function->is_object() ? JsonMember(*function, "name") : nullptr;
      if (type == nullptr || *type != "function" || name == nullptr || !name->is_string()) {
        return BadField(
            "tool_choice",
            "an object must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
      }
      for (const ToolSpec& s : specs) {
        if (s.name == name->get_ref<const std::string&>()) enforced.push_back(s);
      }
      if (enforced.empty()) {
        return BadField("tool_choice",
                        absl::StrCat("the function \"", name->get<std::string>().substr(0, 64),
                                     "\" is not one of the tools"));
      }
      choice = "function";
    }
    if (choice != "none" && specs.empty()) {
      return BadField("tool_choice", absl::StrCat("\"", choice, "\" needs tools"));
    }
  }
  if (choice == "none") return out;
  out.parse = format;
  if (enforced.empty() || !build_grammar) return out;
  absl::StatusOr<std::string> gbnf = ToolCallGbnf(format, enforced, parallel, special);
  if (!gbnf.ok()) {
    // No parser is the server's setup; a schema the grammar cannot serve is the tool's.
    return BadField(format == ToolCallFormat::kNone ? "tool_choice" : "tools",
                    gbnf.status().message(), kUnsupportedParameter);
  }
  out.gbnf = *std::move(gbnf);
  return out;
}

absl::Status PrepareToolTurn(OrderedJson* message) {
  if (OrderedJson* calls = message->contains("tool_calls") ? &(*message)["tool_calls"] : nullptr;
      calls != nullptr && !calls->is_null()) {
    if (!calls->is_array()) return BadField("messages", "tool_calls must be a list");
    for (OrderedJson& call : *calls) {
      OrderedJson* function =
          call.is_object() && call.contains("function") ? &call["function"] : nullptr;
      if (function == nullptr || !function->is_object() || !function->contains("name") ||
          !(*function)["name"].is_string()) {
        return BadField("messages",
                        "each tool call must be {\"id\", \"type\": \"function\", \"function\": "
                        "{\"name\", \"arguments\"}}");
      }
      OrderedJson& arguments = (*function)["arguments"];
      if (arguments.is_string()) {
        const std::string& text = arguments.get_ref<const std::string&>();
        OrderedJson parsed;
        if (CheckJsonShape(text, kArgumentsShape, "arguments").ok()) {
          parsed = OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
        }
        if (!parsed.is_object()) {
          return BadField("messages",
                          "a tool call's function.arguments must be JSON text of an object");
        }
        arguments = std::move(parsed);
      } else if (!arguments.is_object()) {
        return BadField("messages",
                        "a tool call's function.arguments must be JSON text of an object");
      }
    }
    // As vLLM passes it: templates test or search the content (Qwen3's `in`). Set last:
    // adding a key moves the object's members (`calls` pointed into them).
    if (!message->contains("content") || (*message)["content"].is_null()) {
      (*message)["content"] = "";
    }
  }
  if (const auto it = message->find("tool_call_id");
      it != message->end() && !it->is_null() && !it->is_string()) {
    return BadField("messages", "tool_call_id must be a string");
  }
  return absl::OkStatus();
}

}  // namespace pagoda
