#include "worker/huge_page_buffer.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "glog/logging.h"

namespace pagoda {

HugePageBuffer::HugePageBuffer(size_t num_floats) : size_(num_floats) {
  if (num_floats == 0) return;
  constexpr size_t kPage = 4 << 10, kHugePage = 2 << 20;
  // Rounded to 4 KB, not to 2 MB: a model has ~100 matrices and 44 KV buffers, many far below
  // 2 MB (a 1B model's k and v projections are 0.3 MB in int4), and faulting each one's
  // rounding cost 180 MiB. The start is aligned to 2 MB, so every whole 2 MB of the buffer
  // can be a huge page and only the tail is in 4 KB pages.
  bytes_ = (num_floats * sizeof(float) + kPage - 1) / kPage * kPage;
  const size_t reserved = bytes_ >= kHugePage ? bytes_ + kHugePage : bytes_;
  void* p = mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  PCHECK(p != MAP_FAILED) << "mmap of " << reserved << " bytes";
  auto* start = static_cast<char*>(p);
  if (reserved > bytes_) {  // give back what lies before the 2 MB boundary and after the end
    const uintptr_t address = reinterpret_cast<uintptr_t>(p);
    char* aligned = start + ((kHugePage - address % kHugePage) % kHugePage);
    if (aligned > start) munmap(start, aligned - start);
    char* const end = aligned + bytes_;
    if (start + reserved > end) munmap(end, start + reserved - end);
    start = aligned;
  }
  // Best effort: without THP the buffer still works, on 4 KB pages.
  madvise(start, bytes_, MADV_HUGEPAGE);
  // Fault every page in now: a first touch mid-step (with THP compaction) costs milliseconds.
  std::memset(start, 0, bytes_);
  data_ = reinterpret_cast<float*>(start);
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
