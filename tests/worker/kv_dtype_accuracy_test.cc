// What a 16-bit KV cache costs in accuracy, on the trained stories260K: run.c's golden
// continuations are teacher-forced through the model once per KV dtype, fed as a served
// sequence is (the prompt in prefill chunks, then one token per step, so every position reads
// its context back from the pool), and each position's next-token distribution is compared
// with the f32 cache's: mean KL(p_f32 ‖ p_16) and how often the argmax agrees.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model/llama2c_checkpoint.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "worker/kernels/isa.h"
#include "worker/llama_model.h"

namespace pagoda {
namespace {

constexpr int kBlockSize = 16;
constexpr int kPrefillChunk = 32;  // as a step budget splits a long prompt

// Logits (vocab) at every position of `ids`: the first `prompt_len` ids in prefill chunks,
// the rest one per step, through a pool whose blocks are out of order.
std::vector<std::vector<float>> TeacherForced(LlamaModel& model, KvPool& kv,
                                              const std::vector<int>& ids, int prompt_len) {
  const int n = static_cast<int>(ids.size());
  std::vector<int> block_table;
  for (int b = 0; b * kBlockSize < n; ++b) block_table.push_back(kv.num_blocks() - 1 - b);
  const int vocab = model.config().vocab_size;
  std::vector<std::vector<float>> logits;
  for (int start = 0; start < n;) {
    const int rows = start < prompt_len ? std::min(kPrefillChunk, prompt_len - start) : 1;
    std::vector<int> tokens(ids.begin() + start, ids.begin() + start + rows);
    std::vector<int> positions, logit_rows;
    std::vector<int64_t> slots;
    for (int r = 0; r < rows; ++r) {
      const int pos = start + r;
      positions.push_back(pos);
      slots.push_back(static_cast<int64_t>(block_table[pos / kBlockSize]) * kBlockSize +
                      pos % kBlockSize);
      logit_rows.push_back(r);
    }
    const AttentionSequence seqs[] = {{0, rows, start, block_table.data()}};
    const float* out = model.Forward({tokens, positions, slots, seqs, logit_rows}, kv);
    for (int r = 0; r < rows; ++r) logits.emplace_back(out + r * vocab, out + (r + 1) * vocab);
    start += rows;
  }
  return logits;
}

std::vector<double> LogSoftmax(const std::vector<float>& logits) {
  double max = -INFINITY, sum = 0;
  for (float x : logits) max = std::max(max, static_cast<double>(x));
  for (float x : logits) sum += std::exp(x - max);
  std::vector<double> out;
  for (float x : logits) out.push_back(x - max - std::log(sum));
  return out;
}

int Argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

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

TEST_P(KvDtypeAccuracyTest, SixteenBitKvAgreesWithF32OnTheGoldenContinuations) {
  const std::vector<testing::GoldenCase> golden = testing::LoadGoldenCases();
  ASSERT_FALSE(golden.empty());
  absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
  ASSERT_TRUE(w.ok()) << w.status();
  auto model = LlamaModel::Create(*std::move(w), kPrefillChunk, kPrefillChunk);
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& config = (*model)->config();
  const int num_blocks = config.max_seq_len / kBlockSize + 1;

  constexpr KvDtype kDtypes[] = {KvDtype::kBf16, KvDtype::kF16};
  double kl_sum[2] = {0, 0};
  int agree[2] = {0, 0}, positions = 0;
  for (const testing::GoldenCase& c : golden) {
    std::vector<int> ids = c.prompt_ids;
    ids.insert(ids.end(), c.greedy_ids.begin(), c.greedy_ids.end());
    ids.resize(std::min<size_t>(ids.size(), config.max_seq_len));
    const int prompt_len = static_cast<int>(c.prompt_ids.size());
    KvPool f32_kv(config, num_blocks, kBlockSize, KvDtype::kF32);
    const auto reference = TeacherForced(**model, f32_kv, ids, prompt_len);
    ASSERT_EQ(reference.size(), ids.size());
    // The harness itself: with f32 KV each argmax is run.c's greedy choice.
    for (size_t p = c.prompt_ids.size() - 1; p + 1 < ids.size(); ++p) {
      ASSERT_EQ(Argmax(reference[p]), ids[p + 1]) << c.prompt << " position " << p;
    }
    positions += static_cast<int>(ids.size());
    for (int d = 0; d < 2; ++d) {
      KvPool half_kv(config, num_blocks, kBlockSize, kDtypes[d]);
      const auto half = TeacherForced(**model, half_kv, ids, prompt_len);
      for (size_t p = 0; p < ids.size(); ++p) {
        const std::vector<double> lp = LogSoftmax(reference[p]), lq = LogSoftmax(half[p]);
        for (size_t i = 0; i < lp.size(); ++i) kl_sum[d] += std::exp(lp[i]) * (lp[i] - lq[i]);
        agree[d] += Argmax(reference[p]) == Argmax(half[p]);
      }
    }
  }
  for (int d = 0; d < 2; ++d) {
    const double mean_kl = kl_sum[d] / positions;
    const double agreement = static_cast<double>(agree[d]) / positions;
    const std::string name = KvDtypeName(kDtypes[d]);
    RecordProperty("mean_kl_" + name, absl::StrCat(mean_kl));
    RecordProperty("top1_agreement_" + name, absl::StrCat(agreement));
    std::printf("[%s] %s KV vs f32 KV, %d positions: mean KL %.3g nats, top-1 agreement %.2f%%\n",
                GetParam()->name, name.c_str(), positions, mean_kl, 100 * agreement);
    EXPECT_GE(agreement, 0.97) << name;
    EXPECT_LT(mean_kl, 0.01) << name;  // loose: a broken conversion is orders of magnitude off
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, KvDtypeAccuracyTest, ::testing::ValuesIn(SupportedKernels()),
                         [](const ::testing::TestParamInfo<const Kernels*>& info) {
                           return std::string(info.param->name);
                         });

}  // namespace
}  // namespace pagoda
