#include "router/link/loading_board.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/process/progress_meter.h"

namespace pagoda {
namespace {

// Bytes in a report at most (a petabyte): counts past it are not a model's.
constexpr int64_t kMaxBytes = int64_t{1} << 50;

bool Printable(const std::string& s, size_t max_bytes) {
  return s.size() <= max_bytes &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

}  // namespace

absl::StatusOr<std::optional<std::string>> LoadingBoard::Report(const LoadReport& report,
                                                                const std::string& peer,
                                                                absl::Time now) {
  if (report.worker_name.empty() || !Printable(report.worker_name, kMaxNameBytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker_name: 1 to ", kMaxNameBytes, " printable ASCII bytes are expected"));
  }
  if (report.what.empty() || !Printable(report.what, kMaxWhatBytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("what: 1 to ", kMaxWhatBytes, " printable ASCII bytes are expected"));
  }
  if (report.total_bytes < 0 || report.total_bytes > kMaxBytes) {
    return absl::InvalidArgumentError("total_bytes: out of range");
  }
  if (report.done_bytes < 0 || report.done_bytes > kMaxBytes ||
      (report.total_bytes > 0 && report.done_bytes > report.total_bytes)) {
    return absl::InvalidArgumentError("done_bytes: out of range (0 to total_bytes)");
  }
  if (report.elapsed_ms < 0 || report.elapsed_ms > int64_t{1} << 40) {
    return absl::InvalidArgumentError("elapsed_ms: out of range");
  }
  const std::string progress =
      absl::StrCat(report.what, ": ",
                   ProgressMeter::Describe(report.done_bytes, report.total_bytes,
                                           absl::Milliseconds(report.elapsed_ms)));
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(report.worker_name);
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxWorkers) {  // the stalest goes
      auto oldest =
          std::min_element(entries_.begin(), entries_.end(),
                           [](const auto& a, const auto& b) { return a.second.at < b.second.at; });
      entries_.erase(oldest);
    }
    it = entries_.emplace(report.worker_name, Entry{}).first;
  }
  Entry& entry = it->second;
  entry.line = absl::StrCat(report.worker_name, " ", progress);
  entry.at = now;
  if (now - entry.logged < log_every_) return std::nullopt;
  entry.logged = now;
  return absl::StrCat("worker ", report.worker_name, " (", peer, ") ", progress);
}

void LoadingBoard::Connected(const std::string& name) {
  absl::MutexLock lock(&mu_);
  entries_.erase(name);
}

std::vector<std::string> LoadingBoard::Loading(absl::Time now) const {
  std::vector<std::string> lines;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, entry] : entries_) {
    if (now - entry.at <= kFresh) lines.push_back(entry.line);
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

}  // namespace pagoda
