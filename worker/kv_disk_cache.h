// A worker's KV blocks kept on disk across its restarts (--kv-cache-dir, issue 38): between the
// engine's pool and ledger and the directory's files (KvDiskStore).
//
//   start:   Restore ── the most recently used chains that fit ──▶ pool blocks 0.., ledger
//            (before the Hello, which offers them to the router as after a router restart)
//   a step:  BeforeOverwrite(b) ── the ledger vouches for b and the disk lacks it: copy its
//            bytes out ──▶ bounded queue ──▶ writer thread ──▶ file; a full queue drops it
//   drain:   SaveAll ── every block the ledger vouches for ──▶ queue (waiting, up to a deadline)
//
// Serving never waits on the disk: a step only copies a block's bytes into a queued buffer, or
// drops it (counted) when the queue is full; only Restore (at start) and SaveAll (at drain) wait.
//
// Thread-safety: Restore, BeforeOverwrite and SaveAll run on the engine's step thread (they read
// its pool and ledger); the writer thread only touches the queue (mu_) and the store.
#ifndef PAGODA_WORKER_KV_DISK_CACHE_H_
#define PAGODA_WORKER_KV_DISK_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/kv_disk_store.h"
#include "worker/kv_ledger.h"
#include "worker/kv_pool.h"

namespace pagoda {

struct KvDiskCacheOptions {
  std::string dir;                              // "" = off
  int64_t max_bytes = int64_t{10} << 30;        // the directory's bound; LRU blocks go past it
  absl::Duration max_load = absl::Seconds(30);  // Restore stops reading after this
  absl::Duration max_save = absl::Seconds(10);  // SaveAll gives up on what is left after this
  int64_t queue_bytes = int64_t{64} << 20;      // blocks waiting for the writer; more are dropped
};

class KvDiskCache {
 public:
  // Opens the directory (KvDiskStore::Open's errors) for blocks of `pool`'s shape under
  // `fingerprint` (the model's, with its weight and compute dtypes), and starts the writer.
  static absl::StatusOr<std::unique_ptr<KvDiskCache>> Open(const KvDiskCacheOptions& options,
                                                           const std::string& fingerprint,
                                                           const KvPool& pool);
  ~KvDiskCache();  // writes what is queued, then stops the writer

  // Loads the most recently used chains that fit in `max_blocks` into the pool's blocks 0, 1, …
  // and tells the ledger what they hold; a file that does not check out is removed with one log
  // line, and its descendants are not loaded. Returns how many blocks were loaded.
  // REQUIRES: before the first step, every block free.
  int Restore(int max_blocks, KvPool* pool, KvLedger* ledger);

  // A step is about to overwrite `block`: if the ledger vouches for it and the directory lacks
  // it, its bytes are copied into the queue (or dropped, counted, when the queue is full).
  void BeforeOverwrite(int block, const KvPool& pool, const KvLedger& ledger);

  // Queues every block the ledger vouches for (waiting for room) and waits until they are
  // written, up to max_save. For a drain: no step runs meanwhile.
  void SaveAll(const KvPool& pool, const KvLedger& ledger);

  struct Stats {
    int64_t written = 0;  // files written
    int64_t dropped = 0;  // blocks not written: the queue was full, or a write failed
  };
  Stats stats() const;
  const KvDiskStore& store() const { return *store_; }

 private:
  struct Job {
    uint64_t hash = 0;
    uint64_t parent_hash = 0;
    std::vector<int> tokens;    // (block_size)
    std::vector<std::byte> kv;  // (layers, K then V, block_bytes): empty for a touch
  };
  KvDiskCache(const KvDiskCacheOptions& options, std::unique_ptr<KvDiskStore> store, int capacity);
  // Queues block `b` (vouched as `v`); unless `wait`, drops it when the queue is full.
  // Returns false when it was dropped.
  bool Enqueue(int b, const KvLedger::Vouched& v, const KvPool& pool, bool wait,
               absl::Time deadline);
  void WriterLoop();

  // Constant after construction.
  const KvDiskCacheOptions options_;
  const std::unique_ptr<KvDiskStore> store_;
  const int capacity_;  // jobs with bytes in the queue at most

  mutable absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  int num_queued_blocks_ ABSL_GUARDED_BY(mu_) = 0;                  // jobs with bytes in queue_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;                       // the writer holds a job
  std::vector<std::vector<std::byte>> spare_ ABSL_GUARDED_BY(mu_);  // buffers to reuse
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  // Last: started once the rest is built.
  std::thread writer_;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_KV_DISK_CACHE_H_
