// --help text and repeated flags, on flags defined here.
#include "common/process/command_line.h"

#include "absl/flags/flag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, test_max_things, 3, "things at most");
ABSL_FLAG(std::string, test_name, "", "a name");
ABSL_FLAG(bool, test_loud, false, "be loud");
ABSL_FLAG(double, test_forgotten, 0.5, "in no group");

namespace pagoda {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ProgramUsage Usage() {
  return {"prog",
          "prog [flags]\n",
          {{"Things", {"test_max_things", "test_name"}, {"count"}},
           {"Noise", {"test_loud"}, {"shout"}}}};
}

TEST(CommandLineTest, HelpGroupsFlagsWithDashesKindsAndDefaults) {
  const std::string help = HelpText(Usage(), "");
  EXPECT_THAT(help, HasSubstr("prog [flags]\n"));
  EXPECT_THAT(help, HasSubstr("\nThings:\n  --test-max-things=INT  (default: 3)\n      things at "
                              "most\n  --test-name=TEXT\n      a name\n"));
  EXPECT_THAT(help, HasSubstr("\nNoise:\n  --test-loud\n      be loud\n"));
  // A flag of this file that no group names is still listed, last.
  EXPECT_THAT(help, HasSubstr("\nOther flags:\n  --test-forgotten=NUMBER  (default: 0.5)\n"));
  EXPECT_THAT(help, Not(HasSubstr("--flagfile")));  // Abseil's own
}

TEST(CommandLineTest, ACommandsHelpKeepsItsGroups) {
  const std::string help = HelpText(Usage(), "shout");
  EXPECT_THAT(help, HasSubstr("--test-loud"));
  EXPECT_THAT(help, Not(HasSubstr("--test-max-things")));
  EXPECT_THAT(help, HasSubstr("--test-forgotten"));
}

TEST(CommandLineTest, RepeatedFlagValuesKeepsEveryOccurrenceInOrder) {
  std::vector<std::string> args = {"prog",    "--stop=a,b", "--other=1", "--stop",      "c",
                                   "--stop=", "--stops=x",  "--",        "--stop=after"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  EXPECT_EQ(RepeatedFlagValues(static_cast<int>(argv.size()), argv.data(), "stop"),
            std::vector<std::string>({"a,b", "c", ""}));
  std::vector<std::string> dashed = {"prog", "--stop-token-ids=1", "--stop_token_ids=2"};
  std::vector<char*> argv2;
  for (std::string& a : dashed) argv2.push_back(a.data());
  EXPECT_EQ(RepeatedFlagValues(static_cast<int>(argv2.size()), argv2.data(), "stop_token_ids"),
            std::vector<std::string>({"1", "2"}));
}

}  // namespace
}  // namespace pagoda
