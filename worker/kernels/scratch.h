// Per-thread scratch for the kernels, grown as needed and never shrunk. It lives in a library of
// its own, built for the baseline ISA: a std::vector instantiated in a kernel source would be a
// weak symbol built for that source's ISA, which the linker could keep for the whole program
// (tests/worker/kernel_symbols_test.sh).
#ifndef PAGODA_WORKER_KERNELS_SCRATCH_H_
#define PAGODA_WORKER_KERNELS_SCRATCH_H_

#include <cstddef>

namespace pagoda {

// At least `bytes` bytes, 64-byte aligned, owned by the calling thread; valid until its next
// call on this thread.
void* KernelScratch(size_t bytes);

}  // namespace pagoda

#endif  // PAGODA_WORKER_KERNELS_SCRATCH_H_
