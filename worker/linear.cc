#include "worker/linear.h"

#include <algorithm>
#include <cstring>

#include "worker/simd.h"

namespace pagoda {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

float Dot(const float* a, const float* b, int n) {
  int i = 0;
  float sum = 0.0f;
#if defined(__AVX2__) && defined(__FMA__)
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  sum = HorizontalSum(_mm256_add_ps(acc0, acc1));
#endif
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

Linear::Linear(const dnnl::engine& engine, const float* weight, int in, int out,
               const std::vector<float>& bias, bool accumulate)
    : in_(in),
      out_(out),
      accumulate_(accumulate),
      engine_(engine),
      weight_(static_cast<size_t>(in) * out),
      bias_(bias) {
  std::memcpy(weight_.data(), weight, weight_.size() * sizeof(float));
  const memory::dim m = DNNL_RUNTIME_DIM_VAL;
  const memory::desc src_md({m, in}, dt::f32, tag::ab);
  const memory::desc weight_md({in, out}, dt::f32, tag::ba);
  const memory::desc dst_md({m, out}, dt::f32, tag::ab);
  const memory::desc bias_md =
      bias.empty() ? memory::desc() : memory::desc({1, out}, dt::f32, tag::ab);
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, weight_md, bias_md, dst_md),
                                        attr, engine);
  primitive_ = dnnl::matmul(pd);
  weight_mem_ = memory(weight_md, engine, weight_.data());
  if (!bias.empty()) bias_mem_ = memory(bias_md, engine, bias_.data());
}

void Linear::Gemv(const float* x, int rows, float* y) const {
#pragma omp parallel for schedule(static)
  for (int o = 0; o < out_; ++o) {
    const float* w = weight_.data() + static_cast<size_t>(o) * in_;
    const float b = bias_.empty() ? 0.0f : bias_[o];
    for (int r = 0; r < rows; ++r) {
      const float v = Dot(w, x + static_cast<size_t>(r) * in_, in_) + b;
      float& dst = y[static_cast<size_t>(r) * out_ + o];
      dst = accumulate_ ? dst + v : v;
    }
  }
}

void Linear::Run(dnnl::stream& stream, const float* x, int rows, float* y) const {
  if (rows < kMinGemmRows) {
    Gemv(x, rows, y);
    return;
  }
  memory src({{rows, in_}, dt::f32, tag::ab}, engine_, const_cast<float*>(x));
  memory dst({{rows, out_}, dt::f32, tag::ab}, engine_, y);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weight_mem_}, {DNNL_ARG_DST, dst}};
  if (bias_mem_) args.emplace(DNNL_ARG_BIAS, bias_mem_);
  primitive_.execute(stream, args);
}

}  // namespace pagoda
