#include "worker/linear.h"

namespace pagoda {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

Linear::Linear(const dnnl::engine& engine, const float* weight, int in, int out,
               const std::vector<float>& bias, bool accumulate)
    : in_(in), out_(out), engine_(engine) {
  const memory::dim m = DNNL_RUNTIME_DIM_VAL;
  const memory::desc src_md({m, in}, dt::f32, tag::ab);
  const memory::desc any_weight_md({in, out}, dt::f32, tag::any);
  const memory::desc dst_md({m, out}, dt::f32, tag::ab);
  const memory::desc bias_md =
      bias.empty() ? memory::desc() : memory::desc({1, out}, dt::f32, tag::ab);

  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, any_weight_md, bias_md, dst_md),
                                        attr, engine);
  primitive_ = dnnl::matmul(pd);

  // The checkpoint's (out, in) row-major matrix is the (in, out) matrix in layout `ba`.
  const memory::desc user_md({in, out}, dt::f32, tag::ba);
  memory user(user_md, engine, const_cast<float*>(weight));
  weight_ = memory(pd.weights_desc(), engine);
  dnnl::stream stream(engine);
  dnnl::reorder(user, weight_).execute(stream, user, weight_);
  if (!bias.empty()) {
    bias_ = memory(bias_md, engine);
    std::copy(bias.begin(), bias.end(), static_cast<float*>(bias_.get_data_handle()));
  }
  stream.wait();
}

void Linear::Run(dnnl::stream& stream, const float* x, int rows, float* y) const {
  memory src({{rows, in_}, dt::f32, tag::ab}, engine_, const_cast<float*>(x));
  memory dst({{rows, out_}, dt::f32, tag::ab}, engine_, y);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weight_}, {DNNL_ARG_DST, dst}};
  if (bias_) args.emplace(DNNL_ARG_BIAS, bias_);
  primitive_.execute(stream, args);
}

}  // namespace pagoda
