#include "worker/kernels/scratch.h"

#include <vector>

namespace pagoda {

void* KernelScratch(size_t bytes) {
  struct alignas(64) Line {
    unsigned char bytes[64];
  };
  thread_local std::vector<Line> scratch;
  const size_t lines = (bytes + sizeof(Line) - 1) / sizeof(Line);
  if (scratch.size() < lines) scratch.resize(lines);
  return scratch.data();
}

}  // namespace pagoda
