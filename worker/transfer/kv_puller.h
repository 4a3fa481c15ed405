// How a worker receives KV blocks from a peer (issue 28): the engine's side of a transfer,
// without gRPC (worker/transfer/kv_puller_service.h is the implementation over the wire).
#ifndef PAGODA_WORKER_TRANSFER_KV_PULLER_H_
#define PAGODA_WORKER_TRANSFER_KV_PULLER_H_

#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/step.h"
#include "worker/kv_pool.h"

namespace pagoda {

// Lets the engine cancel a pull that is blocked in I/O (on Reset and on destruction).
// Thread-safe.
class PullCancel {
 public:
  // `fn` runs on Cancel(), or at once when already cancelled; OnCancel(nullptr) before what `fn`
  // captures goes away.
  void OnCancel(std::function<void()> fn) {
    absl::MutexLock lock(&mu_);
    fn_ = std::move(fn);
    if (cancelled_ && fn_) fn_();
  }
  void Cancel() {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (fn_) fn_();
  }

 private:
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> fn_ ABSL_GUARDED_BY(mu_);
};

class KvPuller {
 public:
  virtual ~KvPuller() = default;
  // Copies the peer's blocks pull.src_block_ids into `pool`'s pull.dst_block_ids, every layer,
  // K and V, bytes as they are; returns the bytes received. Blocks until done, failed or
  // cancelled. An error (peer unreachable or refusing, another geometry or dtype, a stream cut
  // short) leaves the dst blocks' contents undefined. Called on a transfer thread, one per
  // pull, while steps run: it writes only the dst blocks, which no step touches meanwhile.
  // REQUIRES: pull was validated (sizes equal and bounded, dst ids in `pool`, distinct).
  virtual absl::StatusOr<int64_t> Pull(const BlockPull& pull, KvPool* pool, PullCancel* cancel) = 0;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_TRANSFER_KV_PULLER_H_
