// The experiment that chose worker/linear.h's kernel (docs/BENCHMARKS.md §5); not built by
// CMake, and removed from the tree in the commit after the one that adds it. Build from the
// repository root, against oneDNN 2.6 (apt install libdnnl-dev ocl-icd-opencl-dev):
//   for i in avx2:x86-64-v3 avx512:x86-64-v4; do for f in gemm_kernel kernel_table attention_kernel
//   do g++ -O3 -std=c++20 -march=${i#*:} -DPAGODA_ISA=${i%:*} -I. -c worker/kernels/$f.cc \
//     -o /tmp/${f}_${i%:*}.o; done; done
//   g++ -O3 -std=c++20 -march=x86-64-v3 -fopenmp -I. tools/experiments/matmul_experiment.cc \
//     /tmp/*_avx2.o /tmp/*_avx512.o -ldnnl -o /tmp/matmul_experiment
//   OMP_NUM_THREADS=2 /tmp/matmul_experiment MODE K N ROWS
// MODE: ba   oneDNN matmul, weights in the checkpoint's (out, in) layout, run-time M (gemm:jit,
//            which packs the weights on every call);
//       blk  oneDNN matmul, weights reordered once into the layout it picks (format_tag::any),
//            M fixed at creation (brgemm; with a run-time M oneDNN 2.6 falls back to ref:any);
//       avx2, avx512  our kernel over weights packed into panels.
// Weights cycle through copies totalling 400 MB, so they stream from memory as in a model.
#include <omp.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <memory>
#include <string>
#include <algorithm>
#include "oneapi/dnnl/dnnl.hpp"
#include "worker/kernels/kernels.h"
namespace pagoda { namespace avx2 { const Kernels& GetKernels(); }
namespace avx512 { const Kernels& GetKernels(); } }
using namespace dnnl; using tag = memory::format_tag; using dt = memory::data_type;
using namespace pagoda;
int main(int argc, char** argv) {
  std::string mode = argv[1]; int K = atoi(argv[2]), N = atoi(argv[3]), M = atoi(argv[4]);
  engine eng(engine::kind::cpu, 0); stream s(eng);
  size_t wfl = (size_t)K * N;
  int copies = std::max<size_t>(2, (400ull << 20) / (wfl * 4));
  std::vector<float> x((size_t)M * K, 0.01f), y((size_t)M * N);
  double secs = 0; int iters = 0;
  auto time = [&](auto&& fn) {
    for (int w = 0; w < copies; ++w) fn(w);  // warm
    auto t0 = std::chrono::steady_clock::now();
    int it = 0;
    do { for (int w = 0; w < copies; ++w) fn(w); it += copies; }
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 1.5);
    secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); iters = it;
  };
  if (mode == "ba" || mode == "blk") {
    memory::dim m = mode == "ba" ? DNNL_RUNTIME_DIM_VAL : M;
    memory::desc src({m, K}, dt::f32, tag::ab), dst({m, N}, dt::f32, tag::ab);
    memory::desc wmd({K, N}, dt::f32, mode == "ba" ? tag::ba : tag::any);
    matmul::primitive_desc pd(matmul::desc(src, wmd, dst), eng);
    fprintf(stderr, "impl %s\n", pd.impl_info_str());
    matmul prim(pd);
    std::vector<memory> ws;
    for (int w = 0; w < copies; ++w) { ws.emplace_back(pd.weights_desc(), eng); memset(ws.back().get_data_handle(), 0, pd.weights_desc().get_size()); }
    memory sm({{M, K}, dt::f32, tag::ab}, eng, x.data()), dm({{M, N}, dt::f32, tag::ab}, eng, y.data());
    time([&](int w) { prim.execute(s, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, ws[w]}, {DNNL_ARG_DST, dm}}); s.wait(); });
  } else {
    const int pw = mode == "avx2" ? 16 : 32;
    PackedShape sh{K, N, pw, (K + 15) / 16 * 16};
    const Kernels& kn = mode == "avx2" ? avx2::GetKernels() : avx512::GetKernels();
    std::vector<float> px((size_t)kn.row_tiles(M) * kn.row_tile * K);
    std::vector<std::unique_ptr<float[]>> ws;
    for (int w = 0; w < copies; ++w) { ws.emplace_back(new float[sh.num_floats()]); memset(ws.back().get(), 0, sh.num_floats() * 4); }
    time([&](int w) {
      const int np = sh.num_panels();
#pragma omp parallel
      { int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int nti = kn.row_tiles(M);
        kn.pack_rows(x.data(), M, K, nti * t / nt, nti * (t + 1) / nt, px.data());
#pragma omp barrier
        kn.gemm(px.data(), M, ws[w].get(), sh, np * t / nt, np * (t + 1) / nt, nullptr, false, y.data()); }
    });
  }
  double gf = 2.0 * M * K * N * iters / secs / 1e9;
  printf("%s K=%d N=%d M=%d  %.1f GFLOP/s  %.3f ms/call  %.1f GB/s weights\n", mode.c_str(), K, N, M, gf, secs / iters * 1e3, wfl * 4.0 * iters / secs / 1e9);
}
