// The scheduler's half of a step's end: what the worker computed and sampled goes into the
// sequences (positions, cached blocks, tokens, prompt log probabilities, ends).
#include <algorithm>
#include <memory>
#include <span>

#include "absl/algorithm/container.h"
#include "glog/logging.h"
#include "router/core/scheduler.h"

namespace pagoda {

void Scheduler::GatherPromptLogprobs(const PromptLogprobs& in, Sequence* seq) {
  PromptLogprobs& all = seq->prompt_logprobs;
  const int have = static_cast<int>(all.logprobs.size());
  const int top_n = std::max(seq->sampling.prompt_logprobs, 0);
  const int skip = all.first_position + have - in.first_position;  // entries we have
  if (skip < 0) return;  // a gap: cannot happen, chunks come in order
  for (int i = skip; i < static_cast<int>(in.logprobs.size()); ++i) {
    all.logprobs.push_back(in.logprobs[i]);
    all.ranks.push_back(in.ranks[i]);
    all.top.insert(all.top.end(), in.top.begin() + static_cast<ptrdiff_t>(i) * top_n,
                   in.top.begin() + static_cast<ptrdiff_t>(i + 1) * top_n);
  }
}

std::vector<SequenceUpdate> Scheduler::Postprocess(const StepResult& result) {
  std::vector<SequenceUpdate> updates;
  updates.swap(pending_fork_updates_);
  size_t next_sample = 0, next_prompt = 0, next_embedding = 0;
  for (const Scheduled& s : last_step_) {
    Sequence* seq = s.seq;
    // Reports come in scheduling order; those of sequences aborted meanwhile are skipped.
    while (s.prompt_logprobs && next_prompt < result.prompt_logprobs.size() &&
           result.prompt_logprobs[next_prompt].seq_id != seq->id) {
      ++next_prompt;
    }
    if (s.prompt_logprobs) {
      CHECK_LT(next_prompt, result.prompt_logprobs.size())
          << "step " << result.step_id << " has no prompt logprobs for sequence " << seq->id;
      GatherPromptLogprobs(result.prompt_logprobs[next_prompt++], seq);
    }
    // Samples come in scheduling order (a draft's in a row); those of sequences aborted
    // meanwhile are skipped.
    std::span<const SampledToken> samples;
    if (s.sample) {
      while (next_sample < result.sampled.size() && result.sampled[next_sample].seq_id != seq->id) {
        ++next_sample;
      }
      CHECK_LT(next_sample, result.sampled.size())
          << "step " << result.step_id << " has no sample for sequence " << seq->id;
      size_t end = next_sample + 1;
      while (end < result.sampled.size() && end - next_sample <= static_cast<size_t>(s.num_draft) &&
             result.sampled[end].seq_id == seq->id) {
        ++end;
      }
      samples = std::span(result.sampled).subspan(next_sample, end - next_sample);
      next_sample = end;
    }
    // A draft's K/V count only as far as the worker kept it. Blocks are cached up to the tokens
    // known now (the kept draft tokens' own blocks are cached by the next step).
    const int num_rejected =
        s.num_draft > 0 ? s.num_draft - static_cast<int>(samples.size() - 1) : 0;
    seq->num_computed_tokens += s.num_tokens - num_rejected;
    const int cacheable = std::min(seq->num_computed_tokens, seq->num_tokens());
    kv_.CacheFullBlocks(seq->id, seq->tokens, BlockHashes(seq, cacheable / options_.block_size),
                        cacheable);
    if (seq->pooling != Pooling::kNone && seq->num_computed_tokens == seq->num_tokens()) {
      while (next_embedding < result.embeddings.size() &&
             result.embeddings[next_embedding].seq_id != seq->id) {
        ++next_embedding;
      }
      CHECK_LT(next_embedding, result.embeddings.size())
          << "step " << result.step_id << " has no embedding for sequence " << seq->id;
      SequenceUpdate u;
      u.seq_id = seq->id;
      u.request_id = seq->request_id;
      u.seq_index = seq->seq_index;
      u.embedding = result.embeddings[next_embedding++].values;
      u.num_prompt_tokens = seq->num_prompt_tokens;
      u.num_cached_tokens = seq->num_cached_tokens;
      u.queue_seconds = seq->queue_seconds;
      std::erase(running_, seq);
      Finish(seq, FinishReason::kStop);  // its blocks are freed (their full ones cached)
      u.finished = true;
      u.finish_reason = FinishReason::kStop;
      updates.push_back(std::move(u));
      continue;
    }
    if (!s.sample) continue;
    SequenceUpdate u;
    u.seq_id = seq->id;
    u.request_id = seq->request_id;
    u.seq_index = seq->seq_index;
    if (seq->sampling.prompt_logprobs >= 0 && seq->num_output_tokens() == 0) {
      u.prompt_logprobs = std::make_shared<const PromptLogprobs>(std::move(seq->prompt_logprobs));
      seq->prompt_logprobs = PromptLogprobs();
    }
    FinishReason reason = FinishReason::kNone;
    if (seq->max_tokens == 0) {
      reason = FinishReason::kLength;  // the prompt only (its log probabilities): no token kept
    } else if (seq->constraint_failed) {
      reason = FinishReason::kStop;  // what it output so far is all the grammar let it say
    }
    // A draft brings several tokens: each is checked as if it came alone, and the first that
    // ends the sequence drops the rest.
    for (size_t i = 0; i < samples.size() && reason == FinishReason::kNone; ++i) {
      const SampledToken& sampled = samples[i];
      seq->tokens.push_back(sampled.token_id);
      u.new_token_ids.push_back(sampled.token_id);
      u.samples.push_back(sampled);
      const GrammarEnd end =
          seq->matcher.has_value() && !seq->constraint_failed
              ? AdvanceGrammar(*seq->constraint, *seq->matcher, sampled.token_id, seq->id)
              : GrammarEnd::kNo;
      if (end != GrammarEnd::kNo || absl::c_linear_search(seq->stop_token_ids, sampled.token_id)) {
        reason = FinishReason::kStop;
        u.grammar_complete = end == GrammarEnd::kComplete;
      } else if (seq->num_output_tokens() >= seq->max_tokens ||
                 seq->num_tokens() >= seq->max_total_tokens) {
        // A constrained output is cut here too (finish_reason "length", as OpenAI does).
        reason = FinishReason::kLength;
      }
    }
    if (s.num_draft > 0) SettleDraft(seq, s.num_draft, static_cast<int>(samples.size()) - 1);
    u.num_prompt_tokens = seq->num_prompt_tokens;
    u.num_output_tokens = seq->num_output_tokens();
    u.num_cached_tokens = seq->num_cached_tokens;
    if (seq->queue_seconds >= 0) {
      u.queue_seconds = seq->queue_seconds;
      seq->queue_seconds = -1;  // reported once
    }
    if (reason != FinishReason::kNone) {
      std::erase(running_, seq);
      Finish(seq, reason);
      u.finished = true;
      u.finish_reason = reason;
    }
    updates.push_back(std::move(u));
  }
  // Drop finished sequences now that nothing refers to them.
  for (const SequenceUpdate& u : updates) {
    if (u.finished) seqs_.erase(u.seq_id);
  }
  last_step_.clear();
  return updates;
}

}  // namespace pagoda
