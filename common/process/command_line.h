// Command-line parsing shared by the executables: DESIGN spells flags with dashes
// (--worker-port), Abseil names them with underscores; both spellings are accepted.
// --help and --version are answered here, with the program's flags grouped and spelled as
// the README writes them (Abseil's own --help lists every linked library's flags by file).
#ifndef PAGODA_COMMON_PROCESS_COMMAND_LINE_H_
#define PAGODA_COMMON_PROCESS_COMMAND_LINE_H_

#include <string>
#include <string_view>
#include <vector>

namespace pagoda {

struct FlagGroup {
  std::string title;               // "KV cache"
  std::vector<std::string> flags;  // Abseil names, in the order to list them
  // For a program with commands (pagoda): the commands that take these flags; empty = all.
  std::vector<std::string> commands = {};
};

struct ProgramUsage {
  std::string program;   // "pagoda-router"
  std::string synopsis;  // how to call it, printed before the flags
  // Flags of the program's files that no group names are listed last, under "Other flags".
  std::vector<FlagGroup> groups;
};

// Answers --help (also -h, --helpfull, --helpshort) and --version on stdout and exits 0;
// otherwise parses Abseil flags from argv after rewriting "--a-b=..." as "--a_b=...".
// Returns the positional arguments (argv[0] first).
std::vector<std::string> ParseCommandLine(int argc, char** argv, const ProgramUsage& usage);

// The --help text; a non-empty `command` keeps only the groups that command takes.
std::string HelpText(const ProgramUsage& usage, std::string_view command);

// Every value given to --`name` (as --name=V or --name V), in order. Abseil keeps only the
// last occurrence of a flag; this is for the few flags that repeat (pagoda generate --stop).
std::vector<std::string> RepeatedFlagValues(int argc, char** argv, std::string_view name);

}  // namespace pagoda

#endif  // PAGODA_COMMON_PROCESS_COMMAND_LINE_H_
