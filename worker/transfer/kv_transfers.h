// The pulls in flight on one worker (issue 28): which blocks they are writing, their threads,
// and their results until a step reports them. The engine asks it before each step whether the
// step touches a block still being received, and starts the step's pulls; each runs on a
// thread of its own, so transfers overlap compute.
// Thread-safe: transfer threads report here while the engine's thread runs steps.
#ifndef PAGODA_WORKER_TRANSFER_KV_TRANSFERS_H_
#define PAGODA_WORKER_TRANSFER_KV_TRANSFERS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/step.h"
#include "worker/kv_pool.h"
#include "worker/transfer/kv_puller.h"

namespace pagoda {

class KvTransfers {
 public:
  // The most pulls one worker runs at once (a thread each).
  static constexpr int kMaxPullsInFlight = 64;

  // `pool` is not owned and must outlive this object. Transfers are off until SetPuller.
  explicit KvTransfers(KvPool* pool) : pool_(pool) {}
  // Cancels the pulls in flight and waits for their threads.
  ~KvTransfers();

  // REQUIRES: no pull started yet.
  void SetPuller(std::unique_ptr<KvPuller> puller) { puller_ = std::move(puller); }
  bool enabled() const { return puller_ != nullptr; }

  // The blocks pulls in flight are writing, each with its transfer id.
  absl::flat_hash_map<int, int64_t> InFlight() const;
  // Whether any pull is in flight (no copy of InFlight: asked before every step).
  bool busy() const;
  // INVALID_ARGUMENT naming the pull and field when `pulls` cannot all start now: transfers off,
  // sizes, ids outside the pool, a dst block repeated, in flight or `held` (by a sequence),
  // a transfer id already in flight, too many pulls.
  absl::Status Validate(const std::vector<BlockPull>& pulls,
                        const std::function<bool(int block)>& held) const;
  // The block tables of a worker's sequences before a step, by sequence id.
  using SequenceTables = absl::flat_hash_map<int64_t, const std::vector<int>*>;
  // The transfers' part of checking a step (WorkerEngine::Validate calls it last):
  // INVALID_ARGUMENT naming the step and the pull, copy or sequence when its pulls cannot
  // start (Validate, with the blocks of the sequences that outlive its finished_ids as held)
  // or when it reads or writes a block a pull is still receiving, one in flight or one of the
  // step's own: a block copy's source or destination, a sequence's kept or new blocks.
  absl::Status ValidateStep(const StepCommand& cmd, const SequenceTables& tables) const;
  // Starts each pull on a thread. REQUIRES: Validate(pulls) is OK.
  void Start(const std::vector<BlockPull>& pulls);
  // Appends the results of the pulls that ended since the last call. With `await`, when none
  // has ended and some are in flight, first waits up to `timeout` for one to end.
  void TakeEnded(bool await, absl::Duration timeout, std::vector<TransferResult>* out);
  // Cancels every pull in flight, waits for their threads and forgets their results (a new
  // router connection starts afresh).
  void CancelAll();

 private:
  struct Running {
    PullCancel cancel;
    std::thread thread;
    std::vector<int> dst_block_ids;
    bool ended = false;  // guarded by mu_: its thread may be joined
  };
  void Run(const BlockPull& pull, Running* running);
  // Joins the threads of the pulls that ended. REQUIRES: mu_ not held.
  void JoinEnded();

  KvPool* const pool_;  // Not owned.
  std::unique_ptr<KvPuller> puller_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<int64_t, std::unique_ptr<Running>> running_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int, int64_t> in_flight_ ABSL_GUARDED_BY(mu_);  // dst block -> transfer
  std::vector<TransferResult> ended_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_TRANSFER_KV_TRANSFERS_H_
