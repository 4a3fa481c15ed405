// What a KV cache dtype costs in accuracy at long context (issue 42): one random token sequence
// of `depth` tokens is prefilled in chunks through a random-weight model of a named shape
// (pagoda-make-model's, made in memory, or its file given as --model), once per KV dtype, in step,
// and the logits of every position from
// --from on are compared with the f32 cache's: their Pearson correlation, KL(p_f32 ‖ p_kv) and
// top-1 agreement. Every position reads its whole context back from the pool, as in serving.
//   kv_accuracy [--shape=1B | --model=PATH] [--depth=4096] [--from=2048] [--chunk=256]
//   [--kv_dtypes=bf16,int8]
//               [--weight_dtype=f32] [--seed=1]
// Prints one line per dtype; the f32 weights of the 1B shape take ~4.4 GB. A random model's
// softmaxes are close to one-hot, so there its KL and top-1 say little: the correlation is
// the figure to read.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "common/dtype_flags.h"
#include "common/model/model_loader.h"
#include "common/model/random_weights.h"
#include "worker/kv_pool.h"
#include "worker/llama_model.h"
#include "worker/worker_options.h"

ABSL_FLAG(std::string, shape, "1B", "the model shape (pagoda-make-model's --shape)");
ABSL_FLAG(std::string, model, "", "a model file or directory instead (its context >= --depth)");
ABSL_FLAG(int, depth, 4096, "tokens of context");
ABSL_FLAG(int, from, 2048, "the first position whose logits are compared");
ABSL_FLAG(int, chunk, 256, "prefill chunk, in tokens");
ABSL_FLAG(std::string, kv_dtypes, "bf16,int8", "the KV dtypes compared with f32");
ABSL_FLAG(std::string, weight_dtype, "f32", "the weights' dtype (the same for every run)");
ABSL_FLAG(uint64_t, seed, 1, "of the weights and the tokens");

namespace pagoda {
namespace {

constexpr int kBlockSize = 16;

// Sums over positions of one dtype's logits against f32's.
struct Agreement {
  double corr_sum = 0, corr_min = 1, kl_sum = 0;
  int agree = 0, positions = 0;

  void Add(const float* ref, const float* other, int n) {
    double mr = 0, mo = 0;
    for (int i = 0; i < n; ++i) mr += ref[i], mo += other[i];
    mr /= n;
    mo /= n;
    double srr = 0, soo = 0, sro = 0;
    for (int i = 0; i < n; ++i) {
      srr += (ref[i] - mr) * (ref[i] - mr);
      soo += (other[i] - mo) * (other[i] - mo);
      sro += (ref[i] - mr) * (other[i] - mo);
    }
    const double corr = sro / std::sqrt(srr * soo);
    corr_sum += corr;
    corr_min = std::min(corr_min, corr);
    // KL(p ‖ q) of the softmaxes.
    const double max_r = *std::max_element(ref, ref + n),
                 max_o = *std::max_element(other, other + n);
    double zr = 0, zo = 0;
    for (int i = 0; i < n; ++i) zr += std::exp(ref[i] - max_r), zo += std::exp(other[i] - max_o);
    const double lzr = std::log(zr) + max_r, lzo = std::log(zo) + max_o;
    double kl = 0;
    for (int i = 0; i < n; ++i) {
      const double lp = ref[i] - lzr, lq = other[i] - lzo;
      kl += std::exp(lp) * (lp - lq);
    }
    kl_sum += std::max(kl, 0.0);  // ≥ 0; a near one-hot softmax can round below
    agree += std::max_element(ref, ref + n) - ref == std::max_element(other, other + n) - other;
    ++positions;
  }
};

int Run() {
  ModelConfig config;
  if (!NamedModelConfig(absl::GetFlag(FLAGS_shape), &config)) {
    std::fprintf(stderr, "error: unknown --shape\n");
    return 2;
  }
  const int depth = absl::GetFlag(FLAGS_depth), from = absl::GetFlag(FLAGS_from);
  const int chunk = absl::GetFlag(FLAGS_chunk);
  if (depth < 1 || from < 0 || from >= depth || chunk < 1) {
    std::fprintf(stderr, "error: need 0 <= --from < --depth and --chunk >= 1\n");
    return 2;
  }
  std::vector<KvDtype> dtypes;
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_kv_dtypes), ',')) {
    absl::StatusOr<std::optional<KvDtype>> d = ParseKvDtypeFlag("kv_dtypes", name);
    if (!d.ok() || !d->has_value()) {
      std::fprintf(stderr, "error: --kv_dtypes: %s\n", std::string(name).c_str());
      return 2;
    }
    dtypes.push_back(**d);
  }
  absl::StatusOr<std::optional<WeightDtype>> weight_dtype =
      ParseWeightDtypeFlag("weight_dtype", absl::GetFlag(FLAGS_weight_dtype));
  if (!weight_dtype.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(weight_dtype.status().message()).c_str());
    return 2;
  }
  config.max_seq_len = std::max(config.max_seq_len, depth);
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  const WeightDtype weights = weight_dtype->value_or(WeightDtype::kF32);
  absl::StatusOr<std::unique_ptr<LlamaModel>> model;
  if (const std::string path = absl::GetFlag(FLAGS_model); !path.empty()) {
    absl::StatusOr<std::unique_ptr<WeightSource>> source = OpenWeightSource(path);
    if (!source.ok()) {
      std::fprintf(stderr, "error: %s\n", std::string(source.status().message()).c_str());
      return 2;
    }
    config = (*source)->config();
    model = LlamaModel::Create(**source, chunk, chunk, [weights](GgmlType) { return weights; });
  } else {
    model = LlamaModel::Create(RandomModelWeights(config, seed), chunk, chunk, weights);
  }
  if (model.ok() && config.max_seq_len < depth) {
    std::fprintf(stderr, "error: the model's context is %d < --depth\n", config.max_seq_len);
    return 2;
  }
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int> id(3, config.vocab_size - 1);
  std::vector<int> ids = {1};
  while (static_cast<int>(ids.size()) < depth) ids.push_back(id(rng));

  const int num_blocks = (depth + kBlockSize - 1) / kBlockSize;
  std::vector<int> block_table(num_blocks);
  for (int b = 0; b < num_blocks; ++b) block_table[b] = num_blocks - 1 - b;  // scattered
  std::vector<std::unique_ptr<KvPool>> pools;
  pools.push_back(std::make_unique<KvPool>(config, num_blocks, kBlockSize, KvDtype::kF32));
  for (KvDtype d : dtypes) {
    pools.push_back(std::make_unique<KvPool>(config, num_blocks, kBlockSize, d));
  }
  const int vocab = config.vocab_size;
  std::vector<float> reference;
  std::vector<Agreement> agreement(dtypes.size());
  for (int start = 0; start < depth; start += chunk) {
    const int rows = std::min(chunk, depth - start);
    std::vector<int> tokens(ids.begin() + start, ids.begin() + start + rows);
    std::vector<int> positions, logit_rows;
    std::vector<int64_t> slots;
    for (int r = 0; r < rows; ++r) {
      positions.push_back(start + r);
      slots.push_back(static_cast<int64_t>(block_table[(start + r) / kBlockSize]) * kBlockSize +
                      (start + r) % kBlockSize);
      if (start + r >= from) logit_rows.push_back(r);
    }
    const AttentionSequence seqs[] = {{0, rows, start, block_table.data()}};
    for (size_t p = 0; p < pools.size(); ++p) {
      const float* logits =
          (*model)->Forward({tokens, positions, slots, seqs, logit_rows}, *pools[p]);
      if (p == 0) {
        reference.assign(logits, logits + logit_rows.size() * vocab);
        continue;
      }
      for (size_t r = 0; r < logit_rows.size(); ++r) {
        agreement[p - 1].Add(&reference[r * vocab], logits + r * vocab, vocab);
      }
    }
    std::fprintf(stderr, "\r%d / %d tokens", start + rows, depth);
  }
  std::fprintf(stderr, "\n");
  for (size_t d = 0; d < dtypes.size(); ++d) {
    const Agreement& a = agreement[d];
    std::printf(
        "%s shape, %s weights, %s KV vs f32 KV, positions %d-%d: logits' correlation mean "
        "%.6f min %.6f, mean KL %.3g nats, top-1 agreement %.2f%%\n",
        absl::GetFlag(FLAGS_model).empty() ? absl::GetFlag(FLAGS_shape).c_str()
                                           : absl::GetFlag(FLAGS_model).c_str(),
        WeightDtypeName(weights), KvDtypeName(dtypes[d]), from, depth - 1, a.corr_sum / a.positions,
        a.corr_min, a.kl_sum / a.positions, 100.0 * a.agree / a.positions);
  }
  return 0;
}

}  // namespace
}  // namespace pagoda

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return pagoda::Run();
}
