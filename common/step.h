// The step protocol between the router (which decides) and a worker (which executes), as plain
// structs (DESIGN §4). A command carries deltas: the worker keeps each sequence's block table,
// token history and sampling parameters from the step that introduced it until it is finished.
#ifndef PAGODA_COMMON_STEP_H_
#define PAGODA_COMMON_STEP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/sampling_params.h"

namespace pagoda {

// How an embedding sequence pools the final norm's output rows (the hidden state before the
// LM head) into one vector, L2-normalized by the worker. kNone: a generating sequence.
enum class Pooling { kNone = 0, kLast = 1, kMean = 2 };

// A sequence the worker has not seen (new, or back after preemption or a worker failure).
struct NewSequence {
  int64_t seq_id = 0;
  SamplingParams sampling;
  int seq_index = 0;            // which of the request's n samples; part of the RNG counter
  std::vector<int> prompt_ids;  // the request's prompt (for repetition penalties)
  std::vector<int> output_ids;  // tokens generated before a preemption, if any
  // The ids that would end it (EOS unless ignore_eos, and the request's stop_token_ids): the
  // worker masks them while fewer than sampling.min_tokens tokens are out. Sent only then; at
  // most kMaxStopIdsPerSequence.
  std::vector<int> stop_ids;
  // Not kNone: an embedding. It never samples; the step that computes its last prompt token
  // returns the pooled vector (StepResult::embeddings).
  Pooling pooling = Pooling::kNone;
  // Its prompt carries a cache_salt (a tenant's): the worker never offers its blocks to another
  // router (Hello.cached_blocks), which could not tell them from unsalted ones.
  bool salted = false;
  // The LoRA adapter it runs under, by the name the worker's Hello lists it (WorkerInfo::
  // adapters); empty: the base model. Its K/V depend on the adapter: the worker never offers
  // its blocks (Hello.cached_blocks), and a router must key its prefix cache by the adapter.
  std::string adapter = {};
};

// What a worker accepts in NewSequence.stop_ids: the router's bound on a request's
// stop_token_ids plus room for the model's EOS ids.
inline constexpr int kMaxStopIdsPerSequence = 1024;

// One sequence's work in this step.
struct ScheduledSequence {
  int64_t seq_id = 0;
  std::vector<int> token_ids;      // tokens to run: a prefill chunk, or the last sampled token
  int num_computed_tokens = 0;     // position of token_ids[0]
  int num_kept_blocks = 0;         // the worker keeps this many leading block-table entries
  std::vector<int> new_block_ids;  // ... and appends these (a copy-on-write replaces the tail)
  bool sample = false;             // sample a token from the last row
  // Report the log probability of each prompt token this chunk's rows predict (the row at
  // position p predicts token p + 1 of the prompt): every row before the prompt's last gets
  // logits (sampling.prompt_logprobs says how many alternatives), counted in the step's
  // logit rows.
  bool prompt_logprobs = false;
  // A grammar constraint (structured output) on the token sampled: only the allowed tokens may
  // be sampled; their logits are kept, every other one is -inf. When `constrained`, exactly
  // one of the two forms is set, whichever is smaller: the allowed ids (strictly increasing,
  // each in [0, vocab)), or a bitmask of (vocab + 63) / 64 words, bit id % 64 of word id / 64.
  bool constrained = false;
  std::vector<int> allowed_ids = {};  // (= {}: designated initializers may leave them out)
  std::vector<uint64_t> allowed_mask = {};
  // Speculative decoding: the last num_draft_tokens of token_ids are a draft, tokens the router
  // guesses will follow (not yet part of the sequence; requires `sample`, no constraint, no
  // prompt log probabilities, and drafts after the prompt). The worker samples at the row
  // before each draft token as if it had decoded one token at a time (same penalties' history,
  // same counter-based random draw per position) and accepts draft tokens while the sampled
  // token equals the draft: 1 + (accepted) samples come back, the last one the first token
  // that differs (or the one after the whole draft). For a draft that is a single guess per
  // position this is exact speculative sampling: token x is kept with probability p(x), and a
  // rejection samples from p without x, so the output is the one decoding without a draft
  // gives, token for token. The K/V of rejected draft tokens are written but never used: the
  // router steps num_computed_tokens back past them.
  int num_draft_tokens = 0;
};

struct BlockCopy {
  int src = 0;
  int dst = 0;
};

// Pull blocks of a peer worker's pool into this one's (issue 28; proto BlockPull says the
// contract): src_block_ids there, dst_block_ids here, the same number, at most
// kMaxBlocksPerPull.
struct BlockPull {
  int64_t transfer_id = 0;
  std::string peer_address = {};  // host:port of the peer's KV transfer port
  std::vector<int> src_block_ids = {};
  std::vector<int> dst_block_ids = {};
};

inline constexpr int kMaxBlocksPerPull = 4096;
inline constexpr int kMaxPeerAddressBytes = 255;

// How a pull ended; reported once, in a step's result after it ends.
struct TransferResult {
  int64_t transfer_id = 0;
  bool ok = false;
  std::string error = {};  // when !ok
  int64_t bytes = 0;       // K/V bytes received
  double seconds = 0.0;
};

struct StepCommand {
  int64_t step_id = 0;
  std::vector<int64_t> finished_ids;  // drop these sequences' state first
  std::vector<NewSequence> new_sequences;
  std::vector<BlockCopy> block_copies;  // copy-on-write, applied before the forward pass
  std::vector<ScheduledSequence> scheduled;
  std::vector<BlockPull> pulls;  // started after the copies, run while later steps compute
  // With nothing scheduled, answer once a pull in flight has ended (bounded), not at once.
  bool await_transfers = false;
};

struct TokenLogprob {
  int token_id = 0;
  float logprob = 0.0f;
};

struct SampledToken {
  int64_t seq_id = 0;
  int token_id = 0;
  float logprob = 0.0f;                    // log p of token_id under the model
  std::vector<TokenLogprob> top_logprobs;  // the `logprobs` most likely, when asked
};

// The prompt's log probabilities one chunk computed: entry i is the prompt token at position
// first_position + i (>= 1: the first token has none), with its rank in the vocabulary (1 =
// most likely) and the sequence's prompt_logprobs most likely alternatives.
struct PromptLogprobs {
  int64_t seq_id = 0;
  int first_position = 1;
  std::vector<float> logprobs;
  std::vector<int> ranks;
  std::vector<TokenLogprob> top;  // (logprobs.size() x top_n), row-major
};

// An embedding sequence's pooled, L2-normalized hidden state (dim floats).
struct Embedding {
  int64_t seq_id = 0;
  std::vector<float> values;
};

// A pipeline stage's step (issue 40): the time it waited for the stage before's activations
// (the pipeline's bubble, seen from this stage), and the time and bytes of sending its own on.
// All zero on a whole worker, and on a stage for the part it lacks (the first receives nothing,
// the last sends nothing).
struct StageTiming {
  double wait_seconds = 0.0;
  double send_seconds = 0.0;
  int64_t sent_bytes = 0;
};

struct StepResult {
  int64_t step_id = 0;
  // One per scheduled sequence with sample = true, in scheduling order; a sequence with a draft
  // has 1 to num_draft_tokens + 1 of them in a row (ScheduledSequence::num_draft_tokens).
  std::vector<SampledToken> sampled;
  // One per scheduled sequence with prompt_logprobs whose chunk reached rows before the
  // prompt's last; one embedding per embedding sequence whose prompt this step completed.
  // Both in scheduling order.
  std::vector<PromptLogprobs> prompt_logprobs;
  std::vector<Embedding> embeddings;
  double forward_seconds = 0.0;  // time in the worker's forward pass + sampling
  // Pulls (StepCommand::pulls) that ended since the last result, each reported once.
  std::vector<TransferResult> transfers;
  StageTiming stage;
};

}  // namespace pagoda

#endif  // PAGODA_COMMON_STEP_H_
