#include "router/core/engine.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "router/core/step_check.h"

namespace pagoda {
namespace {

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
  s.max_loras = worker.max_loras;
  s.drafts = {.proposer = proposer,
              .num_speculative_tokens = options.speculative.num_speculative_tokens,
              .max_step_tokens = options.speculative.max_step_tokens};
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
  if (r.cache_salt.size() > static_cast<size_t>(kMaxCacheSaltBytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache_salt: ", r.cache_salt.size(), " bytes; at most ", kMaxCacheSaltBytes));
  }
  if (r.adapter.size() > static_cast<size_t>(kMaxAdapterNameBytes)) {
    return absl::InvalidArgumentError(absl::StrCat("model: the adapter's name is ",
                                                   r.adapter.size(), " bytes; at most ",
                                                   kMaxAdapterNameBytes));
  }
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
  // As the Cluster computed r.prefix_root for placement (it shares this engine's key).
  seq->prefix_root = PrefixRoot(options_.prefix_cache_key, r.cache_salt, r.adapter);
  seq->salted = !r.cache_salt.empty();
  seq->adapter = r.adapter;
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
  RETURN_IF_ERROR(CheckStepResult(command, result, config_.vocab_size, config_.dim,
                                  [this](int64_t seq_id) { return scheduler_.sequence(seq_id); }));
  RETURN_IF_ERROR(transfers_.CheckResult(result));
  last_forward_seconds_ = result.forward_seconds;
  last_step_tokens_ = 0;
  for (const ScheduledSequence& s : command.scheduled) {
    last_step_tokens_ += static_cast<int>(s.token_ids.size());
  }
  // What a step of this size costs here, which decides where drafts pay.
  scheduler_.mutable_drafts().RecordStepTime(command, result.forward_seconds);
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
