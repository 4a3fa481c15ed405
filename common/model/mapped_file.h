// A whole file mapped read-only (MAP_PRIVATE), unmapped when destroyed. Move-less: hold it by
// pointer.
#ifndef PAGODA_COMMON_MODEL_MAPPED_FILE_H_
#define PAGODA_COMMON_MODEL_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace pagoda {

class MappedFile {
 public:
  // Maps `size` bytes of the open file `fd` (which stays the caller's); `path` names it in
  // errors.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(int fd, const std::string& path,
                                                          size_t size);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  const uint8_t* const data_;
  const size_t size_;
};

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_MAPPED_FILE_H_
