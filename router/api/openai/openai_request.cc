#include "router/api/openai/openai_request.h"

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "router/api/openai/chat_prompt.h"
#include "router/api/openai/openai_constraint.h"
#include "router/api/openai/openai_error.h"
#include "router/api/openai/openai_fields.h"
#include "router/api/openai/openai_tools.h"
#include "router/api/openai/request_json.h"
#include "router/api/request_policy.h"

namespace pagoda {
namespace {

absl::Status ReadTokenIds(const OrderedJson& v, const char* name, int max_count,
                          std::vector<int>* out) {
  if (!v.is_array() && !IsIdList(v)) return BadField(name, "must be a list of token ids");
  const int64_t count = IsIdList(v) ? IdListSize(v) : static_cast<int64_t>(v.size());
  if (count > max_count) return BadField(name, absl::StrCat("more than ", max_count, " token ids"));
  if (IsIdList(v)) {
    AppendIdList(v, out);
    return absl::OkStatus();
  }
  for (const OrderedJson& id : v) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int>::max()) {
      return BadField(name, "each token id must be an integer >= 0");
    }
    out->push_back(id.get<int>());
  }
  return absl::OkStatus();
}

// OpenAI's logit_bias: {"token id": bias}. Ranges are checked with the rest of the request.
absl::Status ReadLogitBias(const OrderedJson& body, SamplingParams* params) {
  const OrderedJson* v = JsonMember(body, "logit_bias");
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_object()) return BadField("logit_bias", "must be an object", kInvalidType);
  std::vector<LogitBias> entries;
  for (const auto& [key, bias] : v->items()) {
    int id;
    if (!absl::SimpleAtoi(key, &id) || id < 0) {
      return BadField("logit_bias",
                      absl::StrCat("key \"", key.substr(0, 32), "\" is not a token id"));
    }
    if (!bias.is_number()) {
      return BadField("logit_bias", absl::StrCat("the bias of token ", id, " must be a number"),
                      kInvalidType);
    }
    entries.push_back({id, static_cast<float>(bias.get<double>())});
  }
  return SetLogitBias(std::move(entries), params);
}

// Everything the two endpoints share: model, sampling, stops, n, seed, streaming.
absl::Status ReadCommon(const OrderedJson& body, const OpenAiContext& context, OpenAiCall* call,
                        GenerationRequest* base) {
  if (const OrderedJson* m = JsonMember(body, "model")) {
    if (!m->is_string()) return BadField("model", "must be a string", kInvalidType);
    call->model = m->get<std::string>();
  }
  if (const OrderedJson* u = JsonMember(body, "user"); u != nullptr && !u->is_string()) {
    return BadField("user", "must be a string", kInvalidType);
  }
  // vLLM's tenant key for the prefix cache (GenerationRequest::cache_salt).
  if (const OrderedJson* salt = JsonMember(body, "cache_salt")) {
    if (!salt->is_string()) return BadField("cache_salt", "must be a string", kInvalidType);
    base->cache_salt = salt->get<std::string>();
    if (base->cache_salt.empty() || base->cache_salt.size() > kMaxCacheSaltBytes) {
      return BadField("cache_salt", absl::StrCat("must be 1 to ", kMaxCacheSaltBytes, " bytes"));
    }
  }
  // Fields left out: the model's defaults (generation_config.json), and a fresh seed.
  SamplingOverrides set;
  SamplingParams given;
  std::optional<double> x;
  RETURN_IF_ERROR(ReadNumberField(body, "temperature", 0, 1e6, &x));
  if (x.has_value()) set.temperature = static_cast<float>(*x);
  x.reset();
  RETURN_IF_ERROR(ReadNumberField(body, "top_p", 0, 1, &x));
  if (x.has_value()) set.top_p = static_cast<float>(*x);
  if (set.top_p.has_value() && *set.top_p <= 0) return BadField("top_p", "must be in (0, 1]");
  x.reset();
  RETURN_IF_ERROR(ReadNumberField(body, "min_p", 0, 1, &x));
  given.min_p = static_cast<float>(x.value_or(0));
  x.reset();
  RETURN_IF_ERROR(ReadNumberField(body, "presence_penalty", -2, 2, &x));
  given.presence_penalty = static_cast<float>(x.value_or(0));
  x.reset();
  RETURN_IF_ERROR(ReadNumberField(body, "frequency_penalty", -2, 2, &x));
  given.frequency_penalty = static_cast<float>(x.value_or(0));
  x.reset();
  RETURN_IF_ERROR(ReadNumberField(body, "repetition_penalty", 1e-6, 1e6, &x));
  if (x.has_value()) set.repetition_penalty = static_cast<float>(*x);
  std::optional<int64_t> i;
  // vLLM's top_k: -1 (or 0) turns it off.
  RETURN_IF_ERROR(ReadIntField(body, "top_k", -1, std::numeric_limits<int>::max(), &i));
  if (i.has_value()) set.top_k = static_cast<int>(std::max<int64_t>(*i, 0));
  i.reset();
  RETURN_IF_ERROR(ReadIntField(body, "seed", std::numeric_limits<int64_t>::min(),
                               std::numeric_limits<int64_t>::max(), &i));
  if (i.has_value()) set.seed = static_cast<uint64_t>(*i);
  i.reset();
  RETURN_IF_ERROR(ReadIntField(body, "min_tokens", 0, std::numeric_limits<int>::max(), &i));
  given.min_tokens = static_cast<int>(i.value_or(0));
  i.reset();
  RETURN_IF_ERROR(ReadLogitBias(body, &given));
  RETURN_IF_ERROR(ReadIntField(body, "prompt_logprobs", 0, kMaxLogprobs, &i));
  call->prompt_logprobs = static_cast<int>(i.value_or(-1));
  i.reset();
  base->sampling = ResolveSampling(set, context.cluster->config(), given);
  call->seed = base->sampling.seed;
  // Bounded here, where it is read: the call's writer builds one choice per n before the
  // GenerationStream sees the requests.
  RETURN_IF_ERROR(ReadIntField(body, "n", 1, context.cluster->max_n(), &i));
  base->n = static_cast<int>(i.value_or(1));
  i.reset();
  RETURN_IF_ERROR(ReadBoolField(body, "ignore_eos", &base->ignore_eos));
  if (const OrderedJson* ids = JsonMember(body, "stop_token_ids")) {
    RETURN_IF_ERROR(ReadTokenIds(*ids, "stop_token_ids", kMaxStopTokenIds, &base->stop_token_ids));
  }
  if (const OrderedJson* stop = JsonMember(body, "stop")) {
    if (stop->is_string()) {
      call->stops.push_back(stop->get<std::string>());
    } else if (stop->is_array() && stop->size() <= kMaxStopStrings) {
      for (const OrderedJson& s : *stop) {
        if (!s.is_string()) return BadField("stop", "must be a string or a list of strings");
        call->stops.push_back(s.get<std::string>());
      }
    } else {
      return BadField("stop", absl::StrCat("must be a string or a list of at most ",
                                           kMaxStopStrings, " strings"));
    }
    for (const std::string& s : call->stops) {
      if (s.empty() || s.size() > kMaxStopStringBytes) {
        return BadField("stop",
                        absl::StrCat("each string must be 1 to ", kMaxStopStringBytes, " bytes"));
      }
    }
  }
  RETURN_IF_ERROR(ReadBoolField(body, "stream", &call->stream));
  if (const OrderedJson* options = JsonMember(body, "stream_options")) {
    if (!options->is_object()) return BadField("stream_options", "must be an object", kInvalidType);
    if (!call->stream) return BadField("stream_options", "only allowed with stream: true");
    RETURN_IF_ERROR(ReadBoolField(*options, "include_usage", &call->include_usage));
  }
  bool skip_special_tokens = true;
  RETURN_IF_ERROR(ReadBoolField(body, "skip_special_tokens", &skip_special_tokens));
  return ReadConstraint(body, context.constraints, base);
}

// max_tokens (or chat's max_completion_tokens, which wins), below the model length (a prompt
// has a token at least; the core checks the prompt's own length with it).
absl::Status ReadMaxTokens(const OrderedJson& body, bool chat, int max_model_len,
                           GenerationRequest* base) {
  std::optional<int64_t> i;
  auto read = [&](const char* name, int64_t min) -> absl::Status {
    std::optional<int64_t> value;
    RETURN_IF_ERROR(ReadIntField(body, name, min, std::numeric_limits<int>::max(), &value));
    if (!value.has_value()) return absl::OkStatus();
    if (*value >= max_model_len) {
      return BadField(name,
                      absl::StrCat(*value, " leaves no room for a prompt in the model length of ",
                                   max_model_len),
                      kContextLengthExceeded);
    }
    i = value;
    return absl::OkStatus();
  };
  // Completions' max_tokens 0 asks for the prompt's log probabilities only (checked once the
  // call knows whether it asks for them).
  RETURN_IF_ERROR(read("max_tokens", chat ? 1 : 0));
  if (chat) RETURN_IF_ERROR(read("max_completion_tokens", 1));
  if (i.has_value()) {
    base->max_tokens = static_cast<int>(*i);
  } else if (!chat) {
    base->max_tokens = 16;  // OpenAI's default for completions; chat runs to the model length
  }
  return absl::OkStatus();
}

// The finished call: each request asks for the log probabilities the call reports.
OpenAiCall Finish(OpenAiCall call) {
  const int prompt_logprobs =
      std::max(call.echo_logprobs ? call.top_logprobs : -1, call.prompt_logprobs);
  for (GenerationRequest& r : call.requests) {
    if (r.sampling.logprobs > 0 || call.top_logprobs >= 0) {
      r.sampling.logprobs = std::max(call.top_logprobs, 1);  // the chosen token's own, at least
    }
    r.sampling.prompt_logprobs = prompt_logprobs;
  }
  return call;
}

// How the chat's output is parsed (tool calls, reasoning), and the grammar of a call that
// tool_choice demands.
absl::Status ReadToolOutput(const OrderedJson& body, const OpenAiContext& context,
                            std::string_view prompt, OpenAiCall* call, GenerationRequest* base) {
  const SpecialTokenIds special = [&context](std::string_view text) {
    return context.constraints != nullptr ? context.constraints->SpecialTokenId(text) : -1;
  };
  ASSIGN_OR_RETURN(ToolRequest tools,
                   ReadToolRequest(body, context.tool_format, /*build_grammar=*/true, special));
  call->output.tool_format = tools.parse;
  call->output.max_tool_calls = tools.max_calls;
  call->output.reasoning = context.reasoning_format;
  call->output.starts_in_reasoning = StartsInReasoning(context.reasoning_format, prompt);
  if (!tools.gbnf.has_value()) return absl::OkStatus();
  if (base->constraint != nullptr) {
    return BadField("tool_choice",
                    "a required tool call cannot be combined with response_format, grammar or "
                    "guided_*");
  }
  if (context.constraints == nullptr) {
    return BadField("tool_choice", "constrained decoding is not available on this server",
                    kUnsupportedParameter);
  }
  ASSIGN_OR_RETURN(base->constraint, context.constraints->Compile(*tools.gbnf, "tool_choice"));
  // The grammar makes the output a call from its first byte: no reasoning block before it.
  call->output.reasoning = ReasoningFormat::kNone;
  return absl::OkStatus();
}

}  // namespace

absl::Status InOpenAiFieldNames(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument) return status;
  std::string message(status.message());
  // The core names its fields as the gRPC API does.
  if (absl::StartsWith(message, "prompt_token_ids")) message.replace(0, 16, "prompt");
  // "prompt (N tokens) + max_tokens (M) exceeds ...": max_tokens is what the client set.
  if (absl::StrContains(message, "+ max_tokens")) message = "max_tokens: " + message;
  absl::Status renamed = absl::InvalidArgumentError(message);
  status.ForEachPayload([&renamed](absl::string_view url, const absl::Cord& payload) {
    renamed.SetPayload(url, payload);
  });
  return renamed;
}

absl::StatusOr<OpenAiCall> ParseCompletionRequest(const OrderedJson& body,
                                                  const OpenAiContext& context) {
  RETURN_IF_ERROR(CheckKnownFields(body, /*chat=*/false));
  OpenAiCall call;
  GenerationRequest base;
  RETURN_IF_ERROR(ReadCommon(body, context, &call, &base));
  RETURN_IF_ERROR(ReadMaxTokens(body, /*chat=*/false, context.cluster->max_model_len(), &base));
  RETURN_IF_ERROR(ReadBoolField(body, "echo", &call.echo));
  std::optional<int64_t> logprobs;
  RETURN_IF_ERROR(ReadIntField(body, "logprobs", 0, kMaxLogprobs, &logprobs));
  if (logprobs.has_value()) call.top_logprobs = static_cast<int>(*logprobs);
  call.echo_logprobs = call.echo && logprobs.has_value();
  if (base.max_tokens == 0 && !call.echo_logprobs && call.prompt_logprobs < 0) {
    return BadField("max_tokens",
                    "must be >= 1 (0 only with echo and logprobs, or prompt_logprobs)");
  }
  if (const OrderedJson* suffix = JsonMember(body, "suffix"); suffix != nullptr) {
    return BadField("suffix", "is not supported", kUnsupportedParameter);
  }

  const OrderedJson* prompt = JsonMember(body, "prompt");
  if (prompt == nullptr) return BadField("prompt", "is required", kMissingRequired);
  const int max_len = context.cluster->max_model_len();
  // Each prompt is a string or a list of token ids; a list of either makes several.
  std::vector<const OrderedJson*> prompts;
  const bool one = prompt->is_string() || IsIdList(*prompt) ||
                   (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number());
  if (one) {
    prompts.push_back(prompt);
  } else if (prompt->is_array() && !prompt->empty() &&
             static_cast<int>(prompt->size()) <= kMaxPromptsPerCall) {
    for (const OrderedJson& p : *prompt) prompts.push_back(&p);
  } else {
    return BadField("prompt",
                    absl::StrCat("must be a string, a list of token ids, or a list of 1 to ",
                                 kMaxPromptsPerCall, " of either"));
  }
  for (const OrderedJson* p : prompts) {
    GenerationRequest r = base;
    if (p->is_string()) {
      const std::string& text = p->get_ref<const std::string&>();
      if (text.empty()) return BadField("prompt", "must not be empty");
      ASSIGN_OR_RETURN(r.prompt_ids, EncodePrompt(*context.tokenizer, text, max_len));
      call.prompt_texts.push_back(text);
    } else {
      const int64_t count =
          IsIdList(*p) ? IdListSize(*p) : (p->is_array() ? static_cast<int64_t>(p->size()) : 0);
      if (count >= max_len) {
        return BadField(
            "prompt", absl::StrCat(count, " tokens leave no room in the model length of ", max_len),
            kContextLengthExceeded);
      }
      RETURN_IF_ERROR(ReadTokenIds(*p, "prompt", max_len, &r.prompt_ids));
      if (r.prompt_ids.empty()) return BadField("prompt", "must not be empty");
      call.prompt_texts.push_back(call.echo ? context.tokenizer->Decode(r.prompt_ids)
                                            : std::string());
    }
    call.requests.push_back(std::move(r));
  }
  return Finish(std::move(call));
}

absl::StatusOr<OpenAiCall> ParseChatRequest(const OrderedJson& body, const OpenAiContext& context) {
  RETURN_IF_ERROR(CheckKnownFields(body, /*chat=*/true));
  OpenAiCall call;
  call.chat = true;
  GenerationRequest base;
  RETURN_IF_ERROR(ReadCommon(body, context, &call, &base));
  RETURN_IF_ERROR(ReadMaxTokens(body, /*chat=*/true, context.cluster->max_model_len(), &base));
  bool logprobs = false;
  RETURN_IF_ERROR(ReadBoolField(body, "logprobs", &logprobs));
  std::optional<int64_t> top;
  RETURN_IF_ERROR(ReadIntField(body, "top_logprobs", 0, kMaxLogprobs, &top));
  if (top.has_value() && !logprobs) return BadField("top_logprobs", "needs logprobs: true");
  if (logprobs) call.top_logprobs = static_cast<int>(top.value_or(0));

  ASSIGN_OR_RETURN(std::string text, RenderChat(body, context));
  RETURN_IF_ERROR(ReadToolOutput(body, context, text, &call, &base));
  // The template wrote BOS and every special token itself.
  ASSIGN_OR_RETURN(base.prompt_ids,
                   EncodePrompt(*context.tokenizer, text, context.cluster->max_model_len(),
                                "messages", /*add_special_tokens=*/false));
  if (base.prompt_ids.empty()) return BadField("messages", "the rendered prompt is empty");
  call.prompt_texts.push_back(std::move(text));
  call.requests.push_back(std::move(base));
  return Finish(std::move(call));
}

}  // namespace pagoda
