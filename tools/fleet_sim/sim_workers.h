// N simulated workers in one process. Each dials the router's worker port over its own
// connection and speaks the real step protocol (proto/pagoda/v1/worker.proto: Hello, then one
// StepResult per StepCommand, heartbeats while idle) through gRPC's callback API; a step is
// answered after the time StepModel gives it, with random tokens, and nothing is computed.
// One timer thread sends every answer and heartbeat, so N costs N connections, not N threads.
//
// Measured per step (while Record(true)): the gap between a result handed to gRPC and the
// next command arriving on a worker that still had sequences running — what the router and
// the two hops add to a step — and the modelled step time itself.
#ifndef PAGODA_TOOLS_FLEET_SIM_SIM_WORKERS_H_
#define PAGODA_TOOLS_FLEET_SIM_SIM_WORKERS_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/executor.h"
#include "tools/fleet_sim/latency_samples.h"
#include "tools/fleet_sim/step_model.h"

namespace pagoda::fleet {

class SimWorker;

struct SimWorkersOptions {
  std::string router_address;  // the router's worker port
  std::string worker_token;    // "" with --insecure-worker-port
  int num_workers = 8;
  WorkerInfo info;  // what each announces (the fingerprint decides whether it is accepted)
  StepModel model;
  int token_lo = 259;  // sampled ids are uniform in [token_lo, token_hi)
  int token_hi = 512;
};

class SimWorkers {
 public:
  explicit SimWorkers(SimWorkersOptions options);
  ~SimWorkers();  // Stop()s

  void Start();
  // Cancels every call and waits for them to end (their samples merged).
  void Stop();
  // Blocks until every worker was accepted (true) or `timeout` passed or one was refused.
  bool WaitConnected(absl::Duration timeout);
  int num_connected() const { return connected_.load(); }
  int num_refused() const { return refused_.load(); }

  void Record(bool on) { recording_.store(on); }
  bool recording() const { return recording_.load(std::memory_order_relaxed); }
  LatencySamples& added_step_ms() { return added_step_ms_; }
  LatencySamples& step_ms() { return step_ms_; }
  int64_t steps() const { return steps_.load(); }
  int64_t sampled_tokens() const { return sampled_.load(); }

  // For SimWorker.
  const SimWorkersOptions& options() const { return options_; }
  void Schedule(absl::Time when, SimWorker* worker);
  void OnConnected(bool accepted);
  void CountStep(int64_t sampled) {
    steps_.fetch_add(1, std::memory_order_relaxed);
    sampled_.fetch_add(sampled, std::memory_order_relaxed);
  }

 private:
  void TimerLoop();
  // The timer's wait ends: stopping, or an entry due before the one it sleeps for.
  bool WakeEarlier() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || (!due_.empty() && due_.front().when < wake_);
  }

  const SimWorkersOptions options_;
  std::vector<std::unique_ptr<SimWorker>> workers_;
  std::atomic<int> connected_{0};
  std::atomic<int> refused_{0};
  std::atomic<bool> recording_{false};
  std::atomic<int64_t> steps_{0};
  std::atomic<int64_t> sampled_{0};
  LatencySamples added_step_ms_;
  LatencySamples step_ms_;

  struct Due {
    absl::Time when;
    SimWorker* worker;
    bool chain;  // the worker's one recurring entry (heartbeats), else a result's
    bool operator>(const Due& o) const { return when > o.when; }
  };
  absl::Mutex mu_;
  std::vector<Due> due_ ABSL_GUARDED_BY(mu_);  // a min-heap on `when`
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time wake_ ABSL_GUARDED_BY(mu_);
  std::thread timer_;
};

}  // namespace pagoda::fleet

#endif  // PAGODA_TOOLS_FLEET_SIM_SIM_WORKERS_H_
