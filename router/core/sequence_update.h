// What a step did to one sequence: its output as the request's client sees it (SequenceOutput),
// the scheduler's report of it (SequenceUpdate), and the two rules that fill them from a
// worker's answer: prompt log probabilities gathered chunk by chunk, and sampled tokens
// appended until one ends the sequence.
#ifndef PAGODA_ROUTER_CORE_SEQUENCE_UPDATE_H_
#define PAGODA_ROUTER_CORE_SEQUENCE_UPDATE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/step.h"
#include "router/core/sequence.h"

namespace pagoda {

// One sequence's new tokens or its end, after a step.
struct SequenceOutput {
  int seq_index = 0;
  std::vector<int> token_ids;         // 0 or 1 tokens; with a draft up to its size + 1
  std::vector<SampledToken> samples;  // the sampler's reports for token_ids
  // With a sequence's first token (or its end, for max_tokens 0): its prompt's log
  // probabilities, when asked (SamplingParams::prompt_logprobs).
  std::shared_ptr<const PromptLogprobs> prompt_logprobs;
  std::vector<float> embedding;  // an embedding sequence's result, with its end
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  // kStop because the sequence's grammar is complete and accepts nothing more: its last token
  // is text, not a stop token to leave out.
  bool grammar_complete = false;
  int num_prompt_tokens = 0;
  int num_output_tokens = 0;
  int num_cached_tokens = 0;
};

// The scheduler's report of one sequence after a step; the Cluster hands its SequenceOutput to
// the request (RequestUpdate).
struct SequenceUpdate : SequenceOutput {
  int64_t seq_id = 0;
  int64_t request_id = 0;
  // On the first token a sequence samples here: how long it waited from Add() to its first
  // scheduling (negative otherwise: not again after a preemption; a sequence moved from a
  // dead worker was added here anew and reports its wait here).
  double queue_seconds = -1;
};

// Appends a step's prompt log probabilities to seq's, past those it has (a recomputed chunk
// brings some again).
void GatherPromptLogprobs(const PromptLogprobs& in, Sequence* seq);

// Appends what a step sampled for seq (one token, or a draft's kept tokens and the one after)
// to seq and to `u`, each checked as if it came alone: the first that ends the sequence (a
// stop token, its grammar's end, max_tokens or the model length) drops the rest. Returns why it
// ends, kNone while it goes on; a sequence with max_tokens 0 (its prompt only) or a failed
// constraint ends with nothing appended.
FinishReason AppendSampled(std::span<const SampledToken> samples, Sequence* seq, SequenceUpdate* u);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_SEQUENCE_UPDATE_H_
