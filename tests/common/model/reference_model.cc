#include "tests/common/model/reference_model.h"

#include <algorithm>
#include <cmath>

namespace pagoda::testing {
namespace {

using Vec = std::vector<double>;

// y = W x + b for W (rows, cols) row-major.
Vec MatVec(const std::vector<float>& w, const std::vector<float>& b, const Vec& x, int rows) {
  const size_t cols = x.size();
  Vec y(rows);
  for (int r = 0; r < rows; ++r) {
    double s = b.empty() ? 0.0 : b[r];
    for (size_t k = 0; k < cols; ++k) s += static_cast<double>(w[r * cols + k]) * x[k];
    y[r] = s;
  }
  return y;
}

Vec RmsNorm(const double* x, const std::vector<float>& w, int n, double eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const double scale = 1.0 / std::sqrt(ss / n + eps);
  Vec out(n);
  for (int i = 0; i < n; ++i) out[i] = w[i] * x[i] * scale;
  return out;
}

}  // namespace

// transformers' _compute_default_rope_parameters, _compute_linear_scaling_rope_parameters,
// _compute_llama3_parameters and _compute_yarn_parameters, in double.
double ReferenceRopeFrequency(const ModelConfig& c, int i) {
  double freq = 1.0 / std::pow(static_cast<double>(c.rope_theta), 2.0 * i / c.head_dim);
  if (!c.rope_freq_factors.empty()) freq /= c.rope_freq_factors[i];
  const RopeScaling& s = c.rope_scaling;
  const double factor = s.factor;
  const double original = s.original_max_position;
  switch (s.type) {
    case RopeScalingType::kNone:
      return freq;
    case RopeScalingType::kLinear:
      return freq / factor;
    case RopeScalingType::kLlama3: {
      const double wavelen = 2 * M_PI / freq;
      const double low = original / s.low_freq_factor;
      const double high = original / s.high_freq_factor;
      if (wavelen > low) return freq / factor;
      if (wavelen < high) return freq;
      const double smooth =
          (original / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      return (1 - smooth) * freq / factor + smooth * freq;
    }
    case RopeScalingType::kYarn: {
      const int dim = c.head_dim;
      auto find_correction_dim = [&](double num_rotations) {
        return dim * std::log(original / (num_rotations * 2 * M_PI)) /
               (2 * std::log(static_cast<double>(c.rope_theta)));
      };
      double low = std::floor(find_correction_dim(s.beta_fast));
      double high = std::ceil(find_correction_dim(s.beta_slow));
      low = std::max(low, 0.0);
      high = std::min(high, dim - 1.0);
      if (low == high) high += 0.001;
      const double linear = (i - low) / (high - low);
      const double ramp = linear < 0 ? 0 : linear > 1 ? 1 : linear;
      const double extrapolation_factor = 1 - ramp;
      const double inv_freq_extrapolation = freq;
      const double inv_freq_interpolation = freq / factor;
      return inv_freq_interpolation * (1 - extrapolation_factor) +
             inv_freq_extrapolation * extrapolation_factor;
    }
  }
  return freq;
}

double ReferenceRopeAttentionFactor(const ModelConfig& c) {
  if (c.rope_scaling.type != RopeScalingType::kYarn) return 1;
  if (c.rope_scaling.attention_factor > 0) return c.rope_scaling.attention_factor;
  return 0.1 * std::log(c.rope_scaling.factor) + 1.0;
}

namespace {

void Rope(const ModelConfig& c, int pos, double* head) {
  const int half = c.head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double angle = pos * ReferenceRopeFrequency(c, i);
    const double m = ReferenceRopeAttentionFactor(c);
    const bool interleaved = c.rope_style == RopeStyle::kInterleaved;
    double& a = interleaved ? head[2 * i] : head[i];
    double& b = interleaved ? head[2 * i + 1] : head[i + half];
    const double x0 = a, x1 = b;
    a = m * (x0 * std::cos(angle) - x1 * std::sin(angle));
    b = m * (x0 * std::sin(angle) + x1 * std::cos(angle));
  }
}

}  // namespace

std::vector<double> ReferenceLogits(const ModelWeights& w, const std::vector<int>& tokens) {
  const ModelConfig& c = w.config;
  const int dim = c.dim, hd = c.head_dim, heads = c.num_heads, kv_heads = c.num_kv_heads;
  const int n = static_cast<int>(tokens.size());
  std::vector<Vec> x(n, Vec(dim));
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < dim; ++i)
      x[t][i] = w.token_embedding[static_cast<size_t>(tokens[t]) * dim + i];
  }
  for (const LayerWeights& l : w.layers) {
    std::vector<Vec> q(n), k(n), v(n);
    for (int t = 0; t < n; ++t) {
      const Vec h = RmsNorm(x[t].data(), l.attn_norm, dim, c.rms_norm_eps);
      q[t] = MatVec(l.wq, l.bq, h, heads * hd);
      k[t] = MatVec(l.wk, l.bk, h, kv_heads * hd);
      v[t] = MatVec(l.wv, l.bv, h, kv_heads * hd);
      for (int hh = 0; hh < heads; ++hh) {
        if (c.qk_norm) {
          const Vec normed = RmsNorm(&q[t][hh * hd], l.q_norm, hd, c.rms_norm_eps);
          std::copy(normed.begin(), normed.end(), q[t].begin() + hh * hd);
        }
        Rope(c, t, &q[t][hh * hd]);
      }
      for (int hh = 0; hh < kv_heads; ++hh) {
        if (c.qk_norm) {
          const Vec normed = RmsNorm(&k[t][hh * hd], l.k_norm, hd, c.rms_norm_eps);
          std::copy(normed.begin(), normed.end(), k[t].begin() + hh * hd);
        }
        Rope(c, t, &k[t][hh * hd]);
      }
    }
    for (int t = 0; t < n; ++t) {
      Vec att(heads * hd, 0.0);
      for (int hh = 0; hh < heads; ++hh) {
        const int g = hh / (heads / kv_heads);  // repeat_kv
        Vec scores(t + 1);
        double max = -1e300;
        for (int s = 0; s <= t; ++s) {
          double dot = 0;
          for (int i = 0; i < hd; ++i) dot += q[t][hh * hd + i] * k[s][g * hd + i];
          scores[s] = dot / std::sqrt(static_cast<double>(hd));
          max = std::max(max, scores[s]);
        }
        double sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - max));
        for (int s = 0; s <= t; ++s) {
          for (int i = 0; i < hd; ++i) att[hh * hd + i] += scores[s] / sum * v[s][g * hd + i];
        }
      }
      const Vec o = MatVec(l.wo, {}, att, dim);
      for (int i = 0; i < dim; ++i) x[t][i] += o[i];
      const Vec h = RmsNorm(x[t].data(), l.ffn_norm, dim, c.rms_norm_eps);
      const Vec gate = MatVec(l.w_gate, {}, h, c.hidden_dim);
      Vec up = MatVec(l.w_up, {}, h, c.hidden_dim);
      for (int i = 0; i < c.hidden_dim; ++i) up[i] *= gate[i] / (1 + std::exp(-gate[i]));
      const Vec down = MatVec(l.w_down, {}, up, dim);
      for (int i = 0; i < dim; ++i) x[t][i] += down[i];
    }
  }
  const std::vector<float>& cls = c.tied_embeddings ? w.token_embedding : w.classifier;
  std::vector<double> logits;
  for (int t = 0; t < n; ++t) {
    const Vec h = RmsNorm(x[t].data(), w.final_norm, dim, c.rms_norm_eps);
    const Vec row = MatVec(cls, {}, h, c.vocab_size);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  return logits;
}

}  // namespace pagoda::testing
