#include "router/api/openai/openai_fields.h"

#include <cmath>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "router/api/openai/openai_error.h"

namespace pagoda {
namespace {

// Read by both endpoints: OpenAI's, then vLLM's and llama.cpp's extensions. The last four
// are refused with their own reasons by the structured-output reader.
constexpr std::string_view kCommon[] = {
    "model", "user", "temperature", "top_p", "presence_penalty", "frequency_penalty", "logit_bias",
    "seed", "n", "stop", "stream", "stream_options", "max_tokens", "response_format",
    // vLLM's sampling and output extensions
    "top_k", "min_p", "repetition_penalty", "min_tokens", "ignore_eos", "stop_token_ids",
    "skip_special_tokens", "prompt_logprobs", "cache_salt",
    // constraints: llama.cpp's grammar, vLLM's guided_*
    "grammar", "guided_json", "guided_regex", "guided_choice", "guided_grammar",
    "guided_decoding_backend", "guided_whitespace_pattern", "structural_tag", "json_schema"};

constexpr std::string_view kChat[] = {"messages", "max_completion_tokens", "logprobs",
                                      "top_logprobs", "tools", "tool_choice", "parallel_tool_calls",
                                      // vLLM's template extensions
                                      "add_generation_prompt", "continue_final_message",
                                      "chat_template_kwargs", "documents"};

constexpr std::string_view kCompletions[] = {"prompt", "echo", "logprobs", "suffix"};

struct Refused {
  std::string_view field;
  std::string_view why;
};

// OpenAI's fields that are known and not served, each with why.
constexpr Refused kRefused[] = {
    {"audio", "audio output is not supported (text models only)"},
    {"modalities", "only text output is supported"},
    {"prediction", "predicted outputs are not supported"},
    {"web_search_options", "web search is not supported"},
    {"store", "stored completions are not supported"},
    {"metadata", "is only for stored completions, which are not supported"},
    {"service_tier", "service tiers are not supported"},
    {"reasoning_effort", "is not supported (reasoning models think as their template says)"},
    {"verbosity", "is not supported"},
    {"functions", "is deprecated and not supported: send tools"},
    {"function_call", "is deprecated and not supported: send tool_choice"},
    {"prompt_cache_key", "is not supported (prompt prefixes are cached automatically)"},
    {"safety_identifier", "is not supported"},
    {"best_of", "is not supported (ask for n samples)"},
    {"chat_template", "per-request chat templates are not supported (see --chat-template)"},
};

// A client's field name fit to quote: at most 64 bytes, printable ASCII.
std::string Quoted(std::string_view key) {
  std::string out(key.substr(0, 64));
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return out;
}

template <size_t N>
bool In(const std::string_view (&list)[N], std::string_view key) {
  for (std::string_view k : list) {
    if (k == key) return true;
  }
  return false;
}

}  // namespace

absl::Status ReadNumberField(const OrderedJson& body, const char* name, double min, double max,
                             std::optional<double>* out) {
  const OrderedJson* v = JsonMember(body, name);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_number()) return BadField(name, "must be a number", kInvalidType);
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < min || x > max) {
    return BadField(name, absl::StrCat("must be in [", min, ", ", max, "]"));
  }
  *out = x;
  return absl::OkStatus();
}

absl::Status ReadIntField(const OrderedJson& body, const char* name, int64_t min, int64_t max,
                          std::optional<int64_t>* out) {
  const OrderedJson* v = JsonMember(body, name);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_number_integer()) return BadField(name, "must be an integer", kInvalidType);
  const int64_t x =
      v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX ? INT64_MAX : v->get<int64_t>();
  if (x < min || x > max) return BadField(name, absl::StrCat("must be in [", min, ", ", max, "]"));
  *out = x;
  return absl::OkStatus();
}

absl::Status ReadBoolField(const OrderedJson& body, const char* name, bool* out) {
  const OrderedJson* v = JsonMember(body, name);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_boolean()) return BadField(name, "must be true or false", kInvalidType);
  *out = v->get<bool>();
  return absl::OkStatus();
}

absl::Status CheckKnownFields(const OrderedJson& body, bool chat) {
  for (const auto& [key, value] : body.items()) {
    if (value.is_null() || In(kCommon, key) || (chat ? In(kChat, key) : In(kCompletions, key))) {
      continue;
    }
    for (const Refused& r : kRefused) {
      if (r.field == key) return BadField(key, std::string(r.why), kUnsupportedParameter);
    }
    return BadField(
        Quoted(key),
        absl::StrCat("is not a field of ", chat ? "/v1/chat/completions" : "/v1/completions",
                     " (unknown fields are refused, not ignored)"),
        kUnsupportedParameter);
  }
  if (const OrderedJson* options = JsonMember(body, "stream_options");
      options != nullptr && options->is_object()) {
    for (const auto& [key, value] : options->items()) {
      if (key != "include_usage" && !value.is_null()) {
        return BadField(
            "stream_options",
            absl::StrCat("unknown field \"", Quoted(key), "\" (only include_usage is served)"),
            kUnsupportedParameter);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace pagoda
