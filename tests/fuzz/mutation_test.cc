// Bounded mutation fuzzing of everything that crosses a port or comes from a file: valid inputs
// are mutated (bit flips, byte writes, truncations, duplicated spans) with a fixed seed, and
// each result must be refused with a status or accepted, never crash, hang or over-allocate.
// It runs in both test trees; under ASan/UBSan it is the check that matters.
//
// A few seconds each in CI. Longer: PAGODA_FUZZ_ITERATIONS=100000 (per target), and
// PAGODA_FUZZ_SEED=N for another sequence of mutations.
#include <cstdlib>
#include <filesystem>
#include <random>

#include "common/executor.h"
#include "common/model/hf_model.h"
#include "common/model/llama2c_checkpoint.h"
#include "gmock/gmock.h"
#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "lib/text/tokenizer_loader.h"
#include "pagoda/v1/generation.pb.h"
#include "pagoda/v1/worker.pb.h"
#include "proto/step_proto.h"
#include "router/api/generation_service.h"
#include "router/core/cluster.h"
#include "router/core/engine.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

int Iterations(int default_count) {
  const char* env = std::getenv("PAGODA_FUZZ_ITERATIONS");
  return env != nullptr ? std::max(1, std::atoi(env)) : default_count;
}

class Mutator {
 public:
  explicit Mutator(uint32_t salt) {
    const char* env = std::getenv("PAGODA_FUZZ_SEED");
    rng_.seed(salt + (env != nullptr ? static_cast<uint32_t>(std::atoi(env)) : 0));
  }
  // 1-4 mutations of `in`, biased towards its first `hot` bytes (headers), if given.
  std::string Mutate(const std::string& in, size_t hot = 0) {
    std::string s = in;
    const int count = 1 + static_cast<int>(rng_() % 4);
    for (int k = 0; k < count && !s.empty(); ++k) {
      const size_t span = hot > 0 && rng_() % 4 != 0 ? std::min(hot, s.size()) : s.size();
      const size_t at = rng_() % span;
      switch (rng_() % 6) {
        case 0:
          s[at] ^= static_cast<char>(1 << (rng_() % 8));
          break;
        case 1:
          s[at] = static_cast<char>(rng_());
          break;
        case 2: {  // an interesting value over 4 bytes
          static constexpr uint32_t kValues[] = {0, 1, 0x7fffffff, 0x80000000, 0xffffffff, 0xff};
          const uint32_t v = kValues[rng_() % 6];
          for (size_t b = 0; b < 4 && at + b < s.size(); ++b)
            s[at + b] = static_cast<char>(v >> (8 * b));
          break;
        }
        case 3:
          s.resize(at);
          break;
        case 4: {  // duplicate a span
          const size_t len = std::min<size_t>(1 + rng_() % 64, s.size() - at);
          s.insert(at, s.substr(at, len));
          break;
        }
        default:
          s.erase(at, std::min<size_t>(1 + rng_() % 16, s.size() - at));
          break;
      }
    }
    return s;
  }

 private:
  std::mt19937 rng_;
};

ModelConfig TinyConfig() {
  ModelConfig c;
  c.dim = 8;
  c.hidden_dim = 16;
  c.num_layers = 1;
  c.num_heads = 2;
  c.num_kv_heads = 2;
  c.head_dim = 4;
  c.vocab_size = 32;
  c.max_seq_len = 64;
  c.eos_ids = {2};
  return c;
}

// Answers every step with token 5 for each sequence that samples; or with `reply` when set.
class ScriptedExecutor final : public Executor {
 public:
  explicit ScriptedExecutor(WorkerInfo info) : info_(std::move(info)) {}
  const WorkerInfo& info() const override { return info_; }
  absl::StatusOr<StepResult> Execute(const StepCommand& command) override {
    StepResult r;
    r.step_id = command.step_id;
    for (const ScheduledSequence& s : command.scheduled) {
      if (!s.sample) continue;
      SampledToken& t = r.sampled.emplace_back();
      t.seq_id = s.seq_id;
      t.token_id = 5;
    }
    if (!spoil) return r;
    v1::StepResult wire;
    ToProto(r, &wire);
    v1::StepResult mutated;
    if (!mutated.ParseFromString(spoil(wire.SerializeAsString()))) {
      return absl::InvalidArgumentError("unparsable");
    }
    return FromProto(mutated);
  }
  std::function<std::string(const std::string&)> spoil;

 private:
  WorkerInfo info_;
};

WorkerInfo ValidInfo() {
  return {.model_fingerprint = TinyConfig().Fingerprint(),
          .num_blocks = 64,
          .block_size = 16,
          .max_num_batched_tokens = 256,
          .max_num_seqs = 16,
          .kv_cache_dtype = "f32"};
}

TEST(MutationTest, HellosAreRefusedOrMakeAWorkingScheduler) {
  Mutator m(1);
  v1::WorkerMessage valid;
  ToProto(ValidInfo(), valid.mutable_hello());
  // Two chained cached blocks (issue 38) whose fields the mutations reach too.
  std::vector<CachedBlock> cached = {{.block = 3, .parent = -1, .tokens = std::vector<int>(16, 1)},
                                     {.block = 9, .parent = 0, .tokens = std::vector<int>(16, 3)}};
  ToProto(cached, valid.mutable_hello());
  const std::string bytes = valid.SerializeAsString();
  int accepted = 0, adopted = 0;
  for (int i = 0; i < Iterations(20000); ++i) {
    v1::WorkerMessage message;
    if (!message.ParseFromString(m.Mutate(bytes)) || !message.has_hello()) continue;
    const WorkerInfo info = FromProto(message.hello());
    if (!ValidateWorkerInfo(info, WorkerLimits()).ok()) continue;
    ++accepted;
    ScriptedExecutor executor(info);
    Engine engine(TinyConfig(), &executor, EngineOptions());  // CHECKed its options before
    cached = CachedBlocksFromProto(message.hello());
    if (ValidateCachedBlocks(cached, info, TinyConfig().vocab_size).ok()) {
      adopted += !cached.empty();
      engine.AdoptCachedBlocks(cached);
    }
    GenerationRequest r;
    r.prompt_ids = {1, 3, 4};
    r.max_tokens = 4;
    if (engine.AddRequest(/*request_id=*/0, r).ok()) {
      for (int s = 0; s < 8 && engine.has_unfinished(); ++s) ASSERT_TRUE(engine.Step().ok());
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(adopted, 0);
}

TEST(MutationTest, StepResultsAreErrorsOrValidNeverACrash) {
  Mutator m(2);
  int errors = 0;
  for (int i = 0; i < Iterations(20000); ++i) {
    ScriptedExecutor executor(ValidInfo());
    executor.spoil = [&](const std::string& bytes) { return m.Mutate(bytes); };
    Engine engine(TinyConfig(), &executor, EngineOptions());
    GenerationRequest r;
    r.prompt_ids = {1, 3, 4};
    r.n = 2;
    r.max_tokens = 3;
    ASSERT_TRUE(engine.AddRequest(/*request_id=*/0, r).ok());
    for (int s = 0; s < 6 && engine.has_unfinished(); ++s) {
      if (!engine.Step().ok()) {
        ++errors;
        break;
      }
    }
  }
  EXPECT_GT(errors, 0);
}

TEST(MutationTest, GenerateRequestsAreRefusedBeforeTheyAllocate) {
  Mutator m(3);
  auto tokenizer = LoadTokenizer(testing::Stories260KTokenizer());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  ModelConfig config = TinyConfig();
  config.vocab_size = (*tokenizer)->vocab_size();
  Cluster cluster(config, ClusterOptions());
  ServedModels models;
  ASSERT_TRUE(
      models.Add({.name = "fuzz", .cluster = &cluster, .tokenizer = tokenizer->get()}).ok());
  GenerationService service(&models);
  v1::GenerateRequest valid;
  valid.set_prompt("Once upon a time");
  valid.set_max_tokens(8);
  valid.set_n(2);
  valid.set_logprobs(3);
  valid.add_stop("the end");
  valid.add_stop_token_ids(2);
  valid.mutable_sampling()->set_temperature(0.7f);
  valid.mutable_sampling()->set_top_p(0.9f);
  valid.mutable_sampling()->set_seed(7);
  const std::string bytes = valid.SerializeAsString();
  google::protobuf::LogSilencer quiet;  // "invalid UTF-8" for every such mutation
  int refused = 0;
  for (int i = 0; i < Iterations(20000); ++i) {
    v1::GenerateRequest request;
    if (!request.ParseFromString(m.Mutate(bytes))) continue;
    absl::StatusOr<GenerationRequest> r = service.Translate(request, models.default_model());
    if (r.ok()) {
      const absl::Status valid_status = cluster.Validate(*r);
      if (valid_status.ok()) {
        EXPECT_LE(r->n, EngineOptions().max_n);
        EXPECT_LT(r->prompt_ids.size(), static_cast<size_t>(config.max_seq_len));
      } else {
        ++refused;
        EXPECT_EQ(valid_status.code(), absl::StatusCode::kInvalidArgument);
      }
    } else {
      ++refused;
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
  EXPECT_GT(refused, 0);
}

// Writes mutated copies of `file` (in a copy of its directory) and loads them with `load`.
void FuzzFile(const std::string& source_dir, const std::string& file, size_t hot, int iterations,
              uint32_t salt, const std::function<absl::Status(const std::string& dir)>& load) {
  namespace fs = std::filesystem;
  const std::string dir = testing::TempDir() + "/" + file + "-mutated";
  fs::create_directories(dir);
  for (const fs::directory_entry& e : fs::directory_iterator(source_dir)) {
    fs::copy_file(e.path(), fs::path(dir) / e.path().filename());
  }
  const std::string original = testing::ReadFile(source_dir + "/" + file);
  ASSERT_TRUE(load(dir).ok()) << "the unmutated file must load";
  Mutator m(salt);
  int refused = 0;
  for (int i = 0; i < iterations; ++i) {
    testing::WriteFile(dir + "/" + file, m.Mutate(original, hot));
    refused += !load(dir).ok();
  }
  EXPECT_GT(refused, 0) << file;
}

TEST(MutationTest, Llama2cCheckpointsAndTokenizers) {
  const std::string src = testing::SharedPath("models/stories260K");
  FuzzFile(src, "stories260K.bin", 64, Iterations(300), 4, [](const std::string& dir) {
    return LoadLlama2cCheckpoint(dir + "/stories260K.bin").status();
  });
  FuzzFile(src, "tok512.bin", 256, Iterations(300), 5,
           [](const std::string& dir) { return LoadTokenizer(dir + "/tok512.bin", 512).status(); });
}

TEST(MutationTest, HuggingFaceDirectories) {
  const std::string src = testing::SharedPath("models/stories260K-hf");
  FuzzFile(src, "config.json", 0, Iterations(300), 6,
           [](const std::string& dir) { return LoadHfConfig(dir).status(); });
  FuzzFile(src, "model.safetensors", 2048, Iterations(300), 7,
           [](const std::string& dir) { return LoadHfModel(dir).status(); });
  FuzzFile(src, "tokenizer.json", 0, Iterations(100), 8,
           [](const std::string& dir) { return LoadTokenizer(dir + "/tokenizer.json").status(); });
}

}  // namespace
}  // namespace pagoda
