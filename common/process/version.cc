#include "common/process/version.h"

#include "absl/strings/str_cat.h"
#include "pagoda_version.h"  // generated in the build tree

namespace pagoda {

const char* Version() { return PAGODA_VERSION; }
const char* GitCommit() { return PAGODA_GIT_COMMIT; }

std::string VersionLine(const std::string& program) {
  return absl::StrCat(program, " ", Version(), " (git ", GitCommit(), ")");
}

}  // namespace pagoda
