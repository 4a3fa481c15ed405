// The files of a worker's --kv-cache-dir (issue 38: a worker restart keeps its KV): one file per
// full KV block, named by its chain hash (KvLedger::ChainHash) and by the space it belongs to (a
// hash of the model fingerprint, the weight and K/V dtypes and the block size), so a file written
// under another model, dtype or block size is foreign. A LOCK file (flock) keeps a second live
// worker out of the directory.
//
//   DIR/LOCK                                   flock'ed by the worker that owns DIR; its pid
//   DIR/<space>-<hash>-<parent hash>.kvb       16 hex digits each; the parent's 0 for a first
//   file = Header | tokens int32[block_size] | kv bytes[kv_bytes]     (little-endian, as x86)
//
// Each file is written to a temporary name then renamed (atomic), and carries an XXH3-64 of its
// header and body: a torn, foreign or corrupt file is removed, never loaded. The directory's
// files are untrusted: sizes are checked against what this worker expects before any read.
// The total is bounded (max_bytes): the least recently used blocks go first, and a block's
// ancestors always count as used after it, so a chain loses its tail before its head.
//
// Thread-safe: the index is guarded by mu_, file I/O runs outside it.
#ifndef PAGODA_WORKER_KV_DISK_STORE_H_
#define PAGODA_WORKER_KV_DISK_STORE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace pagoda {

// What makes a block file this worker's.
struct KvDiskSpace {
  std::string fingerprint;  // the model's, with its weight, compute and K/V dtypes
  int block_size = 0;       // tokens per block
  int64_t kv_bytes = 0;     // K and V of every layer of one block
};

class KvDiskStore {
 public:
  // Creates `dir` if needed, takes its lock (FAILED_PRECONDITION naming the holder's pid when
  // another live process has it), removes temporary and foreign files and files of the wrong
  // size, and indexes the rest by their names. `max_bytes` holds at least one block.
  static absl::StatusOr<std::unique_ptr<KvDiskStore>> Open(const std::string& dir,
                                                           const KvDiskSpace& space,
                                                           int64_t max_bytes);
  ~KvDiskStore();  // releases the lock

  // Whether a file holds `hash` (as far as the index knows: Read validates it).
  bool Contains(uint64_t hash) const;
  // Writes a block atomically, then drops least recently used files past max_bytes; a block
  // already there is only marked used. The error of a write that failed (nothing indexed).
  absl::Status Write(uint64_t hash, uint64_t parent_hash, std::span<const int> tokens,
                     std::span<const std::byte> kv);
  // Marks a block used now (its file's mtime too, so the order survives a restart).
  void Touch(uint64_t hash);

  // What to load at start: the most recently used whole chains (every block's parent present),
  // at most `max_blocks` blocks, each after its parent.
  struct Planned {
    uint64_t hash = 0;
    uint64_t parent_hash = 0;
  };
  std::vector<Planned> Plan(int max_blocks) const;

  // Reads and checks a block's file into `tokens` (block_size) and `kv` (kv_bytes). A file that
  // does not check out (torn, corrupt, not what its name says) is removed: DATA_LOSS saying why.
  absl::Status Read(uint64_t hash, std::span<int> tokens, std::span<std::byte> kv);

  int num_files() const;
  int max_files() const { return max_files_; }
  int64_t file_bytes() const { return file_bytes_; }
  const std::string& dir() const { return dir_; }

 private:
  struct Entry {
    uint64_t parent_hash = 0;
    uint64_t use = 0;  // larger = more recently used
  };
  KvDiskStore(std::string dir, const KvDiskSpace& space, int lock_fd, int max_files);
  // Scans the directory (Open): removes what is not ours, indexes the rest.
  void Scan();
  std::string PathOf(uint64_t hash, uint64_t parent_hash) const;
  // Marks `hash` and then its ancestors used now, each after the one before.
  void UseLocked(uint64_t hash) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Remove(uint64_t hash);

  // Constant after construction.
  const std::string dir_;
  const KvDiskSpace space_;
  const uint64_t space_hash_;
  const int64_t file_bytes_;  // header, tokens and K/V
  const int lock_fd_;
  const int max_files_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> index_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, uint64_t> by_use_ ABSL_GUARDED_BY(mu_);  // use → hash, oldest first
  uint64_t next_use_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_KV_DISK_STORE_H_
