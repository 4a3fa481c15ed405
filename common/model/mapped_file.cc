#include "common/model/mapped_file.h"

#include <sys/mman.h>

#include "absl/strings/str_cat.h"

namespace pagoda {

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(int fd, const std::string& path,
                                                             size_t size) {
  if (size == 0) return absl::InvalidArgumentError(absl::StrCat(path, ": empty file"));
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) return absl::InternalError(absl::StrCat(path, ": cannot map"));
  return std::unique_ptr<MappedFile>(new MappedFile(static_cast<const uint8_t*>(map), size));
}

MappedFile::~MappedFile() { munmap(const_cast<uint8_t*>(data_), size_); }

}  // namespace pagoda
