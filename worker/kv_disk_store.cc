#include "worker/kv_disk_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "worker/kv_ledger.h"

namespace pagoda {
namespace {

constexpr char kMagic[8] = {'P', 'G', 'K', 'V', 'B', 'L', 'K', '1'};
constexpr char kSuffix[] = ".kvb";
constexpr char kTempSuffix[] = ".kvb.tmp";

struct Header {
  char magic[8];
  uint64_t space;
  uint64_t hash;
  uint64_t parent_hash;
  uint64_t block_size;
  uint64_t kv_bytes;
  uint64_t checksum;  // XXH3-64 of this header (with checksum 0) and the body
};
static_assert(sizeof(Header) == 56);

// <space>-<hash>-<parent>.kvb → its three numbers; false for any other name.
bool ParseName(const std::string& name, uint64_t* space, uint64_t* hash, uint64_t* parent) {
  if (name.size() != 16 * 3 + 2 + 4 || !absl::EndsWith(name, kSuffix)) return false;
  if (name[16] != '-' || name[33] != '-') return false;
  uint64_t* out[] = {space, hash, parent};
  for (int i = 0; i < 3; ++i) {
    uint64_t v = 0;
    for (int k = 0; k < 16; ++k) {
      const char c = name[i * 17 + k];
      int d;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else {
        return false;
      }
      v = v << 4 | static_cast<uint64_t>(d);
    }
    *out[i] = v;
  }
  return true;
}

// Writes all of `data` at the file's offset; false on an error.
bool WriteAll(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvDiskStore>> KvDiskStore::Open(const std::string& dir,
                                                               const KvDiskSpace& space,
                                                               int64_t max_bytes) {
  if (space.block_size <= 0 || space.kv_bytes <= 0) {
    return absl::InvalidArgumentError("a KV disk space needs a block size and block bytes");
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("--kv-cache-dir=", dir, ": cannot create it: ", error.message()));
  }
  const std::string lock_path = dir + "/LOCK";
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--kv-cache-dir=", dir, ": cannot open ", lock_path, ": ", strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    const ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("--kv-cache-dir=", dir, " is in use by another worker (pid ",
                     n > 0 ? std::string(pid, static_cast<size_t>(n)) : "unknown",
                     "): give each worker its own directory"));
  }
  const std::string pid = absl::StrCat(getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    LOG(WARNING) << "cannot write the pid into " << lock_path << ": " << strerror(errno);
  }
  const int64_t file_bytes =
      static_cast<int64_t>(sizeof(Header)) + int64_t{space.block_size} * 4 + space.kv_bytes;
  const int max_files =
      static_cast<int>(std::clamp<int64_t>(max_bytes / file_bytes, 1, int64_t{1} << 30));
  std::unique_ptr<KvDiskStore> store(new KvDiskStore(dir, space, fd, max_files));
  store->Scan();
  return store;
}

KvDiskStore::KvDiskStore(std::string dir, const KvDiskSpace& space, int lock_fd, int max_files)
    : dir_(std::move(dir)),
      space_(space),
      space_hash_(XXH3_64bits_withSeed(
          space.fingerprint.data(), space.fingerprint.size(),
          static_cast<uint64_t>(space.block_size) << 40 ^ static_cast<uint64_t>(space.kv_bytes))),
      file_bytes_(static_cast<int64_t>(sizeof(Header)) + int64_t{space.block_size} * 4 +
                  space.kv_bytes),
      lock_fd_(lock_fd),
      max_files_(max_files) {}

KvDiskStore::~KvDiskStore() { close(lock_fd_); }  // releases the flock

std::string KvDiskStore::PathOf(uint64_t hash, uint64_t parent_hash) const {
  return absl::StrFormat("%s/%016x-%016x-%016x%s", dir_, space_hash_, hash, parent_hash, kSuffix);
}

void KvDiskStore::Scan() {
  struct Found {
    uint64_t hash, parent;
    int64_t mtime;
  };
  std::vector<Found> found;
  int num_foreign = 0, num_torn = 0;
  std::error_code error;
  for (const auto& item : std::filesystem::directory_iterator(dir_, error)) {
    const std::string name = item.path().filename().string();
    const std::string path = item.path().string();
    if (absl::EndsWith(name, kTempSuffix)) {  // a write cut short
      unlink(path.c_str());
      ++num_torn;
      continue;
    }
    if (!absl::EndsWith(name, kSuffix)) continue;  // not ours: left alone
    uint64_t space = 0, hash = 0, parent = 0;
    struct stat st;
    if (!ParseName(name, &space, &hash, &parent) || space != space_hash_) {
      unlink(path.c_str());
      ++num_foreign;
      continue;
    }
    // Not a regular file of a block's size (a link, a directory, a file cut short): torn.
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != file_bytes_) {
      unlink(path.c_str());
      ++num_torn;
      continue;
    }
    found.push_back(
        {hash, parent, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
  }
  // Oldest first, then each block's ancestors moved after it: the order of UseLocked.
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  absl::MutexLock lock(&mu_);
  for (const Found& f : found) {
    if (index_.contains(f.hash)) continue;
    index_[f.hash] = {f.parent, 0};
  }
  for (const Found& f : found) UseLocked(f.hash);
  LOG(INFO) << "--kv-cache-dir=" << dir_ << ": " << index_.size() << " blocks of this model ("
            << index_.size() * file_bytes_ / (1 << 20) << " MiB, at most " << max_files_ << ")"
            << (num_foreign + num_torn > 0 ? absl::StrCat("; removed ", num_foreign,
                                                          " foreign and ", num_torn, " torn files")
                                           : "");
  // A directory that shrank since: the oldest go now.
  std::vector<std::pair<uint64_t, uint64_t>> drop;
  while (static_cast<int>(index_.size()) > max_files_) {
    const uint64_t oldest = by_use_.begin()->second;
    drop.emplace_back(oldest, index_[oldest].parent_hash);
    by_use_.erase(by_use_.begin());
    index_.erase(oldest);
  }
  for (const auto& [hash, parent] : drop) unlink(PathOf(hash, parent).c_str());
}

void KvDiskStore::UseLocked(uint64_t hash) {
  // A cycle of names cannot pass more blocks than the index holds.
  for (size_t steps = 0; steps <= index_.size(); ++steps) {
    auto it = index_.find(hash);
    if (it == index_.end()) return;
    if (it->second.use != 0) by_use_.erase(it->second.use);
    it->second.use = next_use_++;
    by_use_[it->second.use] = hash;
    if (it->second.parent_hash == 0) return;
    hash = it->second.parent_hash;
  }
}

bool KvDiskStore::Contains(uint64_t hash) const {
  absl::MutexLock lock(&mu_);
  return index_.contains(hash);
}

int KvDiskStore::num_files() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(index_.size());
}

void KvDiskStore::Touch(uint64_t hash) {
  uint64_t parent = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(hash);
    if (it == index_.end()) return;
    parent = it->second.parent_hash;
    UseLocked(hash);
  }
  utimensat(AT_FDCWD, PathOf(hash, parent).c_str(), nullptr, 0);
}

absl::Status KvDiskStore::Write(uint64_t hash, uint64_t parent_hash, std::span<const int> tokens,
                                std::span<const std::byte> kv) {
  if (tokens.size() != static_cast<size_t>(space_.block_size) ||
      kv.size() != static_cast<size_t>(space_.kv_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("a block of ", tokens.size(), " tokens and ",
                                                   kv.size(), " bytes is not of this space"));
  }
  if (Contains(hash)) {
    Touch(hash);
    return absl::OkStatus();
  }
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.space = space_hash_;
  header.hash = hash;
  header.parent_hash = parent_hash;
  header.block_size = static_cast<uint64_t>(space_.block_size);
  header.kv_bytes = static_cast<uint64_t>(space_.kv_bytes);
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, &header, sizeof(header));
  XXH3_64bits_update(&state, tokens.data(), tokens.size_bytes());
  XXH3_64bits_update(&state, kv.data(), kv.size());
  header.checksum = XXH3_64bits_digest(&state);

  const std::string path = PathOf(hash, parent_hash);
  const std::string temp = path.substr(0, path.size() - 4) + kTempSuffix;
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return absl::UnavailableError(absl::StrCat("cannot create ", temp, ": ", strerror(errno)));
  const bool ok = WriteAll(fd, &header, sizeof(header)) &&
                  WriteAll(fd, tokens.data(), tokens.size_bytes()) &&
                  WriteAll(fd, kv.data(), kv.size());
  const int write_errno = errno;
  if (close(fd) != 0 || !ok || rename(temp.c_str(), path.c_str()) != 0) {
    const int e = ok ? errno : write_errno;
    unlink(temp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", strerror(e)));
  }
  std::vector<std::pair<uint64_t, uint64_t>> drop;
  {
    absl::MutexLock lock(&mu_);
    index_[hash] = {parent_hash, 0};
    UseLocked(hash);
    while (static_cast<int>(index_.size()) > max_files_) {
      const uint64_t oldest = by_use_.begin()->second;
      drop.emplace_back(oldest, index_[oldest].parent_hash);
      by_use_.erase(by_use_.begin());
      index_.erase(oldest);
    }
  }
  for (const auto& [h, parent] : drop) unlink(PathOf(h, parent).c_str());
  return absl::OkStatus();
}

std::vector<KvDiskStore::Planned> KvDiskStore::Plan(int max_blocks) const {
  absl::MutexLock lock(&mu_);
  std::vector<Planned> out;
  absl::flat_hash_map<uint64_t, bool> chosen;  // hash → in `out`
  std::vector<Planned> chain;
  for (auto it = by_use_.rbegin(); it != by_use_.rend(); ++it) {
    if (static_cast<int>(out.size()) >= max_blocks) break;
    // This block and its ancestors not yet chosen, up to a first block or a chosen one.
    chain.clear();
    bool whole = false;
    for (uint64_t h = it->second; chain.size() <= index_.size();) {
      if (chosen.contains(h)) {
        whole = true;
        break;
      }
      auto e = index_.find(h);
      if (e == index_.end()) break;  // an orphan: its parent is gone
      chain.push_back({h, e->second.parent_hash});
      if (e->second.parent_hash == 0) {
        whole = true;
        break;
      }
      h = e->second.parent_hash;
    }
    if (!whole || chain.empty() || out.size() + chain.size() > static_cast<size_t>(max_blocks)) {
      continue;
    }
    for (auto c = chain.rbegin(); c != chain.rend(); ++c) {
      chosen[c->hash] = true;
      out.push_back(*c);
    }
  }
  return out;
}

void KvDiskStore::Remove(uint64_t hash) {
  uint64_t parent = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(hash);
    if (it == index_.end()) return;
    parent = it->second.parent_hash;
    by_use_.erase(it->second.use);
    index_.erase(it);
  }
  unlink(PathOf(hash, parent).c_str());
}

absl::Status KvDiskStore::Read(uint64_t hash, std::span<int> tokens, std::span<std::byte> kv) {
  CHECK(tokens.size() == static_cast<size_t>(space_.block_size) &&
        kv.size() == static_cast<size_t>(space_.kv_bytes))
      << "buffers of " << tokens.size() << " tokens and " << kv.size() << " bytes";
  uint64_t parent = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(hash);
    if (it == index_.end()) return absl::NotFoundError(absl::StrFormat("no block %016x", hash));
    parent = it->second.parent_hash;
  }
  const std::string path = PathOf(hash, parent);
  auto bad = [&](const std::string& why) {
    Remove(hash);
    return absl::DataLossError(absl::StrCat(path, ": ", why, "; removed"));
  };
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);  // a file, not a link
  if (fd < 0) return bad(absl::StrCat("cannot open: ", strerror(errno)));
  struct stat st;
  Header header;
  // The size first: nothing is read past what this worker expects.
  const bool sized = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == file_bytes_;
  const bool read = sized && ReadAll(fd, &header, sizeof(header)) &&
                    ReadAll(fd, tokens.data(), tokens.size_bytes()) &&
                    ReadAll(fd, kv.data(), kv.size());
  close(fd);
  if (!sized) return bad("torn (not the size of a block)");
  if (!read) return bad("cannot read");
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0 || header.space != space_hash_ ||
      header.hash != hash || header.parent_hash != parent ||
      header.block_size != static_cast<uint64_t>(space_.block_size) ||
      header.kv_bytes != static_cast<uint64_t>(space_.kv_bytes)) {
    return bad("its header is not what its name says");
  }
  XXH3_state_t state;
  Header zeroed = header;
  zeroed.checksum = 0;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, &zeroed, sizeof(zeroed));
  XXH3_64bits_update(&state, tokens.data(), tokens.size_bytes());
  XXH3_64bits_update(&state, kv.data(), kv.size());
  if (XXH3_64bits_digest(&state) != header.checksum) return bad("corrupt (checksum)");
  if (KvLedger::ChainHash(parent, tokens) != hash) return bad("its tokens are not its hash's");
  return absl::OkStatus();
}

}  // namespace pagoda
