#include "router/api/openai/openai_constraint.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "lib/grammar/json_schema.h"
#include "lib/grammar/regex_to_gbnf.h"
#include "router/api/openai/openai_error.h"

namespace pagoda {
namespace {

// A JSON Schema given as an object, or as its JSON text (vLLM's guided_json takes both).
absl::StatusOr<std::string> SchemaGbnf(const OrderedJson& schema, absl::string_view field) {
  absl::StatusOr<std::string> gbnf;
  if (schema.is_object() || schema.is_boolean()) {
    gbnf = JsonSchemaValueToGbnf(schema);
  } else if (schema.is_string()) {
    gbnf = JsonSchemaToGbnf(schema.get_ref<const std::string&>());
  } else {
    return BadField(field, "the schema must be a JSON object", kInvalidType);
  }
  if (!gbnf.ok()) return BadField(field, gbnf.status().message());
  return gbnf;
}

// response_format: the GBNF it asks for, or nullopt for {"type": "text"}.
absl::StatusOr<std::optional<std::string>> ResponseFormatGbnf(const OrderedJson& format) {
  constexpr char kField[] = "response_format";
  if (!format.is_object()) return BadField(kField, "must be an object", kInvalidType);
  const OrderedJson* type = JsonMember(format, "type");
  if (type == nullptr || !type->is_string()) {
    return BadField(kField, "needs a type: \"text\", \"json_object\" or \"json_schema\"");
  }
  for (const auto& [key, value] : format.items()) {
    if (key != "type" && key != "json_schema" && key != "schema") {
      return BadField(kField, absl::StrCat("unknown field \"", key.substr(0, 64), "\""),
                      kUnsupportedParameter);
    }
  }
  const std::string& name = type->get_ref<const std::string&>();
  if (name == "text") return std::nullopt;
  if (name == "json_object") {
    // llama.cpp's extension: json_object with a schema is json_schema.
    if (const OrderedJson* schema = JsonMember(format, "schema"))
      return SchemaGbnf(*schema, kField);
    return JsonObjectGbnf();
  }
  if (name != "json_schema") {
    return BadField(kField,
                    absl::StrCat("type \"", name.substr(0, 64),
                                 "\" is not one of \"text\", \"json_object\", \"json_schema\""));
  }
  const OrderedJson* spec = JsonMember(format, "json_schema");
  if (spec == nullptr || !spec->is_object()) {
    return BadField(kField, "type json_schema needs a json_schema object", kMissingRequired);
  }
  for (const auto& [key, value] : spec->items()) {
    if (key == "name" || key == "description") {
      if (!value.is_string())
        return BadField(kField, absl::StrCat("json_schema.", key, " must be a string"));
    } else if (key == "strict") {
      // Not strict is allowed too: the output follows the schema either way.
      if (!value.is_boolean() && !value.is_null())
        return BadField(kField, "json_schema.strict must be true or false");
    } else if (key != "schema") {
      return BadField(kField,
                      absl::StrCat("json_schema has an unknown field \"", key.substr(0, 64), "\""),
                      kUnsupportedParameter);
    }
  }
  const OrderedJson* schema = JsonMember(*spec, "schema");
  // OpenAI's default is the empty schema, which any JSON value satisfies.
  return SchemaGbnf(schema != nullptr ? *schema : OrderedJson::object(), kField);
}

absl::StatusOr<std::string> StringField(const OrderedJson& v, const char* field) {
  if (!v.is_string()) return BadField(field, "must be a string", kInvalidType);
  return v.get<std::string>();
}

}  // namespace

absl::Status ReadConstraint(const OrderedJson& body, ConstraintCompiler* compiler,
                            GenerationRequest* request) {
  for (const char* unsupported :
       {"guided_decoding_backend", "guided_whitespace_pattern", "structural_tag", "json_schema"}) {
    if (JsonMember(body, unsupported) != nullptr) {
      return BadField(unsupported, "is not supported", kUnsupportedParameter);
    }
  }
  std::vector<std::string> given;  // the constraint fields set
  std::optional<std::string> gbnf;
  const char* field = nullptr;
  if (const OrderedJson* format = JsonMember(body, "response_format")) {
    ASSIGN_OR_RETURN(std::optional<std::string> g, ResponseFormatGbnf(*format));
    if (g.has_value()) {
      given.push_back("response_format");
      gbnf = std::move(g);
      field = "response_format";
    }
  }
  if (const OrderedJson* v = JsonMember(body, "grammar")) {
    given.push_back("grammar");
    ASSIGN_OR_RETURN(gbnf, StringField(*v, "grammar"));
    field = "grammar";
  }
  if (const OrderedJson* v = JsonMember(body, "guided_grammar")) {
    given.push_back("guided_grammar");
    ASSIGN_OR_RETURN(gbnf, StringField(*v, "guided_grammar"));
    field = "guided_grammar";
  }
  if (const OrderedJson* v = JsonMember(body, "guided_json")) {
    given.push_back("guided_json");
    ASSIGN_OR_RETURN(gbnf, SchemaGbnf(*v, "guided_json"));
    field = "guided_json";
  }
  if (const OrderedJson* v = JsonMember(body, "guided_regex")) {
    given.push_back("guided_regex");
    ASSIGN_OR_RETURN(std::string regex, StringField(*v, "guided_regex"));
    absl::StatusOr<std::string> expr = RegexToGbnf(regex, /*json_string=*/false);
    if (!expr.ok()) return BadField("guided_regex", expr.status().message());
    gbnf = absl::StrCat("root ::= ", *expr, "\n");
    field = "guided_regex";
  }
  if (const OrderedJson* v = JsonMember(body, "guided_choice")) {
    given.push_back("guided_choice");
    if (!v->is_array() || v->empty() || v->size() > kMaxChoices) {
      return BadField("guided_choice",
                      absl::StrCat("must be a list of 1 to ", kMaxChoices, " strings"));
    }
    std::vector<std::string> alternatives;
    for (const OrderedJson& choice : *v) {
      if (!choice.is_string() || choice.get_ref<const std::string&>().empty() ||
          choice.get_ref<const std::string&>().size() > kMaxChoiceBytes) {
        return BadField("guided_choice", absl::StrCat("each choice must be a string of 1 to ",
                                                      kMaxChoiceBytes, " bytes"));
      }
      alternatives.push_back(GbnfLiteral(choice.get_ref<const std::string&>()));
    }
    gbnf = absl::StrCat("root ::= ", absl::StrJoin(alternatives, " | "), "\n");
    field = "guided_choice";
  }
  if (given.size() > 1) {
    return BadField(given[0], absl::StrCat("at most one output constraint per request; got ",
                                           absl::StrJoin(given, ", ")));
  }
  if (!gbnf.has_value()) return absl::OkStatus();
  if (compiler == nullptr) {
    return BadField(field, "structured output is not available on this server",
                    kUnsupportedParameter);
  }
  ASSIGN_OR_RETURN(request->constraint, compiler->Compile(*gbnf, field));
  return absl::OkStatus();
}

}  // namespace pagoda
