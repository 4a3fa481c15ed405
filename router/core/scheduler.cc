#include "router/core/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "router/core/adapter_slots.h"

namespace pagoda {

Scheduler::Scheduler(const SchedulerOptions& options)
    : options_(options), kv_(options.num_blocks, options.block_size), drafts_(options.drafts) {
  CHECK_GT(options.max_model_len, 0);
  CHECK_GT(options.max_num_batched_tokens, 0);
  CHECK_GT(options.max_num_seqs, 0);
}

absl::Status Scheduler::CheckFits(int num_prompt_tokens, int max_tokens) const {
  const int64_t total = static_cast<int64_t>(num_prompt_tokens) + max_tokens;  // no overflow
  if (total > options_.max_model_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt (", num_prompt_tokens, " tokens) + max_tokens (", max_tokens,
                     ") exceeds the model length of ", options_.max_model_len, " tokens"));
  }
  // The last sampled token is never computed, so a sequence holds at most total - 1 in cache
  // (its whole prompt with max_tokens 0: an embedding or a prompt's log-likelihood).
  const int64_t held = std::max<int64_t>(total - 1, num_prompt_tokens);
  const int64_t blocks = (held + options_.block_size - 1) / options_.block_size;
  if (blocks > options_.num_blocks) {
    return absl::InvalidArgumentError(absl::StrCat("prompt + max_tokens needs ", blocks,
                                                   " KV blocks but the worker has ",
                                                   options_.num_blocks));
  }
  return absl::OkStatus();
}

bool Scheduler::has_work() const {
  auto active = [](const Sequence* s) { return !s->is_paused(); };
  return std::any_of(running_.begin(), running_.end(), active) ||
         std::any_of(waiting_.begin(), waiting_.end(), active);
}

void Scheduler::Add(std::unique_ptr<Sequence> seq, bool front) {
  seq->added_at = std::chrono::steady_clock::now();
  if (front) {
    waiting_.push_front(seq.get());
  } else {
    waiting_.push_back(seq.get());
  }
  seqs_[seq->id] = std::move(seq);
}

void Scheduler::Finish(Sequence* seq, FinishReason reason) {
  // Its output may draft for other requests (the suffix index).
  if (seq->num_output_tokens() > 0) drafts_.Finished(seq->tokens, seq->num_prompt_tokens);
  kv_.Free(seq->id);
  TakePulledTail(seq, PrefixHit(), /*use=*/false);
  if (seq->on_worker) finished_on_worker_.push_back(seq->id);
  seq->on_worker = false;
  seq->finish_reason = reason;
}

void Scheduler::Abort(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  Sequence* seq = it->second.get();
  std::erase(waiting_, seq);
  std::erase(running_, seq);
  step_.Forget(seq);
  Finish(seq, FinishReason::kAbort);
  seqs_.erase(it);
}

void Scheduler::Preempt(Sequence* seq) {
  // Recompute: drop the KV (its full blocks stay cached), keep the tokens generated so far.
  kv_.Free(seq->id);
  if (seq->on_worker) finished_on_worker_.push_back(seq->id);
  seq->on_worker = false;
  seq->num_synced_blocks = 0;
  seq->computed_high_water = std::max(seq->computed_high_water, seq->num_computed_tokens);
  seq->num_computed_tokens = 0;
  seq->preempted = true;
  std::erase(running_, seq);
  waiting_.push_front(seq);
  ++num_preemptions_;
  VLOG(1) << "preempted sequence " << seq->id << " at " << seq->num_tokens() << " tokens";
}

bool Scheduler::PreemptPaused() {
  auto paused = std::find_if(running_.rbegin(), running_.rend(),
                             [](const Sequence* s) { return s->paused_this_step; });
  if (paused == running_.rend()) return false;
  Preempt(*paused);
  ++num_paused_preemptions_;
  return true;
}

std::span<const uint64_t> Scheduler::BlockHashes(Sequence* seq, int num_blocks) {
  ExtendBlockHashes(seq->tokens, options_.block_size, num_blocks, &seq->block_hashes,
                    seq->prefix_root);
  return std::span<const uint64_t>(seq->block_hashes).first(num_blocks);
}

bool Scheduler::NextBlockIsBeingComputed(Sequence* seq, int num_cached_blocks) {
  const int i = num_cached_blocks, end = (i + 1) * options_.block_size;
  // FindCachedPrefix never covers a sequence's last token, so neither does waiting.
  if (end > seq->target_tokens() - 1) return false;
  return IsComputingBlock(i, BlockHashes(seq, i + 1)[i], /*waiting_too=*/false);
}

bool Scheduler::IsComputingBlock(int index, uint64_t hash, bool waiting_too) {
  const int end = (index + 1) * options_.block_size;
  auto computes = [&](Sequence* r) {
    return !r->is_paused() && r->num_computed_tokens < end && r->target_tokens() >= end &&
           BlockHashes(r, index + 1)[index] == hash;
  };
  for (Sequence* r : running_) {
    if (!r->paused_this_step && computes(r)) return true;
  }
  return waiting_too && std::any_of(waiting_.begin(), waiting_.end(), computes);
}

void Scheduler::ForkDueSequences(std::vector<SequenceUpdate>* forks) {
  const size_t n = running_.size();
  for (size_t i = 0; i < n; ++i) {
    Sequence* parent = running_[i];
    if (parent->num_pending_forks == 0 || parent->num_computed_tokens < parent->target_tokens()) {
      continue;
    }
    for (int f = 1; f <= parent->num_pending_forks; ++f) {
      std::unique_ptr<Sequence> child = parent->Fork(f);
      kv_.Fork(parent->id, child->id);
      running_.push_back(child.get());
      SequenceUpdate& u = forks->emplace_back();
      u.seq_id = child->id;
      u.request_id = child->request_id;
      u.seq_index = child->seq_index;
      u.num_prompt_tokens = child->num_prompt_tokens;
      u.num_cached_tokens = child->num_cached_tokens;
      seqs_[child->id] = std::move(child);
    }
    parent->num_pending_forks = 0;
  }
}

void Scheduler::Emit(Sequence* seq, int num_new_tokens, int first_changed_block, StepCommand* cmd) {
  const int end = seq->num_computed_tokens + num_new_tokens;
  num_recomputed_tokens_ +=
      std::max(0, std::min(end, seq->computed_high_water) - seq->num_computed_tokens);
  step_.Emit(seq, num_new_tokens, first_changed_block, kv_.block_table(seq->id), cmd);
}

StepCommand Scheduler::Schedule() {
  StepCommand cmd;
  cmd.step_id = next_step_id_++;
  step_.Clear();
  ForkDueSequences(&pending_fork_updates_);
  // One view of which clients are reading for the whole step: the flags change under us.
  for (Sequence* s : running_) s->paused_this_step = s->is_paused();
  for (Sequence* s : waiting_) s->paused_this_step = s->is_paused();
  StepBudget budget(options_.max_num_batched_tokens,
                    options_.max_logit_rows > 0 ? options_.max_logit_rows : options_.max_num_seqs);
  bool preempted = false;

  // Running sequences first, oldest first.
  for (size_t i = 0; i < running_.size() && budget.tokens() > 0 &&
                     static_cast<int>(step_.entries().size()) < options_.max_num_seqs;) {
    Sequence* seq = running_[i];
    const int n =
        budget.Fit(*seq, seq->num_computed_tokens, seq->target_tokens() - seq->num_computed_tokens);
    if (n <= 0 || seq->paused_this_step) {
      ++i;
      continue;
    }
    const int end = seq->num_computed_tokens + n;
    bool self_preempted = false;
    while (!kv_.CanAppend(seq->id, seq->num_computed_tokens, end)) {
      // A paused sequence (its client is not reading) goes first, else the newest running one,
      // which has not been scheduled yet this step (we go oldest first).
      auto paused = std::find_if(running_.rbegin(), running_.rend(), [seq](const Sequence* s) {
        return s != seq && s->paused_this_step;
      });
      Sequence* victim = paused != running_.rend() ? *paused : running_.back();
      const size_t victim_at =
          std::find(running_.begin(), running_.end(), victim) - running_.begin();
      Preempt(victim);
      if (victim_at < i) --i;  // an earlier (paused, so unscheduled) one: seq moved down
      preempted = true;
      if (victim == seq) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    const int first_changed = kv_.Append(seq->id, seq->num_computed_tokens, end, &cmd.block_copies);
    budget.Take(*seq, seq->num_computed_tokens, end);
    Emit(seq, n, first_changed, &cmd);
    ++i;
  }

  // Then waiting ones, oldest first, unless this step had to preempt (no room to admit). A
  // paused running sequence never keeps one out: it is preempted for the slot or the blocks
  // a waiting one needs (its full blocks stay cached for when its client reads again).
  AdapterSlots adapters(options_.max_loras, running_);
  for (size_t w = 0; !preempted && w < waiting_.size() && budget.tokens() > 0 &&
                     static_cast<int>(step_.entries().size()) < options_.max_num_seqs;) {
    Sequence* seq = waiting_[w];
    // Its client is not reading, or its LoRA adapter would pass the worker's --max-loras.
    if (seq->paused_this_step || !adapters.Admits(*seq)) {
      ++w;
      continue;
    }
    if (static_cast<int>(running_.size()) >= options_.max_num_seqs) {
      if (!PreemptPaused()) break;
      ++w;  // the victim went to the front of waiting_
      continue;
    }
    const int target = seq->target_tokens();
    // A sequence whose every row is needed (prompt log probabilities not yet gathered, a mean
    // pooled embedding) computes its prompt in full: cached blocks would skip those rows. Its
    // own full blocks are still cached for others.
    const bool use_cache = options_.enable_prefix_caching && !seq->needs_every_row();
    const PrefixHit hit =
        use_cache ? kv_.FindCachedPrefix(std::span<const int>(seq->tokens).first(target),
                                         BlockHashes(seq, kv_.MaxPrefixBlocks(target)))
                  : PrefixHit();
    const int tail = TakePulledTail(seq, hit, use_cache);
    if (use_cache && tail < 0 &&
        NextBlockIsBeingComputed(seq, static_cast<int>(hit.blocks.size()))) {
      ++w;
      continue;
    }
    PrefixHit with_tail = hit;
    if (tail >= 0) with_tail.blocks.push_back(tail);
    const int cached = std::min(
        hit.num_tokens(options_.block_size) + (tail >= 0 ? seq->pulled_tail->num_tokens : 0),
        target);
    const int n = budget.Fit(*seq, cached, target - cached);
    if (n <= 0 && target > cached) break;  // no logit row left this step
    // max-len reservation: blocks for every token it may ever hold (the last sampled one is
    // never computed), taken now.
    const int reserve =
        options_.kv_reservation == KvReservation::kMaxLen
            ? std::max(
                  cached + n,
                  std::min(seq->num_prompt_tokens + seq->max_tokens, seq->max_total_tokens) - 1)
            : cached + n;
    if (!kv_.CanAllocate(with_tail, reserve)) {
      // Looked up again after the preemption: the victim's freed blocks stay cached.
      if (!PreemptPaused()) break;
      ++w;
      continue;
    }
    if (tail >= 0) {
      kv_.AllocateWithTail(seq->id, hit, tail, reserve);
      seq->pulled_tail.reset();
    } else {
      kv_.Allocate(seq->id, hit, reserve);
    }
    kv_.RecordPrefixQuery(seq->num_tokens(), cached);
    if (!seq->admitted_once) {
      seq->num_cached_tokens = cached;
      seq->queue_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - seq->added_at).count();
    }
    seq->admitted_once = true;
    seq->preempted = false;
    seq->num_computed_tokens = cached;
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
    running_.push_back(seq);
    adapters.Admit(*seq);
    if (n > 0) {
      budget.Take(*seq, cached, cached + n);
      Emit(seq, n, static_cast<int>(kv_.block_table(seq->id).size()), &cmd);
    }
  }
  if (drafts_.enabled()) AddDrafts(budget, &cmd);
  cmd.finished_ids.swap(finished_on_worker_);
  return cmd;
}

void Scheduler::AddDrafts(const StepBudget& budget, StepCommand* cmd) {
  draft_slots_.clear();
  const std::vector<StepRecord::Entry>& entries = step_.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    const StepRecord::Entry& step = entries[i];
    Sequence* seq = step.seq;
    if (!step.sample || step.num_tokens != 1 || step.prompt_logprobs || !seq->may_draft()) continue;
    draft_slots_.push_back({.index = i,
                            .tokens = seq->tokens,
                            .first_position = seq->num_computed_tokens + 1,
                            .max_tokens = seq->max_draft_tokens(),
                            .acceptance = &seq->acceptance});
  }
  drafts_.Plan(cmd->scheduled, draft_slots_, budget.tokens(), budget.logit_rows(),
               [&](const DraftSlot& slot, std::span<const int> draft) {
                 return CommitDraft(slot.index, draft, cmd);
               });
}

bool Scheduler::CommitDraft(size_t i, std::span<const int> draft, StepCommand* cmd) {
  StepRecord::Entry& step = step_.entries()[i];
  Sequence* seq = step.seq;
  const int n = static_cast<int>(draft.size());
  const int begin = seq->num_computed_tokens, end = begin + 1 + n;
  if (!kv_.CanAppend(seq->id, begin, end)) return false;  // a draft never preempts
  kv_.Append(seq->id, begin, end, &cmd->block_copies);
  ScheduledSequence& out = cmd->scheduled[i];  // Emit added both in the same order
  out.token_ids.insert(out.token_ids.end(), draft.begin(), draft.end());
  out.num_draft_tokens = n;
  const std::vector<int>& table = kv_.block_table(seq->id);
  out.new_block_ids.assign(table.begin() + out.num_kept_blocks, table.end());
  seq->num_synced_blocks = static_cast<int>(table.size());
  step.num_tokens += n;
  step.num_draft = n;
  return true;
}

void Scheduler::SettleDraft(Sequence* seq, int num_draft, int num_kept) {
  drafts_.Settle(&seq->acceptance, num_draft, num_kept);
  if (num_kept < num_draft) {
    kv_.Truncate(seq->id, seq->num_computed_tokens);
    seq->num_synced_blocks = std::min<int>(seq->num_synced_blocks, kv_.block_table(seq->id).size());
  }
}

const Sequence* Scheduler::sequence(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

Scheduler::KvSlots Scheduler::kv_slots() const {
  KvSlots slots;
  for (const Sequence* seq : running_) {
    slots.used += seq->num_computed_tokens;
    slots.reserved += static_cast<int64_t>(kv_.block_table(seq->id).size()) * options_.block_size;
  }
  return slots;
}

// KV transfers between workers (issue 28): sequences that leave with their K/V (a draining
// worker's, a preempted one's) and those that arrive with it (a pulled partial block).

int Scheduler::TakePulledTail(Sequence* seq, const PrefixHit& hit, bool use) {
  if (!seq->pulled_tail.has_value()) return -1;
  const int tail = seq->pulled_tail->block;
  // The tail continues the pulled full blocks: useless when any of them was evicted since.
  if (use && static_cast<int>(hit.blocks.size()) == seq->pulled_tail->index) return tail;
  kv_.Release(std::span<const int>(&tail, 1));
  seq->pulled_tail.reset();
  return -1;
}

std::vector<Scheduler::Detached> Scheduler::DetachRunning() {
  std::vector<Detached> out;
  for (Sequence* seq : std::vector<Sequence*>(running_)) {
    if (seq->num_pending_forks > 0 || seq->num_computed_tokens == 0) continue;
    Detached& d = out.emplace_back();
    d.request_id = seq->request_id;
    d.seq_index = seq->seq_index;
    d.tokens = seq->tokens;
    d.num_computed = seq->num_computed_tokens;
    d.blocks = kv_.HoldTable(seq->id, seq->num_computed_tokens);
    // Gone without an update or a finish reason: it goes on elsewhere. Its blocks are held.
    kv_.Free(seq->id);
    if (seq->on_worker) finished_on_worker_.push_back(seq->id);
    std::erase(running_, seq);
    seqs_.erase(seq->id);
  }
  return out;
}

std::vector<Scheduler::Detached> Scheduler::DetachPreempted(int max_blocks) {
  std::vector<Detached> out;
  const int bs = options_.block_size;
  for (Sequence* seq : std::vector<Sequence*>(waiting_.begin(), waiting_.end())) {
    if (!seq->preempted || seq->is_paused() || seq->num_pending_forks > 0) continue;
    const int need = (seq->num_tokens() + bs) / bs;  // its tokens and the next one
    if (need > max_blocks) continue;
    max_blocks -= need;
    // Full blocks only (its partial last one was freed), never the one holding the last token.
    const int computed = std::min(seq->computed_high_water, seq->num_tokens() - 1) / bs;
    Detached& d = out.emplace_back();
    d.request_id = seq->request_id;
    d.seq_index = seq->seq_index;
    d.tokens = seq->tokens;
    d.blocks = kv_.HoldCachedPrefix(std::span<const int>(seq->tokens).first(computed * bs),
                                    BlockHashes(seq, computed));
    d.num_computed = static_cast<int>(d.blocks.size()) * bs;
    d.preempted = true;
    TakePulledTail(seq, PrefixHit(), /*use=*/false);
    std::erase(waiting_, seq);
    seqs_.erase(seq->id);
  }
  return out;
}

std::vector<SequenceUpdate> Scheduler::Postprocess(const StepResult& result) {
  std::vector<SequenceUpdate> updates;
  updates.swap(pending_fork_updates_);
  StepRecord::Reader reader(result);
  for (const StepRecord::Entry& s : step_.entries()) {
    Sequence* seq = s.seq;
    if (s.prompt_logprobs) GatherPromptLogprobs(reader.PromptLogprobsOf(s), seq);
    const std::span<const SampledToken> samples =
        s.sample ? reader.SamplesOf(s) : std::span<const SampledToken>();
    // A draft's K/V count only as far as the worker kept it. Blocks are cached up to the tokens
    // known now (the kept draft tokens' own blocks are cached by the next step).
    const int num_rejected =
        s.num_draft > 0 ? s.num_draft - static_cast<int>(samples.size() - 1) : 0;
    seq->num_computed_tokens += s.num_tokens - num_rejected;
    const int cacheable = std::min(seq->num_computed_tokens, seq->num_tokens());
    kv_.CacheFullBlocks(seq->id, seq->tokens, BlockHashes(seq, cacheable / options_.block_size),
                        cacheable);
    const bool embedded =
        seq->pooling != Pooling::kNone && seq->num_computed_tokens == seq->num_tokens();
    if (!embedded && !s.sample) continue;
    SequenceUpdate u;
    u.seq_id = seq->id;
    u.request_id = seq->request_id;
    u.seq_index = seq->seq_index;
    FinishReason reason = FinishReason::kStop;  // an embedding ends with its vector
    if (embedded) {
      u.embedding = reader.EmbeddingOf(*seq);
    } else {
      if (seq->sampling.prompt_logprobs >= 0 && seq->num_output_tokens() == 0) {
        u.prompt_logprobs = std::make_shared<const PromptLogprobs>(std::move(seq->prompt_logprobs));
        seq->prompt_logprobs = PromptLogprobs();
      }
      reason = AppendSampled(samples, seq, &u);
      if (s.num_draft > 0) SettleDraft(seq, s.num_draft, static_cast<int>(samples.size()) - 1);
      u.num_output_tokens = seq->num_output_tokens();
    }
    u.num_prompt_tokens = seq->num_prompt_tokens;
    u.num_cached_tokens = seq->num_cached_tokens;
    if (seq->queue_seconds >= 0) {
      u.queue_seconds = seq->queue_seconds;
      seq->queue_seconds = -1;  // reported once
    }
    if (reason != FinishReason::kNone) {
      std::erase(running_, seq);
      Finish(seq, reason);  // its blocks are freed (their full ones cached)
      u.finished = true;
      u.finish_reason = reason;
    }
    updates.push_back(std::move(u));
  }
  // Drop finished sequences now that nothing refers to them.
  for (const SequenceUpdate& u : updates) {
    if (u.finished) seqs_.erase(u.seq_id);
  }
  step_.Clear();
  return updates;
}

}  // namespace pagoda
