#include "router/engine.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

// The prefill's reports: prompt log probabilities exactly for the chunks that asked, one per
// row before the prompt's last, each a log probability with a rank in [1, vocab] and the
// sequence's number of alternatives; an embedding of the model's dim, finite, for each
// embedding sequence whose prompt the step completed. A sequence aborted since (null) is
// checked only for shape.
absl::Status CheckPromptResults(const StepCommand& command, const StepResult& result,
                                int vocab_size, int dim,
                                const std::function<const Sequence*(int64_t)>& sequence_of) {
  auto broken = [&](auto&&... parts) {
    return absl::InternalError(
        absl::StrCat("worker sent ", parts..., " in step ", command.step_id));
  };
  size_t next_prompt = 0, next_embedding = 0;
  for (const ScheduledSequence& s : command.scheduled) {
    const Sequence* seq = sequence_of(s.seq_id);
    const int end = s.num_computed_tokens + static_cast<int>(s.token_ids.size());
    if (seq != nullptr && seq->pooling != Pooling::kNone && end == seq->num_prompt_tokens) {
      if (next_embedding >= result.embeddings.size() ||
          result.embeddings[next_embedding].seq_id != s.seq_id) {
        return broken("no embedding for sequence ", s.seq_id);
      }
    }
    if (next_embedding < result.embeddings.size() &&
        result.embeddings[next_embedding].seq_id == s.seq_id) {
      const std::vector<float>& v = result.embeddings[next_embedding++].values;
      if (static_cast<int>(v.size()) != dim ||
          !absl::c_all_of(v, [](float x) { return std::isfinite(x); })) {
        return broken("an embedding of ", v.size(), " values (or not finite) for ", s.seq_id);
      }
    }
    if (!s.prompt_logprobs) continue;
    const int rows =
        seq == nullptr
            ? -1
            : std::max(0, std::min(end, seq->num_prompt_tokens - 1) - s.num_computed_tokens);
    if (rows == 0) continue;
    if (next_prompt >= result.prompt_logprobs.size() ||
        result.prompt_logprobs[next_prompt].seq_id != s.seq_id) {
      if (rows < 0) continue;  // aborted: it may have sent none
      return broken("no prompt logprobs for sequence ", s.seq_id);
    }
    const PromptLogprobs& p = result.prompt_logprobs[next_prompt++];
    const size_t n = p.logprobs.size();
    const size_t top_n =
        seq == nullptr ? (n == 0 ? 0 : p.top.size() / n) : seq->sampling.prompt_logprobs;
    if (p.first_position != s.num_computed_tokens + 1 ||
        (rows >= 0 ? n != static_cast<size_t>(rows) : n > s.token_ids.size()) ||
        p.ranks.size() != n || p.top.size() != n * top_n) {
      return broken("prompt logprobs of the wrong shape for sequence ", s.seq_id);
    }
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(p.logprobs[i]) || p.ranks[i] < 1 || p.ranks[i] > vocab_size) {
        return broken("prompt logprob ", p.logprobs[i], " of rank ", p.ranks[i]);
      }
    }
    for (const TokenLogprob& top : p.top) {
      if (top.token_id < 0 || top.token_id >= vocab_size || !std::isfinite(top.logprob)) {
        return broken("prompt top logprob ", top.logprob, " of token ", top.token_id);
      }
    }
  }
  if (next_prompt != result.prompt_logprobs.size() || next_embedding != result.embeddings.size()) {
    return broken("unrequested prompt logprobs or embeddings");
  }
  return absl::OkStatus();
}

// A worker's reply comes off the wire: it must answer this step with exactly the samples asked
// for, in order, with ids in the vocabulary, no stop id before min_tokens, finite
// log-probabilities, and top alternatives only as many as the sequence asked for, and a
// finite, non-negative forward time. Anything else means the worker is broken. `sequence_of`
// finds a scheduled sequence (null once aborted).
absl::Status CheckResult(const StepCommand& command, const StepResult& result, int vocab_size,
                         int dim, const std::function<const Sequence*(int64_t)>& sequence_of) {
  auto broken = [&](auto&&... parts) {
    return absl::InternalError(
        absl::StrCat("worker sent ", parts..., " in step ", command.step_id));
  };
  if (result.step_id != command.step_id) {
    return absl::InternalError(
        absl::StrCat("worker answered step ", result.step_id, " to step ", command.step_id));
  }
  if (!std::isfinite(result.forward_seconds) || result.forward_seconds < 0) {
    return broken("forward_seconds = ", result.forward_seconds);
  }
  auto in_vocab = [vocab_size](int id) { return id >= 0 && id < vocab_size; };
  size_t next = 0;
  for (const ScheduledSequence& s : command.scheduled) {
    if (!s.sample) continue;
    if (next >= result.sampled.size() || result.sampled[next].seq_id != s.seq_id) {
      return broken("no sample for sequence ", s.seq_id);
    }
    // With a draft: the draft tokens the worker kept, then the first token that differs (or the
    // one after the whole draft).
    const std::span<const int> draft = std::span(s.token_ids).last(s.num_draft_tokens);
    const Sequence* seq = sequence_of(s.seq_id);
    for (size_t i = 0; i <= draft.size(); ++i) {
      if (i > 0 && (next >= result.sampled.size() || result.sampled[next].seq_id != s.seq_id)) {
        if (result.sampled[next - 1].token_id == draft[i - 1]) {
          return broken("no sample after draft token ", i - 1, " of sequence ", s.seq_id,
                        ", which matched");
        }
        break;
      }
      if (i > 0 && result.sampled[next - 1].token_id != draft[i - 1]) {
        return broken("a sample after draft token ", i - 1, " of sequence ", s.seq_id,
                      ", which did not match");
      }
      const SampledToken& sampled = result.sampled[next++];
      if (!in_vocab(sampled.token_id)) {
        return broken("token ", sampled.token_id, " outside the vocabulary");
      }
      if (!std::isfinite(sampled.logprob)) return broken("logprob ", sampled.logprob);
      const int logprobs = seq == nullptr ? 0 : seq->sampling.logprobs;
      if (static_cast<int>(sampled.top_logprobs.size()) > logprobs) {
        return broken(sampled.top_logprobs.size(), " top logprobs for sequence ", s.seq_id,
                      ", which asked for ", logprobs);
      }
      const int num_output = seq == nullptr ? 0 : seq->num_output_tokens() + static_cast<int>(i);
      if (seq != nullptr && num_output < seq->sampling.min_tokens &&
          absl::c_linear_search(seq->stop_token_ids, sampled.token_id)) {
        return broken("stop token ", sampled.token_id, " for sequence ", s.seq_id, " after ",
                      num_output, " of its min_tokens ", seq->sampling.min_tokens);
      }
      for (const TokenLogprob& top : sampled.top_logprobs) {
        if (!in_vocab(top.token_id) || !std::isfinite(top.logprob)) {
          return broken("top logprob ", top.logprob, " of token ", top.token_id);
        }
      }
    }
  }
  if (next != result.sampled.size()) {
    return broken(result.sampled.size() - next, " unrequested samples");
  }
  return CheckPromptResults(command, result, vocab_size, dim, sequence_of);
}

SchedulerOptions MakeSchedulerOptions(const ModelConfig& config, const WorkerInfo& worker,
                                      const EngineOptions& options, DraftProposer* proposer) {
  SchedulerOptions s;
  s.kv_reservation = options.kv_reservation;
  s.enable_prefix_caching = options.enable_prefix_caching;
  s.max_num_batched_tokens =
      std::min(options.max_num_batched_tokens, worker.max_num_batched_tokens);
  s.max_num_seqs = std::min(options.max_num_seqs, worker.max_num_seqs);
  s.max_logit_rows = worker.max_num_seqs;  // what the worker's logits buffer holds
  s.max_model_len = options.max_model_len > 0 ? std::min(options.max_model_len, config.max_seq_len)
                                              : config.max_seq_len;
  s.num_blocks = worker.num_blocks;
  s.block_size = worker.block_size;
  s.proposer = proposer;
  s.num_speculative_tokens = options.speculative.num_speculative_tokens;
  s.max_speculative_step_tokens = options.speculative.max_step_tokens;
  return s;
}

}  // namespace

Engine::Engine(const ModelConfig& config, Executor* executor, const EngineOptions& options)
    : config_(config),
      options_(options),
      executor_(executor),
      proposer_(MakeDraftProposer(options.speculative)),
      scheduler_(MakeSchedulerOptions(config, executor->info(), options, proposer_.get())),
      transfers_(&scheduler_, [this](int64_t request_id, const GenerationRequest& r,
                                     std::optional<PulledTail> tail) {
        return AddSequence(request_id, r, tail);
      }) {}

absl::Status ValidateRequestLimits(const GenerationRequest& r, int max_model_len, int max_n) {
  if (r.prompt_ids.empty()) return absl::InvalidArgumentError("prompt: must not be empty");
  if (r.stop_token_ids.size() > static_cast<size_t>(kMaxStopTokenIds)) {
    return absl::InvalidArgumentError(absl::StrCat("stop_token_ids: ", r.stop_token_ids.size(),
                                                   " ids; at most ", kMaxStopTokenIds));
  }
  RETURN_IF_ERROR(r.sampling.Validate());
  if (r.n < 1 || r.n > max_n) {
    return absl::InvalidArgumentError(absl::StrCat("n = ", r.n, ": must be in [1, ", max_n, "]"));
  }
  const int64_t num_prompt = static_cast<int64_t>(r.prompt_ids.size());
  if (num_prompt >= max_model_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt: ", num_prompt, " tokens leave no room in the model length of ", max_model_len));
  }
  if (r.pooling != Pooling::kNone) {
    if (r.n != 1 || r.max_tokens.has_value() || r.sampling.prompt_logprobs >= 0 ||
        !r.output_ids.empty()) {
      return absl::InvalidArgumentError(
          "pooling: an embedding has n = 1 and no max_tokens, prompt_logprobs or output");
    }
    return absl::OkStatus();
  }
  // max_tokens 0 asks for the prompt's log probabilities only (lm-evaluation-harness's
  // log-likelihood requests).
  const int min_tokens = r.sampling.prompt_logprobs >= 0 ? 0 : 1;
  if (r.max_tokens.has_value() && *r.max_tokens < min_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens = ", *r.max_tokens, ": must be >= ", min_tokens,
                     min_tokens == 0 ? "" : " (0 only with prompt log probabilities)"));
  }
  // 64-bit: max_tokens may be anything up to INT_MAX.
  if (r.max_tokens.has_value() && num_prompt + *r.max_tokens > max_model_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt (", num_prompt, " tokens) + max_tokens (", *r.max_tokens,
                     ") exceeds the model length of ", max_model_len, " tokens"));
  }
  if (r.max_tokens.has_value() && r.sampling.min_tokens > *r.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("min_tokens = ", r.sampling.min_tokens,
                                                   ": must be at most max_tokens (", *r.max_tokens,
                                                   ")"));
  }
  if (!r.output_ids.empty() && r.n != 1) {
    return absl::InvalidArgumentError("output_ids: a resumed sequence must have n = 1");
  }
  return absl::OkStatus();
}

absl::Status ValidateRequest(const GenerationRequest& r, const ModelConfig& config,
                             int max_model_len, int max_n) {
  RETURN_IF_ERROR(ValidateRequestLimits(r, max_model_len, max_n));
  for (int id : r.prompt_ids) {
    if (id < 0 || id >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("prompt_token_ids: token id ", id,
                                                     " is outside the vocabulary [0, ",
                                                     config.vocab_size, ")"));
    }
  }
  for (int id : r.stop_token_ids) {
    if (id < 0 || id >= config.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop_token_ids: token id ", id, " is outside the vocabulary"));
    }
  }
  RETURN_IF_ERROR(r.sampling.ValidateTokenIds(config.vocab_size));
  // Alternatives the worker can give: never more than the vocabulary (its reports are checked
  // for exactly this many).
  if (r.sampling.prompt_logprobs > config.vocab_size || r.sampling.logprobs > config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("logprobs: more alternatives than the ",
                                                   config.vocab_size, " tokens of the vocabulary"));
  }
  if (r.constraint != nullptr && r.constraint->masker->vocabulary().size() != config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("response_format: the grammar's vocabulary has ",
                                                   r.constraint->masker->vocabulary().size(),
                                                   " tokens, the model ", config.vocab_size));
  }
  // min_tokens masks the stop ids: some token must stay possible.
  const size_t num_stop_ids = r.stop_token_ids.size() + (r.ignore_eos ? 0 : config.eos_ids.size());
  if (r.sampling.min_tokens > 0 && num_stop_ids >= static_cast<size_t>(config.vocab_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_tokens: ", num_stop_ids, " stop ids would mask the whole vocabulary"));
  }
  return absl::OkStatus();
}

absl::Status Engine::AddRequest(int64_t request_id, const GenerationRequest& r) {
  RETURN_IF_ERROR(ValidateRequest(r, config_, max_model_len(), options_.max_n));
  return AddValidatedRequest(request_id, r);
}

absl::Status Engine::CheckAddable(int64_t request_id, const GenerationRequest& r) const {
  const int num_prompt = static_cast<int>(r.prompt_ids.size());
  const int max_tokens =
      r.pooling != Pooling::kNone ? 0 : r.max_tokens.value_or(max_model_len() - num_prompt);
  RETURN_IF_ERROR(scheduler_.CheckFits(num_prompt, max_tokens));
  if (auto it = requests_.find(request_id); it != requests_.end()) {
    for (int i = r.first_seq_index; i < r.first_seq_index + r.n; ++i) {
      if (it->second.contains(i)) {
        return absl::AlreadyExistsError(
            absl::StrCat("request ", request_id, " already has sequence ", i, " here"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Engine::AddValidatedRequest(int64_t request_id, const GenerationRequest& r) {
  return AddSequence(request_id, r, std::nullopt);
}

absl::Status Engine::AddSequence(int64_t request_id, const GenerationRequest& r,
                                 std::optional<PulledTail> tail) {
  RETURN_IF_ERROR(CheckAddable(request_id, r));
  const int num_prompt = static_cast<int>(r.prompt_ids.size());
  const int max_tokens =
      r.pooling != Pooling::kNone ? 0 : r.max_tokens.value_or(max_model_len() - num_prompt);

  auto seq = std::make_unique<Sequence>();
  seq->id = next_seq_id_;
  seq->request_id = request_id;
  seq->seq_index = r.first_seq_index;
  seq->num_prompt_tokens = num_prompt;
  seq->sampling = r.sampling;
  seq->max_tokens = max_tokens;
  seq->max_total_tokens = max_model_len();
  seq->stop_token_ids = r.stop_token_ids;
  seq->paused = r.paused;
  seq->pooling = r.pooling;
  if (!r.ignore_eos) {
    seq->stop_token_ids.insert(seq->stop_token_ids.end(), config_.eos_ids.begin(),
                               config_.eos_ids.end());
  }
  seq->tokens = r.prompt_ids;
  seq->tokens.insert(seq->tokens.end(), r.output_ids.begin(), r.output_ids.end());
  // Resumed: everything before its last token was computed on another worker.
  if (!r.output_ids.empty()) seq->computed_high_water = seq->num_tokens() - 1;
  seq->pulled_tail = tail;
  if (r.constraint != nullptr) {
    seq->constraint = r.constraint;
    seq->matcher.emplace(r.constraint->grammar);
    // Resumed elsewhere: the grammar's state is the replay of what was output (accepted then).
    const TokenVocabulary& vocab = r.constraint->masker->vocabulary();
    for (int id : r.output_ids) {
      if (id >= 0 && id < vocab.size()) seq->matcher->Accept(vocab.bytes(id));
    }
  }
  const int block_size = scheduler_.options().block_size;
  if (r.prompt_block_size == block_size) {
    const size_t num_full = r.prompt_ids.size() / block_size;  // never more than the prompt has
    seq->block_hashes.assign(
        r.prompt_block_hashes.begin(),
        r.prompt_block_hashes.begin() + std::min(num_full, r.prompt_block_hashes.size()));
  }
  seq->num_pending_forks = r.n - 1;
  // Forks get the ids after their parent's (Scheduler::Add).
  absl::flat_hash_map<int, int64_t>& seqs = requests_[request_id];
  for (int i = 0; i < r.n; ++i) seqs[r.first_seq_index + i] = next_seq_id_ + i;
  next_seq_id_ += r.n;
  scheduler_.Add(std::move(seq), r.front_of_queue);
  return absl::OkStatus();
}

void Engine::AbortRequest(int64_t request_id) {
  transfers_.Abort(request_id);
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  for (const auto& [seq_index, seq_id] : it->second) scheduler_.Abort(seq_id);
  requests_.erase(it);
}

bool Engine::AbortSequence(int64_t request_id, int seq_index) {
  transfers_.Abort(request_id, seq_index);
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return false;
  auto seq = it->second.find(seq_index);
  if (seq == it->second.end()) return false;
  scheduler_.Abort(seq->second);
  it->second.erase(seq);
  if (it->second.empty()) requests_.erase(it);
  return true;
}

absl::StatusOr<std::vector<SequenceUpdate>> Engine::Step() {
  last_forward_seconds_ = 0;
  std::vector<BlockPull> pulls = transfers_.BeforeSchedule();
  if (!scheduler_.has_work() && !scheduler_.has_pending_finishes() && pulls.empty() &&
      !transfers_.has_pulls_in_flight()) {
    return std::vector<SequenceUpdate>();
  }
  StepCommand command = scheduler_.Schedule();
  command.pulls = std::move(pulls);
  // Nothing else to do here: the worker answers when a pull ends, not at once.
  command.await_transfers = command.scheduled.empty() && transfers_.has_pulls();
  if (after_schedule_) after_schedule_();
  ASSIGN_OR_RETURN(const StepResult result, executor_->Execute(command));
  RETURN_IF_ERROR(CheckResult(command, result, config_.vocab_size, config_.dim,
                              [this](int64_t seq_id) { return scheduler_.sequence(seq_id); }));
  RETURN_IF_ERROR(transfers_.CheckResult(result));
  last_forward_seconds_ = result.forward_seconds;
  last_step_tokens_ = 0;
  for (const ScheduledSequence& s : command.scheduled) {
    last_step_tokens_ += static_cast<int>(s.token_ids.size());
  }
  scheduler_.RecordStepTime(command, result.forward_seconds);  // what drafts cost here
  std::vector<SequenceUpdate> updates = scheduler_.Postprocess(result);
  transfers_.AfterPostprocess(result);
  // Forget finished sequences, and requests once none of theirs is left here.
  for (const SequenceUpdate& u : updates) {
    if (!u.finished) continue;
    auto it = requests_.find(u.request_id);
    if (it == requests_.end()) continue;
    it->second.erase(u.seq_index);
    if (it->second.empty()) requests_.erase(it);
  }
  return updates;
}

absl::Status Engine::AddPulledRequest(int64_t request_id, const GenerationRequest& request,
                                      PullPlan plan) {
  RETURN_IF_ERROR(CheckAddable(request_id, request));
  transfers_.AddPull(request_id, request, std::move(plan));
  return absl::OkStatus();
}

std::vector<Scheduler::Detached> Engine::DetachRunning() {
  std::vector<Scheduler::Detached> out = scheduler_.DetachRunning();
  Forget(out);
  return out;
}

std::vector<Scheduler::Detached> Engine::DetachPreempted(int max_blocks) {
  std::vector<Scheduler::Detached> out = scheduler_.DetachPreempted(max_blocks);
  Forget(out);
  return out;
}

void Engine::Forget(const std::vector<Scheduler::Detached>& detached) {
  for (const Scheduler::Detached& d : detached) {
    transfers_.CountHeld(static_cast<int64_t>(d.blocks.size()));
    auto it = requests_.find(d.request_id);
    if (it == requests_.end()) continue;
    it->second.erase(d.seq_index);
    if (it->second.empty()) requests_.erase(it);
  }
}

}  // namespace pagoda
