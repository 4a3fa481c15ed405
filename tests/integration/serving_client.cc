#include "tests/integration/serving_client.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace pagoda::testing {

HealthStatus CheckHealth(const std::string& address, const std::string& service) {
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  if (!health->Check(&ctx, req, &resp).ok()) return grpc::health::v1::HealthCheckResponse::UNKNOWN;
  return resp.status();
}

bool WaitForHealth(const std::string& address, const std::string& service, HealthStatus want) {
  return WaitUntil([&] { return CheckHealth(address, service) == want; }, std::chrono::seconds(60),
                   absl::StrCat(address, " reports ",
                                grpc::health::v1::HealthCheckResponse::ServingStatus_Name(want),
                                " for service \"", service, "\""),
                   std::chrono::milliseconds(50));
}

void WaitForNoUsedBlocks(v1::Generation::Stub& stub) {
  int zeros = 0;  // reads in a row that found every block free
  WaitUntil(
      [&] {
        zeros = GetModelInfo(stub).num_used_blocks() == 0 ? zeros + 1 : 0;
        return zeros == 10;
      },
      std::chrono::seconds(30), "every block is free, 10 reads 25 ms apart in a row",
      std::chrono::milliseconds(25));
}

v1::ModelInfo GetModelInfo(v1::Generation::Stub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::ModelInfo info;
  if (!stub.GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).ok()) return v1::ModelInfo();
  return info;
}

v1::GenerateRequest GreedyRequest(const std::string& prompt) {
  v1::GenerateRequest r;
  r.set_prompt(prompt);
  r.mutable_sampling()->set_temperature(0);
  return r;
}

v1::GenerateRequest SeededRequest(const std::string& prompt, uint64_t seed) {
  v1::GenerateRequest r;
  r.set_prompt(prompt);
  r.mutable_sampling()->set_temperature(0.8f);
  r.mutable_sampling()->set_seed(seed);
  return r;
}

StreamOutput Generate(v1::Generation::Stub& stub, const v1::GenerateRequest& request,
                      int trigger_at, std::function<void(grpc::ClientContext&)> trigger) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  auto reader = stub.Generate(&ctx, request);
  StreamOutput out;
  // A refused n (2^31-1) must not size the client either.
  const int n = std::clamp(request.has_n() ? request.n() : 1, 1, 1024);
  out.ids.resize(n);
  out.text.resize(n);
  out.finish.resize(n);
  v1::GenerateResponse r;
  int total = 0;
  while (reader->Read(&r)) {
    if (r.index() < 0 || r.index() >= n) {
      ADD_FAILURE() << "a response for sequence " << r.index() << " of " << n;
      continue;
    }
    out.ids[r.index()].insert(out.ids[r.index()].end(), r.token_ids().begin(), r.token_ids().end());
    out.text[r.index()] += r.text();
    if (!r.finish_reason().empty()) out.finish[r.index()] = r.finish_reason();
    if (r.has_usage()) out.cached_tokens = r.usage().cached_tokens();
    if (!r.finish_reason().empty()) out.seed = r.seed();
    total += r.token_ids_size();
    if (trigger && total >= trigger_at) {
      trigger(ctx);
      trigger = nullptr;
    }
  }
  out.status = reader->Finish();
  return out;
}

void ExpectNoTokenLostWhen(v1::Generation::Stub& stub, const std::vector<GoldenCase>& golden,
                           const std::function<void()>& fault) {
  auto request = [&](int i) {
    const std::string& prompt = golden[i % golden.size()].prompt;
    return i < 16 ? SeededRequest(prompt, 1000 + i) : GreedyRequest(prompt);
  };
  std::vector<StreamOutput> reference(16);
  for (int i = 0; i < 16; ++i) reference[i] = Generate(stub, request(i));

  std::vector<StreamOutput> outputs(32);
  std::vector<std::thread> clients;
  std::atomic<bool> faulted{false};
  for (int i = 0; i < 32; ++i) {
    clients.emplace_back([&, i] {
      outputs[i] = Generate(stub, request(i), 30, [&](grpc::ClientContext&) {
        if (!faulted.exchange(true)) fault();
      });
    });
  }
  for (auto& t : clients) t.join();
  ASSERT_TRUE(faulted);
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(outputs[i].status.ok()) << i << ": " << outputs[i].status.error_message();
    if (i < 16) {
      ASSERT_TRUE(reference[i].status.ok()) << reference[i].status.error_message();
      EXPECT_EQ(outputs[i].ids[0], reference[i].ids[0]) << "seeded stream " << i;
    } else {
      EXPECT_EQ(outputs[i].ids[0], golden[i % golden.size()].greedy_ids) << "greedy stream " << i;
    }
  }
}

}  // namespace pagoda::testing
