#include "common/model/weights_digest.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pagoda {
namespace {

// `on_read` (may be null) gets each read's byte count.
absl::Status HashFile(const std::string& path, XXH3_state_t* state,
                      const std::function<void(int64_t)>& on_read) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  constexpr size_t kChunk = 4 << 20;
  std::unique_ptr<char[]> buffer(new char[kChunk]);
  absl::Status status;
  for (;;) {
    const ssize_t n = read(fd, buffer.get(), kChunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = absl::InvalidArgumentError(absl::StrCat("cannot read ", path));
      break;
    }
    if (n == 0) break;
    XXH3_128bits_update(state, buffer.get(), static_cast<size_t>(n));
    if (on_read) on_read(n);
  }
  close(fd);
  return status;
}

}  // namespace

absl::StatusOr<std::string> WeightsDigest(
    const std::string& model_path,
    const std::function<void(int64_t done, int64_t total)>& progress) {
  namespace fs = std::filesystem;
  std::error_code error;
  std::vector<fs::path> files;
  if (fs::is_directory(model_path, error)) {
    for (const fs::directory_entry& entry : fs::directory_iterator(model_path, error)) {
      if (entry.path().extension() == ".safetensors") files.push_back(entry.path());
    }
    if (files.empty()) {
      return absl::NotFoundError(absl::StrCat("no .safetensors file in ", model_path));
    }
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(model_path);
  }
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                 &XXH3_freeState);
  XXH3_128bits_reset(state.get());
  int64_t total = 0, done = 0;
  for (const fs::path& file : files) {
    const std::uintmax_t size = fs::file_size(file, error);
    if (!error) total += static_cast<int64_t>(size);
  }
  std::function<void(int64_t)> on_read;
  if (progress) {
    on_read = [&](int64_t n) {
      done += n;
      progress(done, std::max(total, done));
    };
  }
  for (const fs::path& file : files) {
    if (absl::Status s = HashFile(file.string(), state.get(), on_read); !s.ok()) return s;
  }
  const XXH128_hash_t h = XXH3_128bits_digest(state.get());
  return absl::StrFormat("%016x%016x", h.high64, h.low64);
}

}  // namespace pagoda
