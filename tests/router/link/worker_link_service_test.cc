// WorkerLinkService on a loopback port, with raw WorkerLink calls: the bound on calls open at
// once, and a call without its Hello ended at the Hello deadline.
#include "router/link/worker_link_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "router/core/cluster.h"
#include "tests/router/core/test_workers.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

using Stream = grpc::ClientReaderWriter<v1::WorkerMessage, v1::RouterMessage>;

class WorkerLinkServiceTest : public ::testing::Test {
 protected:
  void Start(int max_calls, absl::Duration hello_timeout) {
    WorkerLinkOptions options;
    options.worker_token = "cluster-token";
    options.max_calls = max_calls;
    options.hello_timeout = hello_timeout;
    service_ = std::make_unique<WorkerLinkService>(std::vector<Cluster*>{&cluster_}, options);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::WorkerLink::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  // A call that says nothing: the router's answer is its only read.
  struct Call {
    grpc::ClientContext context;
    std::unique_ptr<Stream> stream;
  };
  std::unique_ptr<Call> Open() {
    auto call = std::make_unique<Call>();
    call->context.AddMetadata("authorization", "Bearer cluster-token");
    call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    call->stream = stub_->Connect(&call->context);
    return call;
  }

  Cluster cluster_{testing::Stories260KConfig(), ClusterOptions{}};
  std::unique_ptr<WorkerLinkService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::WorkerLink::Stub> stub_;
  int port_ = 0;
};

TEST_F(WorkerLinkServiceTest, CallsPastTheBoundAreRefusedAndTheOthersWaitForTheirHello) {
  Start(/*max_calls=*/2, absl::Seconds(30));
  std::vector<std::unique_ptr<Call>> open;
  open.push_back(Open());
  open.push_back(Open());
  // The first two are open (no answer before their Hello); the third is one too many.
  ASSERT_TRUE(testing::WaitUntil([&] { return service_->num_calls() == 2; },
                                 std::chrono::seconds(30), "two calls open"));
  std::unique_ptr<Call> third = Open();
  v1::RouterMessage reply;
  ASSERT_TRUE(third->stream->Read(&reply));
  EXPECT_FALSE(reply.hello_reply().accepted());
  EXPECT_THAT(reply.hello_reply().message(), HasSubstr("2 worker calls open"));
  EXPECT_FALSE(third->stream->Read(&reply));
  EXPECT_EQ(third->stream->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // One leaves: a new call is taken again.
  open[0]->context.TryCancel();
  open[0]->stream->Finish();
  ASSERT_TRUE(testing::WaitUntil([&] { return service_->num_calls() == 1; },
                                 std::chrono::seconds(30), "the cancelled call is gone"));
  open.push_back(Open());
  ASSERT_TRUE(testing::WaitUntil([&] { return service_->num_calls() == 2; },
                                 std::chrono::seconds(30), "a new call is open"));
  for (auto& call : open) call->context.TryCancel();
}

TEST_F(WorkerLinkServiceTest, ACallWithoutItsHelloEndsAtTheDeadline) {
  Start(/*max_calls=*/8, absl::Milliseconds(300));
  std::unique_ptr<Call> call = Open();
  v1::RouterMessage reply;
  EXPECT_FALSE(call->stream->Read(&reply));  // ends, unanswered
  EXPECT_EQ(call->stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(testing::WaitUntil([&] { return service_->num_calls() == 0; },
                                 std::chrono::seconds(30), "the call is gone"));
}

}  // namespace
}  // namespace pagoda
