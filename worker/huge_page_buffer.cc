#include "worker/huge_page_buffer.h"

#include <sys/mman.h>

#include <cstring>
#include <utility>

#include "glog/logging.h"

namespace pagoda {

HugePageBuffer::HugePageBuffer(size_t num_floats) : size_(num_floats) {
  if (num_floats == 0) return;
  constexpr size_t kHugePage = 2 << 20;
  bytes_ = (num_floats * sizeof(float) + kHugePage - 1) / kHugePage * kHugePage;
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  PCHECK(p != MAP_FAILED) << "mmap of " << bytes_ << " bytes";
  // Best effort: without THP the buffer still works, on 4 KB pages.
  madvise(p, bytes_, MADV_HUGEPAGE);
  // Fault every page in now: a first touch mid-step (with THP compaction) costs milliseconds.
  std::memset(p, 0, bytes_);
  data_ = static_cast<float*>(p);
}

HugePageBuffer::~HugePageBuffer() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      bytes_(std::exchange(other.bytes_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, bytes_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

}  // namespace pagoda
