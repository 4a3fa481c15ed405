// WorkerConnection over a scripted call: the Hello's reply first, one write in flight, a step's
// result matched by its id, and a call that breaks, closes or hangs failing the step.
#include "router/link/worker_connection.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

// What the connection asked of its call: the messages it started writing, and cancels.
class ScriptedCall {
 public:
  WorkerConnection::Call call() {
    return {.start_write =
                [this](const v1::RouterMessage* m) {
                  absl::MutexLock lock(&mu_);
                  started_.push_back(*m);
                },
            .cancel =
                [this] {
                  absl::MutexLock lock(&mu_);
                  ++cancels_;
                }};
  }
  std::vector<v1::RouterMessage> started() {
    absl::MutexLock lock(&mu_);
    return started_;
  }
  int cancels() {
    absl::MutexLock lock(&mu_);
    return cancels_;
  }
  bool WaitForWrites(size_t n) {
    return testing::WaitUntil([&] { return started().size() >= n; }, std::chrono::seconds(30),
                              "the connection starts a write");
  }

 private:
  absl::Mutex mu_;
  std::vector<v1::RouterMessage> started_ ABSL_GUARDED_BY(mu_);
  int cancels_ ABSL_GUARDED_BY(mu_) = 0;
};

v1::RouterMessage AcceptedReply() {
  v1::RouterMessage reply;
  reply.mutable_hello_reply()->set_accepted(true);
  return reply;
}

StepCommand StepNumbered(int64_t id) {
  StepCommand command;
  command.step_id = id;
  return command;
}

v1::StepResult ResultOf(int64_t id) {
  v1::StepResult result;
  result.set_step_id(id);
  return result;
}

TEST(WorkerConnectionTest, AStepWaitsForTheHellosReplyAndGetsItsOwnResult) {
  ScriptedCall call;
  WorkerConnection connection(WorkerInfo{}, {}, call.call(), absl::Seconds(30));
  absl::StatusOr<StepResult> result;
  std::thread loop([&] { result = connection.Execute(StepNumbered(7)); });
  // Nothing goes out before the reply.
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_TRUE(call.started().empty());
  connection.Accept(AcceptedReply());
  ASSERT_TRUE(call.WaitForWrites(1));
  EXPECT_TRUE(call.started()[0].has_hello_reply());
  // One write in flight: the step goes once the reply is written.
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(call.started().size(), 1u);
  connection.OnWriteDone(true);
  ASSERT_TRUE(call.WaitForWrites(2));
  ASSERT_TRUE(call.started()[1].has_step());
  EXPECT_EQ(call.started()[1].step().step_id(), 7);
  connection.OnWriteDone(true);
  connection.OnResult(ResultOf(6));  // a stale answer is not this step's
  connection.OnResult(ResultOf(7));
  loop.join();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->step_id, 7);
  EXPECT_EQ(call.cancels(), 0);
}

TEST(WorkerConnectionTest, MessagesQueuedWhileOneIsWrittenGoOutInOrder) {
  ScriptedCall call;
  WorkerConnection connection(WorkerInfo{}, {}, call.call(), absl::Seconds(30));
  connection.Accept(AcceptedReply());
  connection.SendStageWiring("10.0.0.2:7001");
  connection.SendDrained();
  EXPECT_EQ(call.started().size(), 1u);
  connection.OnWriteDone(true);
  connection.OnWriteDone(true);
  std::vector<v1::RouterMessage> started = call.started();
  ASSERT_EQ(started.size(), 3u);
  EXPECT_EQ(started[1].stage_wiring().next_stage_address(), "10.0.0.2:7001");
  EXPECT_TRUE(started[2].has_drained());
}

TEST(WorkerConnectionTest, ABrokenWriteFailsTheStepAndEndsTheCall) {
  ScriptedCall call;
  WorkerConnection connection(WorkerInfo{}, {}, call.call(), absl::Seconds(30));
  connection.Accept(AcceptedReply());
  connection.OnWriteDone(true);
  absl::StatusOr<StepResult> result;
  std::thread loop([&] { result = connection.Execute(StepNumbered(1)); });
  ASSERT_TRUE(call.WaitForWrites(2));
  connection.OnWriteDone(false);
  loop.join();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(call.cancels(), 1);
  // Closed: nothing more is written, and steps fail at once.
  connection.SendDrained();
  EXPECT_EQ(connection.Execute(StepNumbered(2)).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(call.started().size(), 2u);
}

TEST(WorkerConnectionTest, TheCallEndingWakesAWaitingStepWithoutCancellingAgain) {
  ScriptedCall call;
  WorkerConnection connection(WorkerInfo{}, {}, call.call(), absl::Seconds(30));
  absl::StatusOr<StepResult> result;
  std::thread loop([&] { result = connection.Execute(StepNumbered(1)); });
  absl::SleepFor(absl::Milliseconds(10));
  connection.Close();  // before the Hello's reply: the step never went out
  loop.join();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  connection.Abandon();
  EXPECT_EQ(call.cancels(), 0);  // the call is over: its context may be gone
  EXPECT_TRUE(call.started().empty());
}

TEST(WorkerConnectionTest, AnUnansweredStepCancelsTheCall) {
  ScriptedCall call;
  WorkerConnection connection(WorkerInfo{}, {}, call.call(), absl::Milliseconds(50));
  connection.Accept(AcceptedReply());
  const absl::StatusOr<StepResult> result = connection.Execute(StepNumbered(3));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(result.status().message().find("did not answer step 3"), std::string::npos);
  EXPECT_EQ(call.cancels(), 1);
}

}  // namespace
}  // namespace pagoda
