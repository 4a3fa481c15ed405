#include "worker/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

namespace pagoda {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// log Σ exp(logits).
float LogSumExp(const float* logits, int n) {
  float max = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i) max = std::max(max, logits[i]);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::exp(logits[i] - max);
  return max + static_cast<float>(std::log(sum));
}

// The first maximum, as llama2.c picks it. Sixteen lanes, each the first maximum of its
// stride, so that the compiler vectorizes the scan (a single running maximum is a chain of
// dependent compares, ~1 element a cycle: 10 µs a sequence at 32k); the lowest index wins a tie
// between lanes.
int ArgMax(const float* v, int n) {
  constexpr int kLanes = 16;
  // Lanes start below every value (a NaN never wins a compare, as in the scalar scan).
  float lane_max[kLanes];
  int lane_at[kLanes];
  std::fill(lane_max, lane_max + kLanes, -std::numeric_limits<float>::infinity());
  std::fill(lane_at, lane_at + kLanes, 0);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const bool more = v[i + l] > lane_max[l];
      lane_max[l] = more ? v[i + l] : lane_max[l];
      lane_at[l] = more ? i + l : lane_at[l];
    }
  }
  int best = 0;
  for (int l = 0; l < kLanes; ++l) {
    const int at = lane_at[l];
    if (v[at] > v[best] || (v[at] == v[best] && at < best)) best = at;
  }
  for (; i < n; ++i) {
    if (v[i] > v[best]) best = i;
  }
  return best;
}

}  // namespace

float CounterUniform(uint64_t seed, uint64_t seq_index, uint64_t position) {
  const uint64_t h = SplitMix64(SplitMix64(SplitMix64(seed) ^ seq_index) ^ position);
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // 24 random bits
}

Sampler::Sampler(int vocab_size)
    : vocab_size_(vocab_size),
      counts_(vocab_size, 0),
      raw_(vocab_size),
      probs_(vocab_size),
      candidates_(vocab_size) {}

int Sampler::VerifyDraft(float* logits, std::span<const int> draft, const SamplingParams& params,
                         int num_prompt_tokens, int seq_index, std::span<const int> stop_ids,
                         std::span<const uint64_t> allowed, int64_t seq_id,
                         std::vector<int>* tokens, std::vector<SampledToken>* out) {
  const int num_draft = static_cast<int>(draft.size());
  // Row i samples after draft token i - 1 was accepted: as decoding one token at a time.
  for (int i = 0; i <= num_draft; ++i) {
    float* row_logits = logits + static_cast<size_t>(i) * vocab_size_;
    const std::span<const int> all(*tokens);
    SampledToken token = Sample(row_logits, params, all.first(num_prompt_tokens),
                                all.subspan(num_prompt_tokens), seq_index, stop_ids, allowed);
    token.seq_id = seq_id;
    tokens->push_back(token.token_id);
    const bool accepted = i < num_draft && token.token_id == draft[i];
    out->push_back(std::move(token));
    if (!accepted) return i;
  }
  return num_draft;  // (not reached: the row past the draft is never accepted)
}

void Sampler::AppendPromptLogprob(const float* logits, int token, int top_n, PromptLogprobs* out) {
  const int n = vocab_size_;
  const float log_z = LogSumExp(logits, n);
  int rank = 1;
  for (int i = 0; i < n; ++i) rank += logits[i] > logits[token];
  out->logprobs.push_back(logits[token] - log_z);
  out->ranks.push_back(rank);
  if (top_n <= 0) return;
  std::iota(candidates_.begin(), candidates_.end(), 0);
  std::partial_sort(candidates_.begin(), candidates_.begin() + top_n, candidates_.end(),
                    [&](int a, int b) { return logits[a] > logits[b]; });
  for (int i = 0; i < top_n; ++i) {
    out->top.push_back({candidates_[i], logits[candidates_[i]] - log_z});
  }
}

void Sampler::ApplyBiasAndMask(float* logits, const SamplingParams& p, size_t num_output,
                               std::span<const int> stop_ids) {
  for (const LogitBias& b : p.logit_bias) logits[b.token_id] += b.bias;
  if (num_output < static_cast<size_t>(p.min_tokens)) {
    for (int t : stop_ids) logits[t] = -std::numeric_limits<float>::infinity();
  }
}

void Sampler::ApplyAllowed(float* logits, std::span<const uint64_t> allowed) const {
  if (allowed.empty()) return;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // By 64-token words: inside a JSON string nearly every word allows all its tokens, between
  // values nearly every word none; only mixed words are read bit by bit.
  for (int base = 0; base < vocab_size_; base += 64) {
    const uint64_t bits = allowed[base >> 6];
    if (bits == ~uint64_t{0}) continue;
    float* w = logits + base;
    const int n = std::min(64, vocab_size_ - base);
    if (bits == 0) {
      std::fill(w, w + n, kNegInf);
      continue;
    }
    if (n < 64) {
      for (int i = 0; i < n; ++i) {
        if (!((bits >> i) & 1)) w[i] = kNegInf;
      }
      continue;
    }
    // Branchless in 32-bit halves, so that the compiler vectorizes it (variable shifts).
    for (int h = 0; h < 2; ++h) {
      const uint32_t half = static_cast<uint32_t>(bits >> (32 * h));
      float* x = w + 32 * h;
      for (int i = 0; i < 32; ++i) x[i] = (half >> i) & 1 ? x[i] : kNegInf;
    }
  }
}

void Sampler::ApplyPenalties(float* logits, const SamplingParams& p, std::span<const int> prompt,
                             std::span<const int> output) {
  if (p.repetition_penalty != 1.0f) {
    // Each distinct token of prompt and output once: positive logits shrink, negative grow.
    for (auto tokens : {prompt, output}) {
      for (int t : tokens) {
        if (counts_[t]++ == 0) {
          logits[t] =
              logits[t] > 0 ? logits[t] / p.repetition_penalty : logits[t] * p.repetition_penalty;
        }
      }
    }
    for (auto tokens : {prompt, output}) {
      for (int t : tokens) counts_[t] = 0;
    }
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    for (int t : output) ++counts_[t];
    for (int t : output) {
      if (counts_[t] > 0) {
        logits[t] -= p.frequency_penalty * counts_[t] + p.presence_penalty;
        counts_[t] = 0;  // apply once per distinct token
      }
    }
  }
}

SampledToken Sampler::Sample(float* logits, const SamplingParams& p, std::span<const int> prompt,
                             std::span<const int> output, int seq_index,
                             std::span<const int> stop_ids, std::span<const uint64_t> allowed) {
  const int n = vocab_size_;
  SampledToken result;
  // Logprobs describe the model's own distribution, before penalties and temperature. The
  // full-vocabulary log-sum-exp is only paid for when they are asked for.
  const float log_z = p.logprobs > 0 ? LogSumExp(logits, n) : 0.0f;
  if (p.logprobs > 0) {
    std::iota(candidates_.begin(), candidates_.end(), 0);
    const int k = std::min(p.logprobs, n);
    std::partial_sort(candidates_.begin(), candidates_.begin() + k, candidates_.end(),
                      [&](int a, int b) { return logits[a] > logits[b]; });
    for (int i = 0; i < k; ++i) {
      result.top_logprobs.push_back({candidates_[i], logits[candidates_[i]] - log_z});
    }
  }
  if (p.logprobs > 0) std::copy(logits, logits + n, raw_.begin());
  ApplyAllowed(logits, allowed);
  ApplyBiasAndMask(logits, p, output.size(), stop_ids);
  // Only min_tokens' mask can take away (-inf) what the grammar allows (a bias is at most
  // -100), so only then is the maximum checked (a pass over the vocabulary).
  const bool stops_masked = output.size() < static_cast<size_t>(p.min_tokens) && !stop_ids.empty();
  if (!allowed.empty() && stops_masked && std::isinf(logits[ArgMax(logits, n)])) {
    // min_tokens or a -100 bias masked every token the grammar allows: the grammar wins, as the
    // output must stay valid; its tokens are equally likely.
    for (int id = 0; id < n; ++id) {
      if ((allowed[id >> 6] >> (id & 63)) & 1) logits[id] = 0.0f;
    }
  }
  ApplyPenalties(logits, p, prompt, output);

  int token;
  if (p.greedy()) {
    token = ArgMax(logits, n);
  } else {
    // Candidates in descending probability, cut by top-k, then softmax, min-p and top-p.
    std::iota(candidates_.begin(), candidates_.end(), 0);
    int m = n;
    auto by_logit = [&](int a, int b) { return logits[a] > logits[b]; };
    if (p.top_k > 0 && p.top_k < n) {
      m = p.top_k;
      std::partial_sort(candidates_.begin(), candidates_.begin() + m, candidates_.end(), by_logit);
    } else if (p.top_p < 1.0f || p.min_p > 0.0f) {
      std::sort(candidates_.begin(), candidates_.end(), by_logit);
    }
    const float max_logit = logits[ArgMax(logits, n)];
    double sum = 0.0;
    for (int i = 0; i < m; ++i) {
      probs_[i] = std::exp((logits[candidates_[i]] - max_logit) / p.temperature);
      sum += probs_[i];
    }
    // After the sort probs_[0] is the largest; without a sort min_p is off and not needed.
    if (p.min_p > 0.0f) {
      const double floor = p.min_p * probs_[0];
      int kept = 0;
      while (kept < m && probs_[kept] >= floor) ++kept;
      m = std::max(kept, 1);
      sum = std::accumulate(probs_.begin(), probs_.begin() + m, 0.0);
    }
    if (p.top_p < 1.0f) {
      double cumulative = 0.0;
      int kept = 0;
      while (kept < m && cumulative < p.top_p * sum) cumulative += probs_[kept++];
      m = std::max(kept, 1);
      sum = cumulative > 0 ? cumulative : probs_[0];
    }
    const double target = CounterUniform(p.seed, seq_index, prompt.size() + output.size()) * sum;
    double cdf = 0.0;
    token = candidates_[m - 1];  // guards against rounding at the top of the CDF
    for (int i = 0; i < m; ++i) {
      cdf += probs_[i];
      if (target < cdf) {
        token = candidates_[i];
        break;
      }
    }
  }
  result.token_id = token;
  if (p.logprobs > 0) result.logprob = raw_[token] - log_z;
  return result;
}

}  // namespace pagoda
