// What was built: the project's version (CMake's project(VERSION)) and the git commit of the
// checkout it was built from ("unknown" outside one; "-dirty" with uncommitted changes).
#ifndef PAGODA_COMMON_PROCESS_VERSION_H_
#define PAGODA_COMMON_PROCESS_VERSION_H_

#include <string>

namespace pagoda {

const char* Version();    // "0.9.0"
const char* GitCommit();  // "abc1234", "abc1234-dirty" or "unknown"
// What --version prints: "pagoda-router 0.9.0 (git abc1234)".
std::string VersionLine(const std::string& program);

}  // namespace pagoda

#endif  // PAGODA_COMMON_PROCESS_VERSION_H_
