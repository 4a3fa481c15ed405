// A zero-filled float buffer backed by anonymous memory with transparent huge pages requested
// (madvise): the KV pool and weights are read at random 4 KB offsets every step, and 2 MB pages
// keep those reads from missing the TLB. Every page is faulted in at construction, so steps never
// pay for a first touch. Move-only; owns its mapping.
#ifndef PAGODA_WORKER_HUGE_PAGE_BUFFER_H_
#define PAGODA_WORKER_HUGE_PAGE_BUFFER_H_

#include <cstddef>

namespace pagoda {

class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  explicit HugePageBuffer(size_t num_floats);
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  float* data_ = nullptr;
  size_t size_ = 0;   // floats
  size_t bytes_ = 0;  // mapped
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_HUGE_PAGE_BUFFER_H_
