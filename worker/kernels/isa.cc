#include "worker/kernels/isa.h"

#include <atomic>
#include <cstdlib>
#include <string_view>

#include "glog/logging.h"

namespace pagoda {
namespace {

bool CpuHasAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

bool CpuHasAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

// The AVX-512 table, with AVX2's int8, int4 and Q6_K GEMMs where the CPU lacks VNNI (AVX-512 before
// Cascade Lake and Zen 4): those kernels of the AVX-512 table are built with VNNI instructions;
// and without its bf16-compute GEMM where the CPU lacks AVX512_BF16 (before Cooper Lake and
// Zen 4), which bf16 weights then do without (widened to f32, as on AVX2), and whose int8 K/V
// then decode through AVX2's int16 kernel.
const Kernels* Avx512Kernels() {
  const bool vnni = __builtin_cpu_supports("avx512vnni");
  const bool bf16 = __builtin_cpu_supports("avx512bf16");
  if (vnni && bf16) return &avx512::GetKernels();
  static const Kernels patched = [&] {
    Kernels k = avx512::GetKernels();
    if (!bf16) {
      k.name = "avx512_no_bf16";
      k.bf16_row_tile = 0;
      k.pack_rows_bf16 = nullptr;
      k.gemm_bf16dot = nullptr;
      k.attention_prefill_bf16dot = nullptr;
      k.attention_decode_bf16dot = nullptr;
      k.attention_decode_int8 = avx2::GetKernels().attention_decode_int8;
    }
    if (!vnni) {
      const Kernels& a = avx2::GetKernels();
      k.name = bf16 ? "avx512_int8_avx2" : "avx512_int8_avx2_no_bf16";  // test names too
      k.int8_panel_width = a.int8_panel_width;
      k.int8_row_tile = a.int8_row_tile;
      k.int8_weights_offset = a.int8_weights_offset;
      k.quantize_rows = a.quantize_rows;
      k.gemm_int8 = a.gemm_int8;
      k.gemm_int4 = a.gemm_int4;
      k.gemm_q6k = a.gemm_q6k;
    }
    return k;
  }();
  return &patched;
}

const Kernels* Choose() {
  const bool avx512 = CpuHasAvx512();
  const Kernels* chosen = avx512 ? Avx512Kernels() : &avx2::GetKernels();
  const char* env = std::getenv("PAGODA_ISA");
  const std::string_view wanted = env ? env : "";
  if (wanted == "avx2") {
    chosen = &avx2::GetKernels();
  } else if (wanted == "avx512" && !avx512) {
    LOG(WARNING) << "PAGODA_ISA=avx512 but this CPU lacks AVX-512; using avx2";
  } else if (!wanted.empty() && wanted != "avx512") {
    LOG(WARNING) << "PAGODA_ISA=" << wanted << " is not avx2 or avx512; ignored";
  }
  // The build's baseline (-march=x86-64-v3) already requires AVX2 + FMA.
  CHECK(CpuHasAvx2()) << "this CPU lacks AVX2 + FMA";
  LOG(INFO) << "kernels: " << chosen->name << " (CPU has AVX-512: " << (avx512 ? "yes" : "no")
            << (env ? std::string(", PAGODA_ISA=") + env : std::string()) << ")";
  return chosen;
}

std::atomic<const Kernels*>& Active() {
  static std::atomic<const Kernels*> active{Choose()};
  return active;
}

}  // namespace

const Kernels& ActiveKernels() { return *Active().load(std::memory_order_acquire); }

std::vector<const Kernels*> SupportedKernels() {
  std::vector<const Kernels*> out = {&avx2::GetKernels()};
  if (CpuHasAvx512()) out.push_back(Avx512Kernels());
  return out;
}

const Kernels* SetActiveKernelsForTesting(const Kernels* kernels) {
  return Active().exchange(kernels, std::memory_order_acq_rel);
}

}  // namespace pagoda
