// What a 16-bit or int8 KV cache costs in accuracy, on the trained stories260K: run.c's golden
// continuations are teacher-forced through the model once per KV dtype, fed as a served
// sequence is (the prompt in prefill chunks, then one token per step, so every position reads
// its context back from the pool), and each position's next-token distribution is compared
// with the f32 cache's: mean KL(p_f32 ‖ p_kv) and how often the argmax agrees.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model/llama2c_checkpoint.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tests/worker/teacher_forcing.h"
#include "worker/kernels/isa.h"
#include "worker/llama_model.h"

namespace pagoda {
namespace {

constexpr int kBlockSize = 16;
constexpr int kPrefillChunk = 32;  // as a step budget splits a long prompt

class KvDtypeAccuracyTest : public ::testing::TestWithParam<const Kernels*> {
 protected:
  // One thread: thousands of tiny steps, where OpenMP barriers on a busy machine cost far more
  // than the work (a 2-thread run took minutes under a parallel build; 1 thread, a second).
  void SetUp() override {
    previous_ = SetActiveKernelsForTesting(GetParam());
    previous_threads_ = omp_get_max_threads();
    omp_set_num_threads(1);
  }
  void TearDown() override {
    SetActiveKernelsForTesting(previous_);
    omp_set_num_threads(previous_threads_);
  }
  const Kernels* previous_ = nullptr;
  int previous_threads_ = 1;
};

TEST_P(KvDtypeAccuracyTest, SixteenBitAndInt8KvAgreeWithF32OnTheGoldenContinuations) {
  const std::vector<testing::GoldenCase> golden = testing::LoadGoldenCases();
  ASSERT_FALSE(golden.empty());
  absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
  ASSERT_TRUE(w.ok()) << w.status();
  auto model = LlamaModel::Create(*std::move(w), kPrefillChunk, kPrefillChunk);
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& config = (*model)->config();
  const int num_blocks = config.max_seq_len / kBlockSize + 1;

  // The bounds keep a margin from what was measured (printed below). int8 (rows rotated,
  // kv_dtype.h): top-1 98.70%, mean KL 4.76e-4 nats (unrotated it was 97.94%, 1.16e-3), under
  // issue 42's 0.99: stories260K's rows are 8 wide, and the disagreements are near-ties (f32's
  // top two logits within 0.22, most within 0.1). A broken conversion is orders of magnitude off.
  struct Bound {
    KvDtype dtype;
    double min_top1, max_mean_kl;
  };
  constexpr Bound kBounds[] = {
      {KvDtype::kBf16, 0.97, 0.01}, {KvDtype::kF16, 0.97, 0.01}, {KvDtype::kInt8, 0.98, 8e-4}};
  constexpr int kDtypes = 3;
  testing::Agreement agreement[kDtypes];
  for (const testing::GoldenCase& c : golden) {
    std::vector<int> ids = c.prompt_ids;
    ids.insert(ids.end(), c.greedy_ids.begin(), c.greedy_ids.end());
    ids.resize(std::min<size_t>(ids.size(), config.max_seq_len));
    const int prompt_len = static_cast<int>(c.prompt_ids.size());
    KvPool f32_kv(config, num_blocks, kBlockSize, KvDtype::kF32);
    const auto reference =
        testing::TeacherForcedLogits(**model, f32_kv, ids, prompt_len, kPrefillChunk);
    ASSERT_EQ(reference.size(), ids.size());
    // The harness itself: with f32 KV each argmax is run.c's greedy choice.
    for (size_t p = c.prompt_ids.size() - 1; p + 1 < ids.size(); ++p) {
      ASSERT_EQ(testing::Argmax(reference[p]), ids[p + 1]) << c.prompt << " position " << p;
    }
    for (int d = 0; d < kDtypes; ++d) {
      KvPool kv(config, num_blocks, kBlockSize, kBounds[d].dtype);
      const auto logits = testing::TeacherForcedLogits(**model, kv, ids, prompt_len, kPrefillChunk);
      for (size_t p = 0; p < ids.size(); ++p) agreement[d].Add(reference[p], logits[p]);
    }
  }
  for (int d = 0; d < kDtypes; ++d) {
    const double mean_kl = agreement[d].mean_kl(), top1 = agreement[d].top1();
    const std::string name = KvDtypeName(kBounds[d].dtype);
    RecordProperty("mean_kl_" + name, absl::StrCat(mean_kl));
    RecordProperty("top1_agreement_" + name, absl::StrCat(top1));
    std::printf("[%s] %s KV vs f32 KV, %d positions: mean KL %.3g nats, top-1 agreement %.2f%%\n",
                GetParam()->name, name.c_str(), agreement[d].positions(), mean_kl, 100 * top1);
    EXPECT_GE(top1, kBounds[d].min_top1) << name;
    EXPECT_LT(mean_kl, kBounds[d].max_mean_kl) << name;
  }
}

// The golden continuations teacher-forced over a `dtype` cache twice, through `reference`'s
// attention and through GetParam()'s (the tests below make them differ in one kernel): the
// first `prompt(n)` of a continuation's n ids in prefill chunks of `chunk`, the rest one per
// step. Continuations shorter than `min_ids` are left out.
testing::Agreement KernelAgreement(const Kernels& reference, const Kernels* kernels, KvDtype dtype,
                                   int chunk, int min_ids, int (*prompt)(int n)) {
  const std::vector<testing::GoldenCase> golden = testing::LoadGoldenCases();
  EXPECT_FALSE(golden.empty());
  // A model keeps the kernels active when it is made: one with each.
  auto make_model = [&](const Kernels* k) {
    SetActiveKernelsForTesting(k);
    absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
    EXPECT_TRUE(w.ok()) << w.status();
    auto model = LlamaModel::Create(*std::move(w), chunk, chunk);
    EXPECT_TRUE(model.ok()) << model.status();
    SetActiveKernelsForTesting(kernels);
    return *std::move(model);
  };
  const std::unique_ptr<LlamaModel> reference_model = make_model(&reference);
  const std::unique_ptr<LlamaModel> model = make_model(kernels);
  const ModelConfig& config = model->config();
  const int num_blocks = config.max_seq_len / kBlockSize + 1;
  testing::Agreement agreement;
  for (const testing::GoldenCase& c : golden) {
    std::vector<int> ids = c.prompt_ids;
    ids.insert(ids.end(), c.greedy_ids.begin(), c.greedy_ids.end());
    ids.resize(std::min<size_t>(ids.size(), config.max_seq_len));
    const int n = static_cast<int>(ids.size());
    if (n < min_ids) continue;
    KvPool kv(config, num_blocks, kBlockSize, dtype);
    const auto expected = testing::TeacherForcedLogits(*reference_model, kv, ids, prompt(n), chunk);
    const auto logits = testing::TeacherForcedLogits(*model, kv, ids, prompt(n), chunk);
    for (int p = 0; p < n; ++p) agreement.Add(expected[p], logits[p]);
  }
  return agreement;
}

void Report(const char* what, const testing::Agreement& agreement) {
  const double mean_kl = agreement.mean_kl(), top1 = agreement.top1();
  ::testing::Test::RecordProperty(absl::StrCat("mean_kl_", what), absl::StrCat(mean_kl));
  ::testing::Test::RecordProperty(absl::StrCat("top1_agreement_", what), absl::StrCat(top1));
  std::printf(
      "%s against the f32 kernel, %d positions: mean KL %.3g nats, top-1 agreement %.2f%%\n", what,
      agreement.positions(), mean_kl, 100 * top1);
}

// What the bf16 prefill attention kernel (q and p rounded to bf16, bf16 pair products) costs
// against the f32 prefill kernel over the same bf16 cache: every position of the golden
// continuations is computed in prefill chunks of 128 rows, so each reads attention_prefill's
// rows; the two runs differ in that kernel alone.
TEST_P(KvDtypeAccuracyTest, Bf16PrefillAttentionAgreesWithTheF32KernelOnTheGoldenContinuations) {
  if (GetParam()->attention_prefill_bf16dot == nullptr) {
    GTEST_SKIP() << GetParam()->name << " has no bf16 prefill attention (needs AVX512_BF16)";
  }
  Kernels f32_prefill = *GetParam();
  f32_prefill.attention_prefill_bf16dot = nullptr;
  // Shorter continuations than 64 would run the other kernel.
  const testing::Agreement agreement =
      KernelAgreement(f32_prefill, GetParam(), KvDtype::kBf16, 128, 64, [](int n) { return n; });
  ASSERT_GT(agreement.positions(), 1000) << "too few golden positions to measure";
  Report("bf16_prefill", agreement);
  EXPECT_GE(agreement.top1(), 0.97);
  EXPECT_LT(agreement.mean_kl(), 0.01);
}

// The same for the bf16 decode kernel (keys in lanes, bf16 pair products) against `attention`'s
// f32 arithmetic, over a bf16 and an int8 cache: every position after the first is a decode.
// Measured on AVX512_BF16: bf16 cache top-1 99.69%, mean KL 3.2e-5 nats (the prefill kernel's
// cost above); int8 98.93%, 2.2e-4. The bounds keep a margin.
TEST_P(KvDtypeAccuracyTest, Bf16DecodeAttentionAgreesWithTheF32KernelOnTheGoldenContinuations) {
  if (GetParam()->attention_decode_bf16dot == nullptr) {
    GTEST_SKIP() << GetParam()->name << " has no bf16 decode attention (needs AVX512_BF16)";
  }
  Kernels f32_decode = *GetParam();
  f32_decode.attention_decode_bf16dot = nullptr;
  struct Bound {
    KvDtype dtype;
    double min_top1, max_mean_kl;
  };
  for (const Bound& b : {Bound{KvDtype::kBf16, 0.985, 2e-4}, Bound{KvDtype::kInt8, 0.975, 1e-3}}) {
    const testing::Agreement agreement =
        KernelAgreement(f32_decode, GetParam(), b.dtype, kPrefillChunk, 2, [](int) { return 1; });
    ASSERT_GT(agreement.positions(), 1000) << "too few golden positions to measure";
    Report(absl::StrCat(KvDtypeName(b.dtype), "_decode").c_str(), agreement);
    EXPECT_GE(agreement.top1(), b.min_top1) << KvDtypeName(b.dtype);
    EXPECT_LT(agreement.mean_kl(), b.max_mean_kl) << KvDtypeName(b.dtype);
  }
}

// The same for the int16 decode kernel over an int8 cache (q, and p times V's scales, rounded
// to int16; where the CPU lacks AVX512_BF16) against `attention`'s f32 arithmetic. Measured on
// AVX2: top-1 99.85% (2 of 1,308 positions differ), mean KL 2.6e-5 nats: less than a bf16
// cache costs against f32 (4.2e-5), and an 18th of what the int8 cache itself costs. The
// bounds keep a margin and are 4-10× tighter than the bf16 kernel's.
TEST_P(KvDtypeAccuracyTest, Int8DecodeAttentionAgreesWithTheF32KernelOnTheGoldenContinuations) {
  if (GetParam()->attention_decode_int8 == nullptr || GetParam()->attention_decode_bf16dot) {
    GTEST_SKIP() << GetParam()->name << " decodes an int8 cache otherwise";
  }
  Kernels f32_decode = *GetParam();
  f32_decode.attention_decode_int8 = nullptr;
  const testing::Agreement agreement = KernelAgreement(f32_decode, GetParam(), KvDtype::kInt8,
                                                       kPrefillChunk, 2, [](int) { return 1; });
  ASSERT_GT(agreement.positions(), 1000) << "too few golden positions to measure";
  Report("int8_int16_decode", agreement);
  EXPECT_GE(agreement.top1(), 0.995);
  EXPECT_LT(agreement.mean_kl(), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Isa, KvDtypeAccuracyTest, ::testing::ValuesIn(SupportedKernels()),
                         [](const ::testing::TestParamInfo<const Kernels*>& info) {
                           return std::string(info.param->name);
                         });

}  // namespace
}  // namespace pagoda
