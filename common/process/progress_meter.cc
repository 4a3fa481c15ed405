#include "common/process/progress_meter.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "glog/logging.h"

namespace pagoda {
namespace {

// Redraws per second on a terminal: enough to look alive, few enough to cost nothing.
constexpr absl::Duration kTerminalEvery = absl::Milliseconds(100);

}  // namespace

ProgressMeter::Mode ProgressMeter::ForStderr() {
  return isatty(STDERR_FILENO) ? Mode::kTerminal : Mode::kLog;
}

ProgressMeter::ProgressMeter(std::string what, int64_t total, Mode mode, FILE* terminal,
                             absl::Duration log_every)
    : what_(std::move(what)),
      total_(std::max<int64_t>(total, 0)),
      mode_(mode),
      terminal_(terminal),
      every_(mode == Mode::kTerminal ? kTerminalEvery : log_every),
      start_(absl::Now()),
      last_shown_(start_) {}

ProgressMeter::~ProgressMeter() { Done(); }

std::string ProgressMeter::Describe(int64_t done, int64_t total, absl::Duration elapsed) {
  const double unit = std::max(done, total) >= (int64_t{1} << 30) ? 1e9 : 1e6;
  const char* name = unit == 1e9 ? "GB" : "MB";
  std::string out = total > 0 ? absl::StrFormat("%.1f / %.1f %s (%d%%)", done / unit, total / unit,
                                                name, static_cast<int>(100 * done / total))
                              : absl::StrFormat("%.1f %s", done / unit, name);
  const double seconds = absl::ToDoubleSeconds(elapsed);
  if (seconds > 0 && done > 0) {
    const double rate = done / seconds;
    absl::StrAppendFormat(&out, ", %.0f MB/s", rate / 1e6);
    if (total > done) absl::StrAppendFormat(&out, ", %.0f s left", (total - done) / rate);
  }
  return out;
}

void ProgressMeter::Add(int64_t bytes) {
  done_ += std::max<int64_t>(bytes, 0);
  const absl::Time now = absl::Now();
  if (now - last_shown_ >= every_) Show(now);
}

void ProgressMeter::Show(absl::Time now) {
  last_shown_ = now;
  const std::string line = absl::StrFormat("%s: %s", what_, Describe(done_, total_, now - start_));
  if (mode_ == Mode::kTerminal) {
    // \r and erase-to-end: the line is redrawn in place, a shorter one leaves nothing behind.
    std::fprintf(terminal_, "\r%s\x1b[K", line.c_str());
    std::fflush(terminal_);
  } else if (mode_ == Mode::kLog) {
    LOG(INFO) << line;
  }
}

void ProgressMeter::Done() {
  if (finished_) return;
  finished_ = true;
  const absl::Duration elapsed = absl::Now() - start_;
  // Done is the whole job, whatever the estimate of its size was.
  const int64_t done = std::max(done_, total_);
  const std::string line =
      absl::StrFormat("%s: %s in %.1f s", what_, Describe(done, done, absl::ZeroDuration()),
                      absl::ToDoubleSeconds(elapsed));
  if (mode_ == Mode::kTerminal) {
    std::fprintf(terminal_, "\r%s\x1b[K\n", line.c_str());
    std::fflush(terminal_);
  } else if (mode_ == Mode::kLog && elapsed >= every_) {
    // A load shorter than one interval logged nothing before: its caller's own line says enough.
    LOG(INFO) << line;
  }
}

}  // namespace pagoda
