#include "router/link/local_workers.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

LocalWorkersRouter Router() {
  LocalWorkersRouter r;
  r.model = "/models/m.bin";
  r.worker_port = 50052;
  r.worker_token = "secret-token";
  r.max_num_batched_tokens = 512;
  r.max_num_seqs = 64;
  return r;
}

TEST(LocalWorkersTest, EachWorkerDialsTheRouterWithItsStepLimitsAndAName) {
  LocalWorkersOptions options;
  options.num_workers = 2;
  const std::vector<std::string> args = LocalWorkerArgs(options, Router(), 1);
  EXPECT_THAT(args, Contains("--router=127.0.0.1:50052"));
  EXPECT_THAT(args, Contains("--model=/models/m.bin"));
  EXPECT_THAT(args, Contains("--max_num_batched_tokens=512"));
  EXPECT_THAT(args, Contains("--max_num_seqs=64"));
  EXPECT_THAT(args, Contains("--name=local-1"));
  EXPECT_THAT(args, Contains("--kv_cache_mb=auto"));
  for (const std::string& arg : args) {
    EXPECT_THAT(arg, Not(HasSubstr("secret-token"))) << "the token goes in the environment";
  }
}

TEST(LocalWorkersTest, WorkersShareTheMemoryAndTheCores) {
  LocalWorkersOptions options;
  options.num_workers = 4;
  const std::vector<std::string> args = LocalWorkerArgs(options, Router(), 0);
  EXPECT_THAT(args, Contains("--kv_cache_memory_fraction=0.125"));  // the worker's half, in 4
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_THAT(args, Contains("--threads=" + std::to_string(std::max(1, cores / 4))));
  options.threads = 3;
  EXPECT_THAT(LocalWorkerArgs(options, Router(), 0), Contains("--threads=3"));
  // Several move K/V between them over loopback; one alone has no peer.
  EXPECT_THAT(args, Contains("--kv_transfer_port=-1"));
  options.num_workers = 1;
  EXPECT_THAT(LocalWorkerArgs(options, Router(), 0), Not(Contains("--kv_transfer_port=-1")));
}

TEST(LocalWorkersTest, EachWorkerKeepsItsKvInADirectoryOfItsOwn) {
  LocalWorkersOptions options;
  options.num_workers = 2;
  for (const std::string& arg : LocalWorkerArgs(options, Router(), 1)) {
    EXPECT_THAT(arg, Not(HasSubstr("kv_cache_dir"))) << "off unless asked";
  }
  options.kv_cache_dir = "/var/cache/pagoda";
  EXPECT_THAT(LocalWorkerArgs(options, Router(), 0),
              Contains("--kv_cache_dir=/var/cache/pagoda/worker-0"));
  EXPECT_THAT(LocalWorkerArgs(options, Router(), 1),
              Contains("--kv_cache_dir=/var/cache/pagoda/worker-1"));
}

TEST(LocalWorkersTest, TheRoutersRopeScalingIsTheWorkersSoTheirFingerprintsAgree) {
  LocalWorkersOptions options;
  options.num_workers = 1;
  for (const std::string& arg : LocalWorkerArgs(options, Router(), 0)) {
    EXPECT_THAT(arg, Not(HasSubstr("rope_scaling"))) << "the model's own unless asked";
  }
  LocalWorkersRouter router = Router();
  router.rope_scaling = R"({"rope_type":"yarn","factor":4})";
  EXPECT_THAT(LocalWorkerArgs(options, router, 0),
              Contains(R"(--rope_scaling={"rope_type":"yarn","factor":4})"));
}

TEST(LocalWorkersTest, ADtypeAWorkerWouldRefuseStopsTheRouterNamingItsFlag) {
  LocalWorkersOptions options;
  options.weight_dtype = "fp8";
  EXPECT_EQ(CheckLocalWorkersOptions(options).message(),
            "--worker-weight-dtype=fp8: expected auto, f32, bf16, int8 or int4");
  options.weight_dtype = "int8";
  options.kv_cache_dtype = "q8_0";
  EXPECT_EQ(CheckLocalWorkersOptions(options).message(),
            "--worker-kv-cache-dtype=q8_0: expected auto, f32, bf16, f16 or int8");
  options.kv_cache_dtype = "bf16";
  EXPECT_TRUE(CheckLocalWorkersOptions(options).ok());
  EXPECT_EQ(
      LocalWorkers::Start(LocalWorkersOptions{.weight_dtype = "fp8"}, Router()).status().code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagoda
