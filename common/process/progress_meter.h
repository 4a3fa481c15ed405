// Progress of a long job measured in bytes (loading weights): on a terminal, one line redrawn
// in place ("loading weights: 1.2 / 2.2 GB (54%), 850 MB/s, 1 s left"); elsewhere (a log file,
// a pipe, a container's log) one log line every few seconds. Both end with a line saying what
// was done and how fast.
#ifndef PAGODA_COMMON_PROCESS_PROGRESS_METER_H_
#define PAGODA_COMMON_PROCESS_PROGRESS_METER_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/time/time.h"

namespace pagoda {

class ProgressMeter {
 public:
  enum class Mode { kTerminal, kLog, kQuiet };
  // The mode for a process writing to stderr: a terminal when stderr is one, else the log.
  static Mode ForStderr();

  // `total` bytes are expected (0: unknown; then no percent and no estimate). In kTerminal the
  // line goes to `terminal` (stderr by default).
  ProgressMeter(std::string what, int64_t total, Mode mode, FILE* terminal = stderr,
                absl::Duration log_every = absl::Seconds(5));
  ~ProgressMeter();  // Done() if it was not called

  void Add(int64_t bytes);
  int64_t done() const { return done_; }
  // The job is done: ends the line (terminal) or logs the last one (a log, when the job took
  // one interval or more).
  void Done();

  // "1.2 / 2.2 GB (54%), 850 MB/s, 1 s left" after `elapsed` with `done` bytes.
  static std::string Describe(int64_t done, int64_t total, absl::Duration elapsed);

 private:
  void Show(absl::Time now);

  const std::string what_;
  const int64_t total_;
  const Mode mode_;
  FILE* const terminal_;
  const absl::Duration every_;
  const absl::Time start_;
  absl::Time last_shown_;  // the first line comes one interval after the start
  int64_t done_ = 0;
  bool finished_ = false;
};

}  // namespace pagoda

#endif  // PAGODA_COMMON_PROCESS_PROGRESS_METER_H_
