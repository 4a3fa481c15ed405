#include "tests/worker/teacher_forcing.h"

#include <algorithm>
#include <cmath>

namespace pagoda::testing {
namespace {

std::vector<double> LogSoftmax(const std::vector<float>& logits) {
  double max = -INFINITY, sum = 0;
  for (float x : logits) max = std::max(max, static_cast<double>(x));
  for (float x : logits) sum += std::exp(x - max);
  std::vector<double> out;
  for (float x : logits) out.push_back(x - max - std::log(sum));
  return out;
}

}  // namespace

std::vector<std::vector<float>> TeacherForcedLogits(LlamaModel& model, KvPool& kv,
                                                    const std::vector<int>& ids, int prompt_len,
                                                    int chunk) {
  const int n = static_cast<int>(ids.size()), bs = kv.block_size();
  std::vector<int> block_table;
  for (int b = 0; b * bs < n; ++b) block_table.push_back(kv.num_blocks() - 1 - b);
  const int vocab = model.config().vocab_size;
  std::vector<std::vector<float>> logits;
  for (int start = 0; start < n;) {
    const int rows = start < prompt_len ? std::min(chunk, prompt_len - start) : 1;
    std::vector<int> tokens(ids.begin() + start, ids.begin() + start + rows);
    std::vector<int> positions, logit_rows;
    std::vector<int64_t> slots;
    for (int r = 0; r < rows; ++r) {
      const int pos = start + r;
      positions.push_back(pos);
      slots.push_back(static_cast<int64_t>(block_table[pos / bs]) * bs + pos % bs);
      logit_rows.push_back(r);
    }
    const AttentionSequence seqs[] = {{0, rows, start, block_table.data()}};
    const float* out = model.Forward({tokens, positions, slots, seqs, logit_rows}, kv);
    for (int r = 0; r < rows; ++r) logits.emplace_back(out + r * vocab, out + (r + 1) * vocab);
    start += rows;
  }
  return logits;
}

int Argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

void Agreement::Add(const std::vector<float>& reference, const std::vector<float>& other) {
  const std::vector<double> lp = LogSoftmax(reference), lq = LogSoftmax(other);
  for (size_t i = 0; i < lp.size(); ++i) kl_sum_ += std::exp(lp[i]) * (lp[i] - lq[i]);
  agree_ += Argmax(reference) == Argmax(other);
  ++positions_;
}

}  // namespace pagoda::testing
