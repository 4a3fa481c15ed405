// A worker's load reports over real gRPC: LoadReportClient (the worker's side) against the router's
// WorkerLinkService, on a loopback port, with and without the cluster's token.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "router/core/cluster.h"
#include "router/link/worker_link_service.h"
#include "tests/router/core/test_workers.h"
#include "tests/test_util.h"
#include "worker/load_report_client.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class LoadReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WorkerLinkOptions options;
    options.worker_token = "cluster-token";
    options.metrics = &metrics_;
    service_ = std::make_unique<WorkerLinkService>(std::vector<Cluster*>{&cluster_}, options);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override { server_->Shutdown(); }

  WorkerServiceOptions Link(std::string token) const {
    WorkerServiceOptions link;
    link.router_address = absl::StrCat("127.0.0.1:", port_);
    link.name = "host:4242";
    link.worker_token = std::move(token);
    return link;
  }

  MetricsRegistry registry_;
  RouterMetrics metrics_{&registry_};
  Cluster cluster_{testing::Stories260KConfig(), ClusterOptions{}};
  std::unique_ptr<WorkerLinkService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(LoadReportTest, TheRouterSeesHowFarAWorkerLoadingIs) {
  LoadReportClient reporter(Link("cluster-token"), absl::Milliseconds(20));
  reporter.Progress("hashing weights", 10'000'000, 100'000'000);
  ASSERT_TRUE(testing::WaitUntil([&] { return !service_->loading().Loading(absl::Now()).empty(); },
                                 std::chrono::seconds(20), "the router has a load report"));
  EXPECT_THAT(service_->loading().Loading(absl::Now()),
              ElementsAre(HasSubstr("host:4242 hashing weights: 10.0 / 100.0 MB (10%)")));
  reporter.Progress("loading weights", 60'000'000, 100'000'000);
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        const std::vector<std::string> now = service_->loading().Loading(absl::Now());
        return now.size() == 1 &&
               absl::StrContains(now[0], "loading weights: 60.0 / 100.0 MB (60%)");
      },
      std::chrono::seconds(20), "the router has the later report"));
}

TEST_F(LoadReportTest, WithoutTheClusterTokenNothingIsRecorded) {
  {
    LoadReportClient reporter(Link("wrong"), absl::Milliseconds(20));
    reporter.Progress("loading weights", 10, 100);
    ASSERT_TRUE(testing::WaitUntil([&] { return metrics_.refused_worker_token->value() >= 2; },
                                   std::chrono::seconds(20), "two reports were refused"));
  }
  EXPECT_TRUE(service_->loading().Loading(absl::Now()).empty());
}

}  // namespace
}  // namespace pagoda
