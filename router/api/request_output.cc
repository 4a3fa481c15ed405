#include "router/api/request_output.h"

#include <utility>

namespace pagoda {

RequestOutput::RequestOutput(const Tokenizer* tokenizer, std::vector<int> prompt_ids, int n,
                             const std::vector<std::string>& stops, RouterMetrics* metrics)
    : metrics_(metrics), prompt_ids_(std::move(prompt_ids)), num_unfinished_(n) {
  for (int i = 0; i < n; ++i) texts_.emplace_back(tokenizer, prompt_ids_.back(), stops);
  ended_.assign(n, false);
  completion_tokens_.assign(n, 0);
  last_token_at_.assign(n, Clock::time_point());
}

void RequestOutput::Submitted() {
  if (metrics_) metrics_->prompt_tokens->Add(static_cast<double>(prompt_ids_.size()));
}

RequestOutput::Result RequestOutput::Add(const RequestUpdate& u) {
  Result result;
  if (u.seq_index < 0 || u.seq_index >= static_cast<int>(ended_.size()) || ended_[u.seq_index]) {
    result.go_on = false;
    return result;
  }
  OutputChunk& c = result.chunk;
  c.index = u.seq_index;
  TextAssembler& text = texts_[u.seq_index];
  c.prompt_logprobs = u.prompt_logprobs;
  c.embedding = u.embedding;
  for (size_t i = 0; i < u.token_ids.size(); ++i) {
    const int id = u.token_ids[i];
    const bool stop_token = u.finish_reason == FinishReason::kStop && !u.grammar_complete &&
                            i + 1 == u.token_ids.size();
    if (!stop_token) c.text += text.Add(id);
    if (text.stopped()) break;  // the token that completed a stop string is not sent
    c.token_ids.push_back(id);
    ++completion_tokens_[u.seq_index];
    ObserveToken(u.seq_index);
    if (i < u.samples.size() && !u.samples[i].top_logprobs.empty()) {
      c.samples.push_back(u.samples[i]);
    }
  }
  c.finished = u.finished || text.stopped();
  if (u.finished && !text.stopped()) c.text += text.Flush();
  if (c.finished) {
    ended_[u.seq_index] = true;
    --num_unfinished_;
    c.finish_reason = text.stopped() ? FinishReason::kStop : u.finish_reason;
    if (metrics_) metrics_->CountFinished(FinishReasonName(c.finish_reason));
    c.prompt_tokens = u.num_prompt_tokens;
    c.completion_tokens = completion_tokens_[u.seq_index];
    c.cached_tokens = u.num_cached_tokens;
  }
  result.has_chunk = !c.token_ids.empty() || c.finished;
  result.go_on = !c.finished;
  return result;
}

void RequestOutput::End() {
  if (!metrics_) return;
  if (num_unfinished_ == 0) {
    metrics_->e2e_request_latency->Observe(
        std::chrono::duration<double>(Clock::now() - arrived_at_).count());
  }
  for (int i = 0; i < num_unfinished_; ++i) {
    metrics_->CountFinished(FinishReasonName(FinishReason::kAbort));
  }
}

// TTFT on the request's first token; inter-token latency on each later one of a sequence.
void RequestOutput::ObserveToken(int seq_index) {
  if (!metrics_) return;
  const Clock::time_point now = Clock::now();
  metrics_->generation_tokens->Add(1);
  if (!first_token_seen_) {
    first_token_seen_ = true;
    metrics_->time_to_first_token->Observe(
        std::chrono::duration<double>(now - arrived_at_).count());
  }
  Clock::time_point& last = last_token_at_[seq_index];
  if (last != Clock::time_point()) {
    metrics_->inter_token_latency->Observe(std::chrono::duration<double>(now - last).count());
  }
  last = now;
}

}  // namespace pagoda
