#include "router/api/openai/openai_response.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/json.h"

namespace pagoda {

namespace {

// finish_reason: "tool_calls" for an output that stopped after calls, as OpenAI says it.
std::string FinishName(FinishReason reason, bool tool_calls) {
  if (reason == FinishReason::kStop && tool_calls) return "tool_calls";
  return std::string(FinishReasonName(reason));
}

}  // namespace

std::string SseEvent(std::string_view payload) {
  std::string event = "data: ";
  event.append(payload);
  return event.append("\n\n");
}

std::string DumpJson(const OrderedJson& j) {
  return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

OpenAiResponse::OpenAiResponse(const OpenAiCall& call, const Tokenizer* tokenizer,
                               std::string model, std::string fingerprint)
    : call_(call),
      tokenizer_(tokenizer),
      model_(std::move(model)),
      fingerprint_(std::move(fingerprint)),
      id_(absl::StrFormat("%s-%016x", call.chat ? "chatcmpl" : "cmpl", RandomSeed())),
      created_(absl::ToUnixSeconds(absl::Now())) {
  n_ = call.requests.empty() ? 1 : call.requests[0].n;
  for (size_t i = 0; i < call.requests.size(); ++i) {
    for (int j = 0; j < n_; ++j) {
      Choice c;
      c.prev_id = call.requests[i].prompt_ids.back();
      if (call.chat && call.output.active()) c.output = std::make_unique<ChatOutput>(call.output);
      if (call.echo) {
        c.text = call.prompt_texts[i];
        c.text_offset = static_cast<int>(c.text.size());
      }
      choices_.push_back(std::move(c));
    }
  }
}

std::string OpenAiResponse::TokenText(int prev_id, int id) const {
  return tokenizer_->TokenBytes(prev_id, id);
}

OrderedJson OpenAiResponse::Envelope(bool chunk) const {
  OrderedJson j;
  j["id"] = id_;
  j["object"] =
      call_.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  j["created"] = created_;
  j["model"] = model_;
  j["system_fingerprint"] = fingerprint_;
  j["seed"] = call_.seed;
  return j;
}

void OpenAiResponse::AppendPromptEntries(const OutputChunk& c, OrderedJson* out) const {
  const std::vector<int>& prompt = PromptOf(c);
  const PromptLogprobs& p = *c.prompt_logprobs;
  const size_t top_n = p.logprobs.empty() ? 0 : p.top.size() / p.logprobs.size();
  const size_t shown = static_cast<size_t>(std::max(call_.top_logprobs, 0));
  int offset = 0;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const int prev = i == 0 ? -1 : prompt[i - 1];
    const std::string text = TokenText(prev, prompt[i]);
    (*out)["tokens"].push_back(text);
    (*out)["text_offset"].push_back(offset);
    offset += static_cast<int>(text.size());
    const size_t k = i - p.first_position;  // entry of position i (first_position is 1)
    if (i < static_cast<size_t>(p.first_position) || k >= p.logprobs.size()) {
      (*out)["token_logprobs"].push_back(nullptr);
      (*out)["top_logprobs"].push_back(nullptr);
      continue;
    }
    (*out)["token_logprobs"].push_back(p.logprobs[k]);
    OrderedJson top = OrderedJson::object();
    for (size_t j = 0; j < top_n && j < shown; ++j) {
      const TokenLogprob& t = p.top[k * top_n + j];
      top[TokenText(prev, t.token_id)] = t.logprob;
    }
    (*out)["top_logprobs"].push_back(std::move(top));
  }
}

OrderedJson OpenAiResponse::VllmPromptLogprobs(const OutputChunk& c) const {
  const std::vector<int>& prompt = PromptOf(c);
  const PromptLogprobs& p = *c.prompt_logprobs;
  const size_t top_n = p.logprobs.empty() ? 0 : p.top.size() / p.logprobs.size();
  const size_t shown = static_cast<size_t>(std::max(call_.prompt_logprobs, 0));
  OrderedJson out = OrderedJson::array();
  for (size_t i = 0; i < prompt.size(); ++i) {
    const size_t k = i - p.first_position;
    if (i < static_cast<size_t>(p.first_position) || k >= p.logprobs.size()) {
      out.push_back(nullptr);
      continue;
    }
    const int prev = prompt[i - 1];
    auto entry = [&](int id, float logprob, int rank) {
      return OrderedJson{
          {"logprob", logprob}, {"rank", rank}, {"decoded_token", TokenText(prev, id)}};
    };
    OrderedJson position = OrderedJson::object();
    position[std::to_string(prompt[i])] = entry(prompt[i], p.logprobs[k], p.ranks[k]);
    for (size_t j = 0; j < top_n && j < shown; ++j) {
      const TokenLogprob& t = p.top[k * top_n + j];
      const std::string key = std::to_string(t.token_id);
      if (!position.contains(key)) position[key] = entry(t.token_id, t.logprob, j + 1);
    }
    out.push_back(std::move(position));
  }
  return out;
}

OrderedJson OpenAiResponse::LogprobsOf(const OutputChunk& c, Choice* choice) const {
  OrderedJson fresh = call_.chat ? OrderedJson{{"content", OrderedJson::array()}}
                                 : OrderedJson{{"tokens", OrderedJson::array()},
                                               {"token_logprobs", OrderedJson::array()},
                                               {"top_logprobs", OrderedJson::array()},
                                               {"text_offset", OrderedJson::array()}};
  if (call_.echo_logprobs && c.prompt_logprobs) AppendPromptEntries(c, &fresh);
  for (const SampledToken& s : c.samples) {
    const std::string text = TokenText(choice->prev_id, s.token_id);
    // The chosen token's own log probability is always asked; its alternatives only as many
    // as the client wants.
    const size_t top_n = static_cast<size_t>(std::max(call_.top_logprobs, 0));
    if (call_.chat) {
      auto entry = [&](int id, float logprob) {
        const std::string t = TokenText(choice->prev_id, id);
        OrderedJson bytes = OrderedJson::array();
        for (unsigned char b : t) bytes.push_back(b);
        return OrderedJson{{"token", t}, {"logprob", logprob}, {"bytes", std::move(bytes)}};
      };
      OrderedJson e = entry(s.token_id, s.logprob);
      e["top_logprobs"] = OrderedJson::array();
      for (size_t k = 0; k < s.top_logprobs.size() && k < top_n; ++k) {
        e["top_logprobs"].push_back(entry(s.top_logprobs[k].token_id, s.top_logprobs[k].logprob));
      }
      fresh["content"].push_back(e);
    } else {
      OrderedJson top = OrderedJson::object();
      for (size_t k = 0; k < s.top_logprobs.size() && k < top_n; ++k) {
        top[TokenText(choice->prev_id, s.top_logprobs[k].token_id)] = s.top_logprobs[k].logprob;
      }
      fresh["tokens"].push_back(text);
      fresh["token_logprobs"].push_back(s.logprob);
      fresh["top_logprobs"].push_back(std::move(top));
      fresh["text_offset"].push_back(choice->text_offset);
    }
    choice->text_offset += static_cast<int>(text.size());
    choice->prev_id = s.token_id;
  }
  return fresh;
}

void OpenAiResponse::CountUsage(const OutputChunk& c) {
  if (!c.finished) return;
  if (c.index % n_ == 0) {  // the prompt is counted once, not once per sample
    prompt_tokens_ += c.prompt_tokens;
    cached_tokens_ += c.cached_tokens;
  }
  completion_tokens_ += c.completion_tokens;
}

OrderedJson OpenAiResponse::UsageJson() const {
  return {{"prompt_tokens", prompt_tokens_},
          {"completion_tokens", completion_tokens_},
          {"total_tokens", prompt_tokens_ + completion_tokens_},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens_}}}};
}

std::vector<std::string> OpenAiResponse::OpeningEvents() {
  std::vector<std::string> events;
  for (size_t i = 0; i < choices_.size(); ++i) {
    if (!call_.chat && !call_.echo) break;
    OrderedJson j = Envelope(true);
    OrderedJson choice = {{"index", i}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
    if (call_.chat) {
      choice["delta"] = {{"role", "assistant"}, {"content", ""}};
    } else {
      choice["text"] = choices_[i].text;
    }
    j["choices"] = OrderedJson::array({std::move(choice)});
    events.push_back(DumpJson(j));
  }
  return events;
}

std::vector<std::string> OpenAiResponse::Events(const std::vector<OutputChunk>& chunks) {
  std::vector<std::string> events;
  for (const OutputChunk& c : chunks) {
    Choice& choice = choices_[c.index];
    OrderedJson j = Envelope(true);
    OrderedJson out = {{"index", c.index}};
    if (call_.chat) {
      out["delta"] = ChatDelta(c, &choice);
      // Text held back (a call marker may be starting) makes no event of its own.
      if (out["delta"].empty() && !c.finished && call_.top_logprobs < 0 && !c.prompt_logprobs) {
        continue;
      }
    } else {
      out["text"] = c.text;
    }
    out["logprobs"] = call_.top_logprobs >= 0 ? LogprobsOf(c, &choice) : OrderedJson(nullptr);
    out["finish_reason"] = nullptr;
    if (c.finished) {
      const bool calls = choice.output != nullptr && choice.output->has_tool_calls();
      out["finish_reason"] = FinishName(c.finish_reason, calls);
    }
    // vLLM's prompt_logprobs come with a choice's first chunk (chat's on the chunk itself).
    if (call_.prompt_logprobs >= 0 && c.prompt_logprobs) {
      (call_.chat ? j : out)["prompt_logprobs"] = VllmPromptLogprobs(c);
    }
    CountUsage(c);
    j["choices"] = OrderedJson::array({std::move(out)});
    events.push_back(DumpJson(j));
  }
  return events;
}

std::vector<std::string> OpenAiResponse::ClosingEvents() {
  if (!call_.include_usage) return {};
  OrderedJson j = Envelope(true);
  j["choices"] = OrderedJson::array();
  j["usage"] = UsageJson();
  return {DumpJson(j)};
}

void OpenAiResponse::Add(const std::vector<OutputChunk>& chunks) {
  for (const OutputChunk& c : chunks) {
    Choice& choice = choices_[c.index];
    choice.text += c.text;
    if (call_.top_logprobs >= 0) {
      OrderedJson lp = LogprobsOf(c, &choice);
      if (call_.chat) {
        for (OrderedJson& e : lp["content"]) choice.logprobs.push_back(std::move(e));
      } else {
        for (OrderedJson& e : lp["tokens"]) choice.tokens.push_back(std::move(e));
        for (OrderedJson& e : lp["token_logprobs"]) choice.token_logprobs.push_back(std::move(e));
        for (OrderedJson& e : lp["top_logprobs"]) choice.top_logprobs.push_back(std::move(e));
        for (OrderedJson& e : lp["text_offset"]) choice.text_offsets.push_back(std::move(e));
      }
    }
    if (call_.prompt_logprobs >= 0 && c.prompt_logprobs) {
      choice.prompt_logprobs = VllmPromptLogprobs(c);
    }
    if (c.finished) choice.finish_reason = c.finish_reason;
    CountUsage(c);
  }
}

OrderedJson OpenAiResponse::ChatDelta(const OutputChunk& c, Choice* choice) const {
  if (choice->output == nullptr) {
    return c.text.empty() && c.finished ? OrderedJson::object() : OrderedJson{{"content", c.text}};
  }
  OrderedJson delta = choice->output->Delta(c.text);
  if (!c.finished) return delta;
  // The end lets go of what was held back.
  OrderedJson rest = choice->output->Finish();
  for (auto& [key, value] : rest.items()) {
    if (!delta.contains(key)) {
      delta[key] = value;
    } else if (key == "tool_calls") {
      for (OrderedJson& call : value) delta[key].push_back(std::move(call));
    } else {
      delta[key] = delta[key].get<std::string>() + value.get<std::string>();
    }
  }
  return delta;
}

OrderedJson OpenAiResponse::ChoiceObject(int index, const Choice& c) const {
  OrderedJson out = {{"index", index}};
  OrderedJson logprobs = nullptr;
  if (call_.top_logprobs >= 0) {
    logprobs = call_.chat ? OrderedJson{{"content", c.logprobs}}
                          : OrderedJson{{"tokens", c.tokens},
                                        {"token_logprobs", c.token_logprobs},
                                        {"top_logprobs", c.top_logprobs},
                                        {"text_offset", c.text_offsets}};
  }
  bool calls = false;
  if (call_.chat) {
    out["message"] = call_.output.active()
                         ? ChatOutput::Message(call_.output, c.text, &calls)
                         : OrderedJson{{"role", "assistant"}, {"content", c.text}};
  } else {
    out["text"] = c.text;
  }
  out["logprobs"] = std::move(logprobs);
  out["finish_reason"] = FinishName(c.finish_reason, calls);
  if (call_.prompt_logprobs >= 0 && !call_.chat) out["prompt_logprobs"] = c.prompt_logprobs;
  return out;
}

std::string OpenAiResponse::Body() const {
  OrderedJson j = Envelope(false);
  j["choices"] = OrderedJson::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    j["choices"].push_back(ChoiceObject(static_cast<int>(i), choices_[i]));
  }
  // vLLM's chat puts the prompt's (one prompt per call) beside the choices.
  if (call_.prompt_logprobs >= 0 && call_.chat && !choices_.empty()) {
    j["prompt_logprobs"] = choices_[0].prompt_logprobs;
  }
  j["usage"] = UsageJson();
  return DumpJson(j);
}

}  // namespace pagoda
