#include "common/process/command_line.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <set>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/process/version.h"

namespace pagoda {
namespace {

std::string Dashed(absl::string_view name) { return absl::StrReplaceAll(name, {{"_", "-"}}); }

// "--max-tokens=INT  (default: 0)": the value's kind, and the default when it says something.
std::string FlagLine(const absl::CommandLineFlag& flag) {
  std::string line = absl::StrCat("  --", Dashed(flag.Name()));
  const std::string value = flag.DefaultValue();
  if (flag.IsOfType<bool>()) {
    return value == "true" ? absl::StrCat(line, "=true|false  (default: true)") : line;
  }
  if (flag.IsOfType<int>() || flag.IsOfType<int64_t>() || flag.IsOfType<uint64_t>() ||
      flag.IsOfType<std::optional<int>>()) {
    absl::StrAppend(&line, "=INT");
  } else if (flag.IsOfType<double>() || flag.IsOfType<std::optional<double>>()) {
    absl::StrAppend(&line, "=NUMBER");
  } else if (flag.IsOfType<std::vector<std::string>>()) {
    absl::StrAppend(&line, "=A,B,...");
  } else {
    absl::StrAppend(&line, "=TEXT");
  }
  if (!value.empty()) absl::StrAppend(&line, "  (default: ", value, ")");
  return line;
}

bool IsHelp(std::string_view arg) {
  return arg == "--help" || arg == "-h" || arg == "-help" || arg == "--helpfull" ||
         arg == "--helpshort";
}

}  // namespace

std::string HelpText(const ProgramUsage& usage, std::string_view command) {
  const auto all = absl::GetAllFlags();
  std::string out = absl::StrCat(VersionLine(usage.program), "\n\n", usage.synopsis);
  if (!out.ends_with('\n')) out += '\n';
  std::set<std::string> listed, files;
  auto append = [&](const std::string& title, const std::vector<std::string>& names) {
    std::string block;
    for (const std::string& name : names) {
      auto it = all.find(name);
      // A group may name a flag another binary defines; a flag is listed once.
      if (it == all.end() || listed.contains(name)) continue;
      listed.insert(name);
      absl::StrAppend(&block, FlagLine(*it->second), "\n      ", it->second->Help(), "\n");
    }
    if (!block.empty()) absl::StrAppend(&out, "\n", title, ":\n", block);
  };
  for (const FlagGroup& group : usage.groups) {
    const bool wanted =
        command.empty() || group.commands.empty() ||
        std::find(group.commands.begin(), group.commands.end(), command) != group.commands.end();
    if (wanted) append(group.title, group.flags);
  }
  // Flags defined beside the grouped ones (the program's own files) that no group names.
  std::set<std::string> grouped;
  for (const FlagGroup& group : usage.groups) {
    for (const std::string& name : group.flags) {
      grouped.insert(name);
      if (auto it = all.find(name); it != all.end()) files.insert(it->second->Filename());
    }
  }
  std::vector<std::string> others;
  for (const auto& [name, flag] : all) {
    if (!grouped.contains(std::string(name)) && files.contains(flag->Filename())) {
      others.emplace_back(name);
    }
  }
  std::sort(others.begin(), others.end());
  append("Other flags", others);
  absl::StrAppend(&out,
                  "\nFlags take dashes or underscores (--max-tokens, --max_tokens); "
                  "--version prints the version.\n");
  return out;
}

std::vector<std::string> ParseCommandLine(int argc, char** argv, const ProgramUsage& usage) {
  std::string command;  // the first positional argument: pagoda's command
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (IsHelp(arg)) {
      std::cout << HelpText(usage, command);
      std::exit(0);
    }
    if (arg == "--version" || arg == "-version") {
      std::cout << VersionLine(usage.program) << "\n";
      std::exit(0);
    }
    if (command.empty() && !arg.starts_with("-")) command = arg;
  }
  absl::SetProgramUsageMessage(
      absl::StrCat(usage.program, ": see --help for the flags, grouped and with dashes"));
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& arg : args) {
    if (arg.rfind("--", 0) != 0) continue;
    const size_t end = std::min(arg.find('='), arg.size());
    std::replace(arg.begin() + 2, arg.begin() + end, '-', '_');
  }
  std::vector<char*> pointers;
  for (std::string& arg : args) pointers.push_back(arg.data());
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(pointers.size()), pointers.data());
  return std::vector<std::string>(positional.begin(), positional.end());
}

std::vector<std::string> RepeatedFlagValues(int argc, char** argv, std::string_view name) {
  const std::string flag_name(name);
  const std::set<std::string> spellings = {"--" + Dashed(flag_name),
                                           "--" + absl::StrReplaceAll(flag_name, {{"-", "_"}})};
  std::vector<std::string> values;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;  // Abseil's end of flags
    for (const std::string& flag : spellings) {
      if (arg.starts_with(flag + "=")) {
        values.emplace_back(arg.substr(flag.size() + 1));
        break;
      }
      if (arg == flag && i + 1 < argc) {
        values.emplace_back(argv[++i]);
        break;
      }
    }
  }
  return values;
}

}  // namespace pagoda
