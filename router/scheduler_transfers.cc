// The scheduler's part in KV transfers between workers (issue 28): sequences that leave with
// their K/V (a draining worker's, a preempted one's) and those that arrive with it (a pulled
// partial block).
#include <algorithm>

#include "router/scheduler.h"

namespace pagoda {

int Scheduler::TakePulledTail(Sequence* seq, const PrefixHit& hit, bool use) {
  const int tail = seq->pulled_tail_block;
  if (tail < 0) return -1;
  // The tail continues the pulled full blocks: useless when any of them was evicted since.
  if (use && static_cast<int>(hit.blocks.size()) == seq->pulled_tail_index) return tail;
  kv_.Release(std::span<const int>(&tail, 1));
  seq->pulled_tail_block = -1;
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

}  // namespace pagoda
