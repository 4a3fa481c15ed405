// What the Cluster's lock costs the worker loops (issue 37): 8 in-process fake workers that
// answer every step at once (no model), so the loops step as fast as the router side allows,
// while this thread keeps `in_flight` requests submitted (each placed by the prefix-aware
// policy). Every loop reports each step to the Cluster under its lock; reported:
//   wait_us_per_step   the loops' time waiting for that lock, over the steps they ran
//   waited_reports     the share of reports that found the lock taken
//   steps/s, tokens/s  the loops' steps and the tokens delivered, per wall second
//   tokens_per_step    how full the steps were (fewer requests in flight: smaller steps)
//   submit_us          this thread's time in Submit per request (it waits for the locks too)
// Items = requests completed (64 prompt tokens, 32 of them shared by all, 32 output tokens).
// 2 cores here: 8 loops and the submitter share them, as a router's threads do on a small host.
#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "common/executor.h"
#include "common/step.h"
#include "glog/logging.h"
#include "router/core/cluster.h"

namespace pagoda {
namespace {

constexpr int kNumWorkers = 8;
constexpr int kPromptTokens = 64;
constexpr int kSharedTokens = 32;
constexpr int kOutputTokens = 32;
constexpr int kRequestsPerIteration = 512;

ModelConfig FakeConfig() {
  ModelConfig c;
  c.name = "fake";
  c.dim = 64;
  c.hidden_dim = 128;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  c.vocab_size = 512;
  c.max_seq_len = 4096;
  c.eos_ids = {2};
  return c;
}

// Answers every step at once: one token per sequence that samples (never EOS).
class InstantExecutor final : public Executor {
 public:
  explicit InstantExecutor(const ModelConfig& config) {
    info_.model_fingerprint = config.Fingerprint();
    info_.num_blocks = 8192;
    info_.block_size = 16;
    info_.max_num_batched_tokens = 2048;
    info_.max_num_seqs = 256;
    info_.kv_cache_dtype = "bf16";
  }
  const WorkerInfo& info() const override { return info_; }
  absl::StatusOr<StepResult> Execute(const StepCommand& command) override {
    StepResult result;
    result.step_id = command.step_id;
    result.forward_seconds = 1e-6;  // counted as a step that ran tokens
    for (const ScheduledSequence& s : command.scheduled) {
      if (s.sample)
        result.sampled.push_back(
            {.seq_id = s.seq_id, .token_id = 100, .logprob = -1, .top_logprobs = {}});
    }
    return result;
  }

 private:
  WorkerInfo info_;
};

// Requests in flight, decremented by their sinks on the loops' threads.
class InFlight {
 public:
  void Add() {
    absl::MutexLock lock(&mu_);
    ++n_;
  }
  void Done() {
    absl::MutexLock lock(&mu_);
    --n_;
  }
  // Waits until fewer than `max` are in flight.
  void WaitBelow(int max) {
    absl::MutexLock lock(&mu_);
    auto below = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return n_ < max; };
    mu_.Await(absl::Condition(&below));
  }
  void WaitIdle() { WaitBelow(1); }

 private:
  absl::Mutex mu_;
  int n_ ABSL_GUARDED_BY(mu_) = 0;
};

void BM_LoopsReportToCluster(benchmark::State& state) {
  const int in_flight = static_cast<int>(state.range(0));
  const ModelConfig config = FakeConfig();
  ClusterOptions options;
  options.max_waiting = 1 << 20;
  Cluster cluster(config, options);
  for (int i = 0; i < kNumWorkers; ++i) {
    CHECK(cluster.AddWorker(std::make_shared<InstantExecutor>(config)).ok());
  }
  InFlight flight;
  uint32_t next_prompt = 0;
  double submit_seconds = 0;  // this thread's time in Submit (placement, and waits for the locks)
  auto submit = [&] {
    GenerationRequest r;
    r.prompt_ids.resize(kPromptTokens);
    for (int i = 0; i < kPromptTokens; ++i) {
      // A shared system prompt, then this request's own tokens (a different prefix each).
      r.prompt_ids[i] =
          i < kSharedTokens ? 10 + i : 3 + static_cast<int>((next_prompt * 131 + i * 7) % 500);
    }
    ++next_prompt;
    r.max_tokens = kOutputTokens;
    r.ignore_eos = true;
    flight.Add();
    auto sink = [&flight](const RequestUpdate& u) {
      if (u.finished) flight.Done();
      return true;
    };
    const auto start = std::chrono::steady_clock::now();
    CHECK(cluster.Submit(r, sink).ok());
    submit_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };

  const ClusterStats before = cluster.stats();
  int64_t tokens = 0;
  for (auto _ : state) {
    int64_t submitted = 0;
    while (submitted < kRequestsPerIteration) {
      flight.WaitBelow(in_flight);
      submit();
      ++submitted;
    }
    flight.WaitIdle();
    tokens += int64_t{kRequestsPerIteration} * kOutputTokens;
  }
  const ClusterStats after = cluster.stats();
  const double steps = static_cast<double>(after.num_steps - before.num_steps);
  const double reports = static_cast<double>(after.num_loop_reports - before.num_loop_reports);
  state.counters["wait_us_per_step"] =
      steps > 0 ? (after.loop_lock_wait_seconds - before.loop_lock_wait_seconds) * 1e6 / steps : 0;
  state.counters["waited_reports"] =
      reports > 0
          ? static_cast<double>(after.num_loop_lock_waits - before.num_loop_lock_waits) / reports
          : 0;
  state.counters["steps/s"] = benchmark::Counter(steps, benchmark::Counter::kIsRate);
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["tokens_per_step"] = steps > 0 ? static_cast<double>(tokens) / steps : 0;
  state.counters["submit_us"] =
      submit_seconds * 1e6 / static_cast<double>(state.iterations() * kRequestsPerIteration);
  state.SetItemsProcessed(state.iterations() * kRequestsPerIteration);
}
BENCHMARK(BM_LoopsReportToCluster)
    ->ArgName("in_flight")
    ->Arg(64)
    ->Arg(256)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagoda

BENCHMARK_MAIN();
