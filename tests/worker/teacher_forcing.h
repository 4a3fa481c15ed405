// Teacher forcing for accuracy tests of the precisions: a known continuation is fed through the
// model as a served sequence is, and each position's next-token distribution is compared with a
// reference's, as llama.cpp judges a quantization (mean KL and top-1 agreement).
#ifndef PAGODA_TESTS_WORKER_TEACHER_FORCING_H_
#define PAGODA_TESTS_WORKER_TEACHER_FORCING_H_

#include <vector>

#include "worker/kv_pool.h"
#include "worker/llama_model.h"

namespace pagoda::testing {

// Logits (vocab) after every id of `ids`: the first `prompt_len` in prefill chunks of `chunk`
// (≤ the model's max_tokens and max_logit_rows), the rest one per step, so every position
// reads its context back from `kv`, whose blocks are used in reverse order. `kv` needs
// ⌈ids / block_size⌉ blocks.
std::vector<std::vector<float>> TeacherForcedLogits(LlamaModel& model, KvPool& kv,
                                                    const std::vector<int>& ids, int prompt_len,
                                                    int chunk);

int Argmax(const std::vector<float>& v);

// KL(p ‖ q) of the softmaxes of two logit vectors, summed over positions, and how often their
// argmaxes agree.
class Agreement {
 public:
  void Add(const std::vector<float>& reference, const std::vector<float>& other);
  double mean_kl() const { return kl_sum_ / positions_; }
  double top1() const { return static_cast<double>(agree_) / positions_; }
  int positions() const { return positions_; }

 private:
  double kl_sum_ = 0;
  int agree_ = 0, positions_ = 0;
};

}  // namespace pagoda::testing

#endif  // PAGODA_TESTS_WORKER_TEACHER_FORCING_H_
