// A client's view of a running router, shared by the process tests: health checks, streamed
// Generate calls, and the "32 streams under a fault lose no token" check.
#ifndef PAGODA_TESTS_INTEGRATION_SERVING_CLIENT_H_
#define PAGODA_TESTS_INTEGRATION_SERVING_CLIENT_H_

#include <functional>
#include <string>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/generation.grpc.pb.h"
#include "tests/test_util.h"

namespace pagoda::testing {

using HealthStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;
inline constexpr HealthStatus kServing = grpc::health::v1::HealthCheckResponse::SERVING;
inline constexpr HealthStatus kNotServing = grpc::health::v1::HealthCheckResponse::NOT_SERVING;

// What grpc.health.v1 at `address` says of `service`; UNKNOWN when nothing answers in 1 s.
HealthStatus CheckHealth(const std::string& address, const std::string& service);
// Polls until `address` reports `want` for `service`; after 60 s fails the test and returns
// false.
bool WaitForHealth(const std::string& address, const std::string& service, HealthStatus want);

// GetModelInfo with a 2 s deadline (an empty message when the router does not answer).
v1::ModelInfo GetModelInfo(v1::Generation::Stub& stub);
// Waits until no block is in use and it stays so for 250 ms (a client can see its call end,
// e.g. DEADLINE_EXCEEDED, before the router has even admitted the request it then aborts, and
// nothing counts calls not yet admitted); after 30 s fails the test.
void WaitForNoUsedBlocks(v1::Generation::Stub& stub);

struct StreamOutput {
  grpc::Status status;
  std::vector<std::vector<int>> ids;  // by index
  std::vector<std::string> text, finish;
  int cached_tokens = 0;
  uint64_t seed = 0;  // as the last message reports it
};

v1::GenerateRequest GreedyRequest(const std::string& prompt);
// Temperature 0.8 with a fixed seed: the same tokens on every run, wherever it runs.
v1::GenerateRequest SeededRequest(const std::string& prompt, uint64_t seed);

// One streamed Generate (120 s deadline). `trigger` runs once, when the stream has received
// `trigger_at` tokens in all.
StreamOutput Generate(v1::Generation::Stub& stub, const v1::GenerateRequest& request,
                      int trigger_at = -1,
                      std::function<void(grpc::ClientContext&)> trigger = nullptr);

// 32 concurrent streams, half seeded and half greedy over the golden prompts; `fault` runs
// once, when the first stream has 30 tokens. Every stream must end OK with exactly the tokens
// it gets without the fault (the golden ids for greedy ones). Reports through gtest.
void ExpectNoTokenLostWhen(v1::Generation::Stub& stub, const std::vector<GoldenCase>& golden,
                           const std::function<void()>& fault);

}  // namespace pagoda::testing

#endif  // PAGODA_TESTS_INTEGRATION_SERVING_CLIENT_H_
