// The multi-worker router core with in-process workers: placement, failover, parking.
#include "router/core/cluster.h"

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/model/llama2c_checkpoint.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/router/core/test_workers.h"
#include "tests/test_util.h"
#include "worker/in_process_executor.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Collects one request's updates; Wait() blocks until every sequence finished.
class Collector {
 public:
  explicit Collector(int n) : outputs_(n), finished_(n, false), workers_(n) {}
  RequestSink Sink() {
    return [this](const RequestUpdate& u) {
      absl::MutexLock lock(&mu_);
      auto& out = outputs_[u.seq_index];
      out.insert(out.end(), u.token_ids.begin(), u.token_ids.end());
      if (!u.token_ids.empty()) workers_[u.seq_index].push_back(u.worker_id);
      if (u.finished) finished_[u.seq_index] = true;
      cached_ = u.num_cached_tokens;
      return true;
    };
  }
  bool Wait(absl::Duration timeout = absl::Seconds(120)) {
    absl::MutexLock lock(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::all_of(finished_.begin(), finished_.end(), [](bool f) { return f; });
    };
    return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  }
  std::vector<int> output(int i = 0) {
    absl::MutexLock lock(&mu_);
    return outputs_[i];
  }
  std::vector<int> workers(int i = 0) {
    absl::MutexLock lock(&mu_);
    return workers_[i];
  }
  size_t num_tokens(int i = 0) {
    absl::MutexLock lock(&mu_);
    return outputs_[i].size();
  }
  int cached() {
    absl::MutexLock lock(&mu_);
    return cached_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::vector<int>> outputs_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> finished_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<int>> workers_ ABSL_GUARDED_BY(mu_);
  int cached_ ABSL_GUARDED_BY(mu_) = 0;
};

constexpr std::chrono::milliseconds kTimeout = std::chrono::seconds(60);

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = testing::LoadGoldenCases();
    config_ = testing::Stories260KConfig();
    ClusterOptions o;
    o.engine.max_model_len = 257;
    cluster_ = std::make_unique<Cluster>(config_, o);
  }

  int AddWorker(int num_blocks = 256) {
    auto id = cluster_->AddWorker(testing::NewWorker(num_blocks));
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or(-1);
  }

  GenerationRequest Greedy(const std::vector<int>& prompt) {
    GenerationRequest r;
    r.prompt_ids = prompt;
    r.sampling.temperature = 0;
    return r;
  }

  std::vector<testing::GoldenCase> golden_;
  ModelConfig config_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(ClusterTest, ThirtyTwoConcurrentRequestsOverTwoWorkersMatchRunC) {
  AddWorker();
  AddWorker();
  std::vector<std::unique_ptr<Collector>> collectors;
  for (int i = 0; i < 32; ++i) {
    collectors.push_back(std::make_unique<Collector>(1));
    const auto& c = golden_[i % golden_.size()];
    ASSERT_TRUE(cluster_->Submit(Greedy(c.prompt_ids), collectors.back()->Sink()).ok());
  }
  std::set<int> used;
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(collectors[i]->Wait());
    EXPECT_EQ(collectors[i]->output(), golden_[i % golden_.size()].greedy_ids) << i;
    used.insert(collectors[i]->workers()[0]);
  }
  EXPECT_EQ(used.size(), 2u) << "both workers should take load";
}

// Issue 38: a sink (the whole output path: detokenizing, the transport's write) runs outside
// the Cluster's lock, so one slow to return holds up nothing but its own worker: another
// request is admitted, placed and served to its end on the other worker meanwhile.
TEST_F(ClusterTest, ASlowSinkHoldsUpNoOtherWorker) {
  AddWorker();
  AddWorker();
  absl::Notification entered, release, finished;
  std::atomic<int> slow_worker{-1};  // written on the loop's thread
  auto slow = [&](const RequestUpdate& u) {
    if (!entered.HasBeenNotified()) {
      slow_worker = u.worker_id;
      entered.Notify();
      release.WaitForNotification();
    }
    if (u.finished) finished.Notify();
    return true;
  };
  const auto& a = golden_[0];
  ASSERT_TRUE(cluster_->Submit(Greedy(a.prompt_ids), slow).ok());
  entered.WaitForNotification();
  Collector other(1);
  const auto& b = golden_[1];
  ASSERT_TRUE(cluster_->Submit(Greedy(b.prompt_ids), other.Sink()).ok());
  const bool served = other.Wait(absl::Seconds(30));
  release.Notify();
  finished.WaitForNotification();  // the sink's captures outlive its last call
  ASSERT_TRUE(served) << "the other worker's report waited for the slow sink";
  EXPECT_EQ(other.output(), b.greedy_ids);
  EXPECT_NE(other.workers()[0], slow_worker.load());
}

TEST_F(ClusterTest, ARequestSharingAPrefixGoesWhereThePrefixIs) {
  AddWorker();
  AddWorker();
  const auto& c = golden_[5];  // 19 tokens: one full block
  Collector first(1);
  ASSERT_TRUE(cluster_->Submit(Greedy(c.prompt_ids), first.Sink()).ok());
  ASSERT_TRUE(first.Wait());
  // Load the other worker less than this one would look without the prefix term.
  Collector second(1);
  ASSERT_TRUE(cluster_->Submit(Greedy(c.prompt_ids), second.Sink()).ok());
  ASSERT_TRUE(second.Wait());
  EXPECT_EQ(second.workers()[0], first.workers()[0]);
  EXPECT_GT(second.cached(), 0);
  EXPECT_EQ(second.output(), c.greedy_ids);
}

// Issue 38: a cache_salt keys the prefix cache, so two tenants never share a block.
TEST_F(ClusterTest, TwoCacheSaltsNeverShareABlock) {
  AddWorker();
  const auto& c = golden_[5];  // 19 tokens: one full block
  auto run = [&](const std::string& salt) {
    GenerationRequest r = Greedy(c.prompt_ids);
    r.cache_salt = salt;
    Collector out(1);
    EXPECT_TRUE(cluster_->Submit(r, out.Sink()).ok());
    EXPECT_TRUE(out.Wait());
    EXPECT_EQ(out.output(), c.greedy_ids) << salt;
    return out.cached();
  };
  EXPECT_EQ(run("tenant-a"), 0);
  EXPECT_EQ(run("tenant-b"), 0) << "another salt must not hit tenant-a's blocks";
  EXPECT_EQ(run(""), 0) << "nor may an unsalted request";
  EXPECT_GT(run("tenant-a"), 0) << "the same salt shares them";
  EXPECT_GT(run(""), 0);
  GenerationRequest too_long = Greedy(c.prompt_ids);
  too_long.cache_salt.assign(kMaxCacheSaltBytes + 1, 'x');
  EXPECT_THAT(cluster_->Validate(too_long).message(), HasSubstr("cache_salt"));
}

// Issue 39: K/V computed under a LoRA adapter are its own; the adapter keys the prefix cache as
// a salt does, and no salt reaches an adapter's blocks. (The fake workers run no adapter: the
// tokens are the base's; what is checked is which blocks are shared.)
TEST_F(ClusterTest, TwoAdaptersOrAnAdapterAndTheBaseNeverShareABlock) {
  ASSERT_TRUE(cluster_->AddWorker(testing::NewWorkerWithAdapters({"sql-lora", "chat-lora"})).ok());
  const auto& c = golden_[5];  // 19 tokens: one full block
  auto run = [&](const std::string& adapter, const std::string& salt = "") {
    GenerationRequest r = Greedy(c.prompt_ids);
    r.adapter = adapter;
    r.cache_salt = salt;
    r.max_tokens = 16;
    Collector out(1);
    EXPECT_TRUE(cluster_->Submit(r, out.Sink()).ok());
    EXPECT_TRUE(out.Wait());
    return out.cached();
  };
  EXPECT_EQ(run("sql-lora"), 0);
  EXPECT_EQ(run("chat-lora"), 0) << "another adapter must not hit sql-lora's blocks";
  EXPECT_EQ(run(""), 0) << "nor may the base model";
  EXPECT_EQ(run("", "sql-lora"), 0) << "nor a salt spelled as the adapter";
  EXPECT_GT(run("sql-lora"), 0) << "the same adapter shares them";
  EXPECT_EQ(run("sql-lora", "tenant"), 0) << "a salt splits an adapter's too";
  GenerationRequest too_long = Greedy(c.prompt_ids);
  too_long.adapter.assign(kMaxAdapterNameBytes + 1, 'x');
  EXPECT_THAT(cluster_->Validate(too_long).message(), HasSubstr("adapter"));
}

// A request naming a LoRA adapter runs only on a worker holding it (another would refuse the
// step and be dropped), and its tokens are the adapter's, not the base model's.
TEST_F(ClusterTest, ARequestForAnAdapterRunsOnlyOnAWorkerHoldingIt) {
  AddWorker();
  AddWorker();
  const absl::StatusOr<int> holder =
      cluster_->AddWorker(testing::NewWorkerWithAdapters({"sql-lora"}));
  ASSERT_TRUE(holder.ok()) << holder.status();
  auto run_all = [&](const std::string& adapter) {
    std::vector<std::unique_ptr<Collector>> outs;
    for (int i = 0; i < 6; ++i) {
      GenerationRequest r = Greedy(golden_[i % 3].prompt_ids);
      r.adapter = adapter;
      r.max_tokens = 24;
      outs.push_back(std::make_unique<Collector>(1));
      EXPECT_TRUE(cluster_->Submit(r, outs.back()->Sink()).ok());
    }
    std::vector<std::vector<int>> tokens;
    for (auto& out : outs) {
      EXPECT_TRUE(out->Wait());
      tokens.push_back(out->output());
      if (!adapter.empty()) {
        EXPECT_THAT(out->workers(), ::testing::Each(*holder)) << "only the holder runs it";
      }
    }
    return tokens;
  };
  const std::vector<std::vector<int>> base = run_all("");
  const std::vector<std::vector<int>> adapted = run_all("sql-lora");
  EXPECT_EQ(cluster_->stats().num_workers, 3) << "no worker refused a step";
  EXPECT_NE(adapted, base) << "the adapter changes the tokens";
  EXPECT_EQ(run_all("sql-lora"), adapted);
  EXPECT_TRUE(cluster_->loras().Known("sql-lora"));
  EXPECT_EQ(cluster_->loras().NumHolding("sql-lora"), 1);
}

// A worker runs at most --max-loras distinct adapters in a step and refuses a step over it:
// the scheduler keeps the second adapter's requests waiting until the first's end.
TEST_F(ClusterTest, SequencesOfMoreAdaptersThanMaxLorasTakeTurns) {
  ASSERT_TRUE(
      cluster_->AddWorker(testing::NewWorkerWithAdapters({"a", "b"}, /*max_loras=*/1)).ok());
  auto request = [&](const std::string& adapter) {
    GenerationRequest r = Greedy(golden_[0].prompt_ids);
    r.adapter = adapter;
    r.max_tokens = 32;
    r.ignore_eos = true;
    return r;
  };
  Collector alone_a(1), alone_b(1);
  ASSERT_TRUE(cluster_->Submit(request("a"), alone_a.Sink()).ok());
  ASSERT_TRUE(alone_a.Wait());
  ASSERT_TRUE(cluster_->Submit(request("b"), alone_b.Sink()).ok());
  ASSERT_TRUE(alone_b.Wait());
  Collector a(1), b(1), base(1);
  ASSERT_TRUE(cluster_->Submit(request("a"), a.Sink()).ok());
  ASSERT_TRUE(cluster_->Submit(request("b"), b.Sink()).ok());
  ASSERT_TRUE(cluster_->Submit(request(""), base.Sink()).ok());
  ASSERT_TRUE(a.Wait() && b.Wait() && base.Wait());
  EXPECT_EQ(a.output(), alone_a.output());
  EXPECT_EQ(b.output(), alone_b.output());
  EXPECT_NE(a.output(), b.output());
  EXPECT_EQ(cluster_->stats().num_workers, 1) << "the worker refused no step";
}

// What vllm:lora_requests_info reads: the adapters a worker's running and waiting sequences
// name, after each step.
TEST_F(ClusterTest, WorkerStatsNameTheAdaptersRunningAndWaiting) {
  auto gate = std::make_shared<testing::GatedExecutor>(
      testing::NewWorkerWithAdapters({"a", "b"}, /*max_loras=*/1));
  absl::Cleanup open_gate = [gate] { gate->Allow(1 << 20); };  // even when a check fails
  ASSERT_TRUE(cluster_->AddWorker(gate).ok());
  auto request = [&](const std::string& adapter) {
    GenerationRequest r = Greedy(golden_[0].prompt_ids);
    r.adapter = adapter;
    r.max_tokens = 8;
    return r;
  };
  Collector a(1), b(1);
  ASSERT_TRUE(cluster_->Submit(request("a"), a.Sink()).ok());
  gate->WaitEntered(1);  // a runs its first step
  ASSERT_TRUE(cluster_->Submit(request("b"), b.Sink()).ok());
  gate->Allow(2);
  gate->WaitEntered(3);  // the second step took b in, and left it waiting: --max-loras=1
  std::vector<WorkerStats> stats = cluster_->worker_stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].max_loras, 1);
  EXPECT_THAT(stats[0].running_adapters, ElementsAre("a"));
  EXPECT_THAT(stats[0].waiting_adapters, ElementsAre("b"));
  gate->Allow(1 << 20);
  ASSERT_TRUE(a.Wait() && b.Wait());
}

// An adapter loaded at run time reaches every live worker, and workers that join later.
TEST_F(ClusterTest, AnAdapterLoadedAtRunTimeIsOnEveryWorkerAndOnThoseThatJoinLater) {
  ASSERT_TRUE(cluster_->AddWorker(testing::NewWorkerWithAdapters({})).ok());
  ASSERT_TRUE(cluster_->AddWorker(testing::NewWorkerWithAdapters({})).ok());
  auto change = [&](const AdapterChange& c) {
    absl::Notification done;
    absl::Status result;
    cluster_->ChangeAdapter(c, [&](absl::Status s) {
      result = std::move(s);
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
    return result;
  };
  ASSERT_TRUE(change({.name = "x", .path = testing::AdapterPath("x")}).ok());
  EXPECT_EQ(cluster_->loras().NumHolding("x"), 2);
  EXPECT_EQ(change({.name = "x", .path = testing::AdapterPath("x")}).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(change({.name = "y", .path = "/etc"}).code(), absl::StatusCode::kInvalidArgument)
      << "outside the workers' --lora-dir";
  EXPECT_FALSE(cluster_->loras().Known("y"));
  ASSERT_TRUE(cluster_->AddWorker(testing::NewWorkerWithAdapters({})).ok());
  EXPECT_TRUE(testing::WaitUntil([&] { return cluster_->loras().NumHolding("x") == 3; }, kTimeout,
                                 "the late worker loads x"));
  ASSERT_TRUE(change({.name = "x", .path = ""}).ok());
  EXPECT_FALSE(cluster_->loras().Known("x"));
  EXPECT_EQ(change({.name = "x", .path = ""}).code(), absl::StatusCode::kNotFound);
}

// An adapter with requests in flight is not unloaded: a sequence of it that reached its worker
// after the unload would have the worker refuse its whole step.
TEST_F(ClusterTest, AnAdapterInUseIsNotUnloaded) {
  auto gate = std::make_shared<testing::GatedExecutor>(testing::NewWorkerWithAdapters({"x"}));
  absl::Cleanup open_gate = [gate] { gate->Allow(1 << 20); };  // even when a check fails
  ASSERT_TRUE(cluster_->AddWorker(gate).ok());
  GenerationRequest r = Greedy(golden_[0].prompt_ids);
  r.adapter = "x";
  r.max_tokens = 4;
  Collector out(1);
  ASSERT_TRUE(cluster_->Submit(r, out.Sink()).ok());
  gate->WaitEntered(1);
  absl::Notification refused;
  cluster_->ChangeAdapter({.name = "x", .path = ""}, [&](absl::Status s) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(), HasSubstr("1 requests in flight"));
    refused.Notify();
  });
  ASSERT_TRUE(refused.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_TRUE(cluster_->loras().Known("x"));
  gate->Allow(1 << 20);
  ASSERT_TRUE(out.Wait());
  EXPECT_EQ(cluster_->stats().num_workers, 1);
  absl::Notification unloaded;
  cluster_->ChangeAdapter({.name = "x", .path = ""}, [&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    unloaded.Notify();
  });
  ASSERT_TRUE(unloaded.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_FALSE(cluster_->loras().Known("x"));
}

TEST_F(ClusterTest, ADeadWorkersSequencesFinishElsewhereWithTheSameTokens) {
  const int a = AddWorker();
  GenerationRequest sampled = Greedy(golden_[0].prompt_ids);
  sampled.sampling.temperature = 0.8f;
  sampled.sampling.seed = 99;
  sampled.n = 2;
  sampled.ignore_eos = true;
  // Reference: the same requests on a healthy worker.
  Collector ref_greedy(1), ref_sampled(2);
  ASSERT_TRUE(cluster_->Submit(Greedy(golden_[0].prompt_ids), ref_greedy.Sink()).ok());
  ASSERT_TRUE(cluster_->Submit(sampled, ref_sampled.Sink()).ok());
  ASSERT_TRUE(ref_greedy.Wait() && ref_sampled.Wait());

  Collector greedy(1), sampled_out(2);
  ASSERT_TRUE(cluster_->Submit(Greedy(golden_[0].prompt_ids), greedy.Sink()).ok());
  ASSERT_TRUE(cluster_->Submit(sampled, sampled_out.Sink()).ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return greedy.num_tokens() >= 40; }, kTimeout, "40 tokens"));
  cluster_->RemoveWorker(a);  // no worker left: the sequences park
  EXPECT_EQ(cluster_->stats().num_workers, 0);
  const int b = AddWorker();  // a late joiner takes the load
  ASSERT_TRUE(greedy.Wait() && sampled_out.Wait());
  EXPECT_EQ(greedy.output(), golden_[0].greedy_ids);
  EXPECT_EQ(sampled_out.output(0), ref_sampled.output(0));
  EXPECT_EQ(sampled_out.output(1), ref_sampled.output(1));
  EXPECT_EQ(greedy.workers().back(), b);
  // The step counters that the periodic log takes differences of never go back when a worker
  // leaves (the log printed negative step times after a death).
  const ClusterStats before = cluster_->stats();
  cluster_->RemoveWorker(b);
  const ClusterStats after = cluster_->stats();
  EXPECT_GE(after.num_steps, before.num_steps);
  EXPECT_GE(after.step_seconds, before.step_seconds);
  EXPECT_GE(after.forward_seconds, before.forward_seconds);
}

// Requests the worker loop has taken from its inbox into the scheduler, while that step runs,
// still count as waiting: --max-waiting is never exceeded (it let 112 wait with 64).
TEST_F(ClusterTest, MaxWaitingCountsRequestsOnTheirWayIntoTheScheduler) {
  ClusterOptions o;
  o.engine.max_model_len = 257;
  o.engine.max_num_seqs = 1;  // one runs, the others wait in the scheduler
  o.max_waiting = 2;
  Cluster cluster(config_, o);
  auto gate = std::make_shared<testing::GatedExecutor>(testing::NewWorker());
  absl::Cleanup open_gate = [gate] { gate->Allow(1 << 20); };  // even when a check fails
  ASSERT_TRUE(cluster.AddWorker(gate).ok());
  Collector a(1), b(1), c(1), d(1);
  ASSERT_TRUE(cluster.Submit(Greedy(golden_[0].prompt_ids), a.Sink()).ok());
  gate->WaitEntered(1);  // A runs its first step: it is running, not waiting
  ASSERT_TRUE(cluster.Submit(Greedy(golden_[1].prompt_ids), b.Sink()).ok());
  ASSERT_TRUE(cluster.Submit(Greedy(golden_[2].prompt_ids), c.Sink()).ok());
  EXPECT_EQ(cluster.Submit(Greedy(golden_[3].prompt_ids), d.Sink()).status().code(),
            absl::StatusCode::kResourceExhausted);  // B and C wait in the inbox
  gate->Allow(1);
  gate->WaitEntered(2);  // B and C went from the inbox into the scheduler: 2 waiting
  EXPECT_EQ(cluster.Submit(Greedy(golden_[3].prompt_ids), d.Sink()).status().code(),
            absl::StatusCode::kResourceExhausted);
  std::move(open_gate).Invoke();
  EXPECT_TRUE(a.Wait() && b.Wait() && c.Wait());
  EXPECT_EQ(a.output(), golden_[0].greedy_ids);
}

TEST_F(ClusterTest, ADrainingWorkerFinishesWhatItHoldsAndGetsNothingNew) {
  const int a = AddWorker();
  GenerationRequest long_one = Greedy(golden_[0].prompt_ids);
  long_one.ignore_eos = true;
  Collector reference(1);
  ASSERT_TRUE(cluster_->Submit(long_one, reference.Sink()).ok());
  ASSERT_TRUE(reference.Wait());

  Collector in_flight(1);
  ASSERT_TRUE(cluster_->Submit(long_one, in_flight.Sink()).ok());
  ASSERT_TRUE(
      testing::WaitUntil([&] { return in_flight.num_tokens() >= 10; }, kTimeout, "10 tokens"));
  const int b = AddWorker();
  absl::Notification drained;
  cluster_->DrainWorker(a, [&] { drained.Notify(); });
  EXPECT_EQ(cluster_->stats().num_draining_workers, 1);
  std::vector<std::unique_ptr<Collector>> later;
  for (int i = 0; i < 6; ++i) {
    later.push_back(std::make_unique<Collector>(1));
    ASSERT_TRUE(cluster_->Submit(Greedy(golden_[i].prompt_ids), later.back()->Sink()).ok());
  }
  ASSERT_TRUE(in_flight.Wait());
  EXPECT_EQ(in_flight.output(), reference.output());
  EXPECT_THAT(in_flight.workers(), ::testing::Each(a)) << "it finishes where it started";
  ASSERT_TRUE(drained.WaitForNotificationWithTimeout(absl::Seconds(30)));
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(later[i]->Wait());
    EXPECT_EQ(later[i]->output(), golden_[i].greedy_ids);
    EXPECT_THAT(later[i]->workers(), ::testing::Each(b)) << "nothing new on a draining worker";
  }
}

TEST_F(ClusterTest, WhileTheOnlyWorkerDrainsNewRequestsWaitForTheNextOne) {
  const int a = AddWorker();
  absl::Notification drained;
  cluster_->DrainWorker(a, [&] { drained.Notify(); });
  ASSERT_TRUE(drained.WaitForNotificationWithTimeout(absl::Seconds(30)));  // it held nothing
  Collector waiting(1);
  ASSERT_TRUE(cluster_->Submit(Greedy(golden_[1].prompt_ids), waiting.Sink()).ok());
  EXPECT_EQ(cluster_->stats().num_waiting, 1);
  const int b = AddWorker();
  ASSERT_TRUE(waiting.Wait());
  EXPECT_EQ(waiting.output(), golden_[1].greedy_ids);
  EXPECT_THAT(waiting.workers(), ::testing::Each(b));
}

TEST_F(ClusterTest, RequestsWaitForAWorkerAndAbortFreesBlocks) {
  Collector parked(1);
  ASSERT_TRUE(cluster_->Submit(Greedy(golden_[1].prompt_ids), parked.Sink()).ok());
  EXPECT_EQ(cluster_->stats().num_waiting, 1);
  AddWorker();
  ASSERT_TRUE(parked.Wait());
  EXPECT_EQ(parked.output(), golden_[1].greedy_ids);

  Collector dropped(1);
  GenerationRequest long_one = Greedy(golden_[0].prompt_ids);
  long_one.ignore_eos = true;
  auto id = cluster_->Submit(long_one, dropped.Sink());
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(
      testing::WaitUntil([&] { return dropped.num_tokens() >= 10; }, kTimeout, "10 tokens"));
  cluster_->Abort(*id);
  EXPECT_TRUE(testing::WaitUntil([&] { return cluster_->stats().num_used_blocks == 0; }, kTimeout,
                                 "every block is free"));
  EXPECT_EQ(cluster_->stats().num_running, 0);
}

TEST_F(ClusterTest, WithNoWorkerARequestGivesUpAtItsDeadlineWithUnavailable) {
  absl::Status error;
  auto id = cluster_->Submit(
      Greedy(golden_[0].prompt_ids),
      [&](const RequestUpdate& u) {
        error = u.error;
        return true;
      },
      absl::Now() + absl::Milliseconds(50));
  ASSERT_TRUE(id.ok());
  cluster_->Tick(absl::Now());
  EXPECT_TRUE(error.ok()) << "not yet: the deadline has not passed";
  cluster_->Tick(absl::Now() + absl::Seconds(1));
  EXPECT_EQ(error.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(cluster_->stats().num_waiting, 0);
}

// A client that reads nothing (its request paused) past the stall timeout is cancelled with
// DEADLINE_EXCEEDED, and its blocks come back; one that reads in between starts over.
TEST_F(ClusterTest, ARequestPausedPastTheStallTimeoutEndsWithDeadlineExceeded) {
  ClusterOptions o;
  o.engine.max_model_len = 257;
  o.stall_timeout = absl::Seconds(10);
  Cluster cluster(config_, o);
  ASSERT_TRUE(cluster.AddWorker(testing::NewWorker(256)).ok());
  auto paused = std::make_shared<std::atomic<bool>>(true);
  GenerationRequest r = Greedy(golden_[0].prompt_ids);
  r.paused = paused;
  absl::Mutex mu;
  absl::Status error;
  auto id = cluster.Submit(r, [&](const RequestUpdate& u) {
    absl::MutexLock lock(&mu);
    if (!u.error.ok()) error = u.error;
    return true;
  });
  ASSERT_TRUE(id.ok());
  const absl::Time t0 = absl::Now();
  cluster.Tick(t0);                     // seen paused
  paused->store(false);                 // reads once ...
  cluster.Tick(t0 + absl::Seconds(5));  // ... so the clock starts again
  paused->store(true);
  cluster.Tick(t0 + absl::Seconds(6));
  cluster.Tick(t0 + absl::Seconds(15));  // 9 s paused: not yet
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(error.ok()) << error;
  }
  cluster.Tick(t0 + absl::Seconds(16));
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(error.code(), absl::StatusCode::kDeadlineExceeded) << error;
    EXPECT_THAT(error.message(), HasSubstr("read nothing"));
  }
  testing::WaitUntil([&] { return cluster.stats().num_used_blocks == 0; }, kTimeout,
                     "the stalled request's blocks are freed");
}

// Workers with the token still cannot make the router hold more block state than its budget.
TEST_F(ClusterTest, WorkersPastTheRoutersBlockBudgetAreRefused) {
  ClusterOptions o;
  o.engine.max_model_len = 257;
  o.worker_limits.max_total_blocks = 300;
  Cluster cluster(config_, o);
  ASSERT_TRUE(cluster.AddWorker(testing::NewWorker(256)).ok());
  const absl::StatusOr<int> second = cluster.AddWorker(testing::NewWorker(64));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(second.status().message(), HasSubstr("budget"));
  EXPECT_TRUE(cluster.AddWorker(testing::NewWorker(44)).ok()) << "within the budget";
}

TEST_F(ClusterTest, AFullWaitingQueueFailsFastWithResourceExhausted) {
  ClusterOptions o;
  o.engine.max_model_len = 257;
  o.max_waiting = 2;
  Cluster small(config_, o);  // no worker: everything waits
  Collector a(1), b(1), c(1);
  ASSERT_TRUE(small.Submit(Greedy(golden_[0].prompt_ids), a.Sink()).ok());
  ASSERT_TRUE(small.Submit(Greedy(golden_[1].prompt_ids), b.Sink()).ok());
  const absl::Status full = small.Submit(Greedy(golden_[2].prompt_ids), c.Sink()).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(ClusterTest, AWorkerWithAnotherModelIsRefused) {
  ModelConfig other = config_;
  other.num_layers = 3;
  auto w = LoadLlama2cCheckpoint(testing::Stories260KModel());
  w->config.num_layers = 3;
  w->layers.resize(3);
  WorkerOptions wo;
  wo.num_blocks = 16;
  auto engine = WorkerEngine::Create(*std::move(w), wo);
  ASSERT_TRUE(engine.ok());
  auto id = cluster_->AddWorker(std::make_shared<InProcessExecutor>(*std::move(engine)));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(id.status().message(), HasSubstr("different model"));
}

TEST_F(ClusterTest, BadRequestsAreRejectedNamingTheField) {
  GenerationRequest r = Greedy({});
  EXPECT_THAT(cluster_->Validate(r).message(), HasSubstr("prompt"));
  r.prompt_ids = {1, 5000};
  EXPECT_THAT(cluster_->Validate(r).message(), HasSubstr("5000"));
  r.prompt_ids = {1, 2};
  r.max_tokens = 300;
  EXPECT_THAT(cluster_->Validate(r).message(), HasSubstr("max_tokens"));
  r.max_tokens = 4;
  r.n = 17;
  EXPECT_THAT(cluster_->Validate(r).message(), HasSubstr("n = 17"));
}

// Submit requires Validate; a caller that skipped it still gets a status for what would size
// the router's state or never end, not a crash.
TEST_F(ClusterTest, SubmitWithoutValidateStillRefusesWhatWouldBreakTheRouter) {
  AddWorker();
  auto submit = [&](const GenerationRequest& r) {
    return cluster_->Submit(r, [](const RequestUpdate&) { return true; }).status();
  };
  GenerationRequest r = Greedy({});
  EXPECT_EQ(submit(r).code(), absl::StatusCode::kInvalidArgument);
  r.prompt_ids = {1, 2};
  r.n = 1 << 30;
  EXPECT_EQ(submit(r).code(), absl::StatusCode::kInvalidArgument);
  r.n = 1;
  r.prompt_ids.assign(300, 2);
  EXPECT_EQ(submit(r).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cluster_->stats().num_waiting, 0);
}

}  // namespace
}  // namespace pagoda
