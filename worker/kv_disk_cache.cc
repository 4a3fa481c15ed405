#include "worker/kv_disk_cache.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pagoda {
namespace {

// Bytes of one block in a file: K then V of each layer.
int64_t KvBytes(const KvPool& pool) {
  return int64_t{2} * pool.num_layers() * static_cast<int64_t>(pool.block_bytes());
}

void Gather(const KvPool& pool, int block, std::byte* out) {
  for (int l = 0; l < pool.num_layers(); ++l) {
    for (KvPool::Part part : {KvPool::Part::kK, KvPool::Part::kV}) {
      const std::span<const std::byte> bytes = pool.BlockBytes(block, l, part);
      std::memcpy(out, bytes.data(), bytes.size());
      out += bytes.size();
    }
  }
}

void Scatter(const std::byte* in, int block, KvPool* pool) {
  for (int l = 0; l < pool->num_layers(); ++l) {
    for (KvPool::Part part : {KvPool::Part::kK, KvPool::Part::kV}) {
      const std::span<std::byte> bytes = pool->MutableBlockBytes(block, l, part);
      std::memcpy(bytes.data(), in, bytes.size());
      in += bytes.size();
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvDiskCache>> KvDiskCache::Open(const KvDiskCacheOptions& options,
                                                               const std::string& fingerprint,
                                                               const KvPool& pool) {
  const KvDiskSpace space{absl::StrCat(fingerprint, ";kv=", KvLayoutName(pool.dtype())),
                          pool.block_size(), KvBytes(pool)};
  absl::StatusOr<std::unique_ptr<KvDiskStore>> store =
      KvDiskStore::Open(options.dir, space, options.max_bytes);
  if (!store.ok()) return store.status();
  const int capacity =
      static_cast<int>(std::clamp<int64_t>(options.queue_bytes / space.kv_bytes, 1, 1 << 16));
  return std::unique_ptr<KvDiskCache>(new KvDiskCache(options, *std::move(store), capacity));
}

KvDiskCache::KvDiskCache(const KvDiskCacheOptions& options, std::unique_ptr<KvDiskStore> store,
                         int capacity)
    : options_(options), store_(std::move(store)), capacity_(capacity) {
  writer_ = std::thread([this] { WriterLoop(); });
}

KvDiskCache::~KvDiskCache() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  writer_.join();
}

KvDiskCache::Stats KvDiskCache::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

int KvDiskCache::Restore(int max_blocks, KvPool* pool, KvLedger* ledger) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options_.max_load;
  const std::vector<KvDiskStore::Planned> plan =
      store_->Plan(std::min(max_blocks, pool->num_blocks()));
  std::vector<int> tokens(pool->block_size());
  std::vector<std::byte> kv(static_cast<size_t>(KvBytes(*pool)));  // (layers, K then V, bytes)
  absl::flat_hash_map<uint64_t, int> loaded;                       // hash → pool block
  int next = 0, num_failed = 0;
  for (const KvDiskStore::Planned& p : plan) {
    if (absl::Now() > deadline) {
      LOG(WARNING) << "--kv-cache-dir: stopped loading after " << options_.max_load << " with "
                   << next << " of " << plan.size() << " blocks read";
      break;
    }
    int parent = -1;
    if (p.parent_hash != 0) {
      auto it = loaded.find(p.parent_hash);
      if (it == loaded.end()) continue;  // its parent did not check out
      parent = it->second;
    }
    if (absl::Status read = store_->Read(p.hash, tokens, kv); !read.ok()) {
      LOG(WARNING) << "--kv-cache-dir: ignored " << read.message();
      ++num_failed;
      continue;
    }
    Scatter(kv.data(), next, pool);
    ledger->Restored(next, parent, tokens, p.hash);
    loaded[p.hash] = next++;
  }
  LOG(INFO) << "--kv-cache-dir=" << store_->dir() << ": loaded " << next << " blocks ("
            << int64_t{next} * pool->block_size() << " tokens) in " << absl::Now() - start
            << " (at most " << options_.max_load << ")"
            << (num_failed > 0 ? absl::StrCat("; ", num_failed, " files did not check out") : "");
  return next;
}

bool KvDiskCache::Enqueue(int b, const KvLedger::Vouched& v, const KvPool& pool, bool wait,
                          absl::Time deadline) {
  std::vector<std::byte> buffer;
  {
    absl::MutexLock lock(&mu_);
    const auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return num_queued_blocks_ < capacity_;
    };
    if (!(wait ? mu_.AwaitWithDeadline(absl::Condition(&room), deadline) : room())) {
      ++stats_.dropped;
      return false;
    }
    ++num_queued_blocks_;  // this block's place, taken now
    if (!spare_.empty()) {
      buffer = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  buffer.resize(static_cast<size_t>(KvBytes(pool)));  // allocates only until buffers are spare
  Gather(pool, b, buffer.data());
  Job job{v.hash, v.parent_hash, std::vector<int>(v.tokens.begin(), v.tokens.end()),
          std::move(buffer)};
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(job));
  return true;
}

void KvDiskCache::BeforeOverwrite(int block, const KvPool& pool, const KvLedger& ledger) {
  KvLedger::Vouched v;
  if (!ledger.Vouch(block, &v) || store_->Contains(v.hash)) return;
  if (!Enqueue(block, v, pool, /*wait=*/false, absl::InfinitePast())) {
    LOG_EVERY_N(WARNING, 1000) << "--kv-cache-dir: the disk is behind; a block was dropped ("
                               << google::COUNTER << " so far)";
  }
}

void KvDiskCache::SaveAll(const KvPool& pool, const KvLedger& ledger) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options_.max_save;
  const std::vector<CachedBlock> blocks = ledger.Export(pool.num_blocks());
  int num_queued = 0, num_there = 0, num_dropped = 0;
  // Children first: each parent is then used after them, as KvDiskStore orders a chain.
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    KvLedger::Vouched v;
    if (!ledger.Vouch(it->block, &v)) continue;
    if (store_->Contains(v.hash)) {
      ++num_there;
      absl::MutexLock lock(&mu_);
      queue_.push_back(Job{v.hash, v.parent_hash, {}, {}});  // a touch
    } else if (Enqueue(it->block, v, pool, /*wait=*/true, deadline)) {
      ++num_queued;
    } else {
      ++num_dropped;
    }
  }
  absl::MutexLock lock(&mu_);
  const auto idle = [this]()
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() && !writing_; };
  const bool done = mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
  LOG(INFO) << "--kv-cache-dir=" << store_->dir() << ": saved " << num_queued
            << " blocks at drain (" << num_there << " already there) in " << absl::Now() - start
            << (done ? ""
                     : absl::StrCat("; gave up after ", absl::FormatDuration(options_.max_save),
                                    " with ", queue_.size(), " still queued"))
            << (num_dropped > 0 ? absl::StrCat("; ", num_dropped, " dropped") : "")
            << "; this run wrote " << stats_.written << ", dropped " << stats_.dropped;
}

void KvDiskCache::WriterLoop() {
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopped, with nothing left to write
      job = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
    }
    absl::Status status;
    if (job.kv.empty()) {
      store_->Touch(job.hash);
    } else {
      status = store_->Write(job.hash, job.parent_hash, job.tokens, job.kv);
      if (!status.ok()) {
        LOG_EVERY_N(WARNING, 100) << "--kv-cache-dir: " << status.message();
      }
    }
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (job.kv.empty()) continue;
    --num_queued_blocks_;
    ++(status.ok() ? stats_.written : stats_.dropped);
    if (static_cast<int>(spare_.size()) < capacity_) spare_.push_back(std::move(job.kv));
  }
}

}  // namespace pagoda
