#include "tests/common/model/reference_model.h"

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

// transformers' _compute_llama3_parameters, in double.
double InvFreq(const ModelConfig& c, int i) {
  double freq = 1.0 / std::pow(static_cast<double>(c.rope_theta), 2.0 * i / c.head_dim);
  if (!c.rope_freq_factors.empty()) freq /= c.rope_freq_factors[i];
  if (c.rope_scaling_factor <= 0) return freq;
  const double wavelen = 2 * M_PI / freq;
  const double low = c.rope_original_max_position / c.rope_low_freq_factor;
  const double high = c.rope_original_max_position / c.rope_high_freq_factor;
  if (wavelen > low) return freq / c.rope_scaling_factor;
  if (wavelen < high) return freq;
  const double smooth = (c.rope_original_max_position / wavelen - c.rope_low_freq_factor) /
                        (c.rope_high_freq_factor - c.rope_low_freq_factor);
  return (1 - smooth) * freq / c.rope_scaling_factor + smooth * freq;
}

void Rope(const ModelConfig& c, int pos, double* head) {
  const int half = c.head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double angle = pos * InvFreq(c, i);
    const bool interleaved = c.rope_style == RopeStyle::kInterleaved;
    double& a = interleaved ? head[2 * i] : head[i];
    double& b = interleaved ? head[2 * i + 1] : head[i + half];
    const double x0 = a, x1 = b;
    a = x0 * std::cos(angle) - x1 * std::sin(angle);
    b = x0 * std::sin(angle) + x1 * std::cos(angle);
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
