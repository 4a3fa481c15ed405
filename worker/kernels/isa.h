// Which kernel table runs: chosen once, at the first call, from CPUID (AVX-512 F/BW/DQ/VL
// where the CPU and OS have them, else AVX2 + FMA), or from $PAGODA_ISA (avx2 | avx512) to
// test both paths on one machine: PAGODA_ISA=avx2 runs a whole model as an AVX2 CPU would.
// Thread-safe.
#ifndef PAGODA_WORKER_KERNELS_ISA_H_
#define PAGODA_WORKER_KERNELS_ISA_H_

#include <vector>

#include "worker/kernels/kernels.h"

namespace pagoda {

// The table in use. Logs the choice the first time.
const Kernels& ActiveKernels();

// Every table this CPU can run, widest last ("avx2", "avx512").
std::vector<const Kernels*> SupportedKernels();

// Makes `kernels` the active table (tests); returns the previous one. Weights packed for one
// table's panel width must not be used with another's: set it before building a model.
const Kernels* SetActiveKernelsForTesting(const Kernels* kernels);

}  // namespace pagoda

#endif  // PAGODA_WORKER_KERNELS_ISA_H_
