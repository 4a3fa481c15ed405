// Command-line parsing shared by the executables: DESIGN spells flags with dashes
// (--worker-port), Abseil names them with underscores; both spellings are accepted.
#ifndef PAGODA_COMMON_COMMAND_LINE_H_
#define PAGODA_COMMON_COMMAND_LINE_H_

#include <string>
#include <vector>

namespace pagoda {

// Parses Abseil flags from argv after rewriting "--a-b=..." as "--a_b=...". Returns the
// positional arguments (argv[0] first).
std::vector<std::string> ParseCommandLine(int argc, char** argv);

}  // namespace pagoda

#endif  // PAGODA_COMMON_COMMAND_LINE_H_
