// `pagoda generate` as a user runs it against a real router: repeated stop strings, stop ids,
// --json objects, logprobs, and sampling flags left to the model's defaults.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/integration/serving_fixture.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

// One JSON object per line of `out`.
std::vector<google::protobuf::Struct> JsonLines(const std::string& out) {
  std::vector<google::protobuf::Struct> lines;
  size_t start = 0;
  while (start < out.size()) {
    const size_t end = std::min(out.find('\n', start), out.size());
    const std::string line = out.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    google::protobuf::Struct s;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(line, &s).ok()) << line;
    lines.push_back(std::move(s));
  }
  return lines;
}

std::vector<int> Ints(const google::protobuf::Struct& s, const std::string& key) {
  std::vector<int> v;
  if (!s.fields().contains(key)) return v;
  for (const auto& x : s.fields().at(key).list_value().values()) {
    v.push_back(static_cast<int>(x.number_value()));
  }
  return v;
}

std::string Str(const google::protobuf::Struct& s, const std::string& key) {
  return s.fields().contains(key) ? s.fields().at(key).string_value() : "";
}

class GenerateCommandTest : public ServingTest {
 protected:
  testing::CommandResult Run(std::vector<std::string> flags) {
    std::vector<std::string> argv = {testing::BinaryPath("pagoda"), "generate",
                                     absl::StrCat("--server=127.0.0.1:", port_)};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return testing::RunCommand(argv);
  }
};

TEST_F(GenerateCommandTest, EachStopFlagIsOneStringCommasIncluded) {
  StartWorker();
  WaitForWorkers(1);
  const testing::GoldenCase& c = golden_[0];
  const std::string text = c.stdout_text.substr(c.prompt.size());
  const size_t comma = text.find(',', 4);
  ASSERT_NE(comma, std::string::npos) << text;
  const std::string stop = text.substr(comma - 3, 6);  // "xyz, a": a comma inside
  const std::string expected = text.substr(0, text.find(stop));
  // The stop that matches comes first: a flag that kept only its last value would miss it.
  const testing::CommandResult r = Run({"--prompt=" + c.prompt, "--temperature=0", "--json",
                                        "--stop=" + stop, "--stop=never seen, at all"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_EQ(Str(lines[0], "text"), expected);
  EXPECT_EQ(Str(lines[0], "finish_reason"), "stop");

  // Text mode: the prompt, then the text up to the stop.
  const testing::CommandResult plain =
      Run({"--prompt=" + c.prompt, "--temperature=0", "--stop", stop});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out, c.prompt + expected + "\n");
}

TEST_F(GenerateCommandTest, StopTokenIdsEndTheOutputAtThatToken) {
  StartWorker();
  WaitForWorkers(1);
  const testing::GoldenCase& c = golden_[0];
  const int stop_id = c.greedy_ids[3];
  const testing::CommandResult r = Run({"--prompt=" + c.prompt, "--temperature=0", "--json",
                                        absl::StrCat("--stop-token-ids=", stop_id, ",", stop_id)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const std::vector<int> ids = Ints(lines[0], "output_ids");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), stop_id);
  EXPECT_LE(ids.size(), 4u);
  EXPECT_EQ(Str(lines[0], "finish_reason"), "stop");
}

TEST_F(GenerateCommandTest, JsonObjectsOfParallelSamplesCarryTheirIndexAndLogprobs) {
  StartWorker();
  WaitForWorkers(1);
  const testing::CommandResult r =
      Run({"--prompt=" + golden_[0].prompt, "--json", "--n=2", "--max-tokens=5", "--seed=3",
           "--temperature=0.8", "--logprobs=2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(lines[i].fields().contains("index")) << r.out;
    EXPECT_EQ(lines[i].fields().at("index").number_value(), i);
    EXPECT_EQ(Ints(lines[i], "prompt_ids"), golden_[0].prompt_ids);
    EXPECT_EQ(Ints(lines[i], "output_ids").size(), 5u);
    const auto& logprobs = lines[i].fields().at("logprobs").list_value().values();
    ASSERT_EQ(logprobs.size(), 5);
    for (const auto& lp : logprobs) {
      EXPECT_EQ(lp.struct_value().fields().at("top").list_value().values_size(), 2);
      EXPECT_LE(lp.struct_value().fields().at("logprob").number_value(), 0);
    }
  }
  // One sample: the object of `pagoda run`, without an index.
  const testing::CommandResult one =
      Run({"--prompt=" + golden_[0].prompt, "--json", "--max-tokens=2"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_THAT(one.out, ::testing::Not(HasSubstr("\"index\"")));
}

TEST_F(GenerateCommandTest, WithoutSamplingFlagsTheModelsDefaultsApply) {
  // stories260K-hf with a generation_config.json that asks for greedy sampling.
  const std::string model = ServeGreedyHfCopy();
  EXPECT_EQ(Info().model_name(), "stories260K-hf") << "--served-model-name's default";
  for (const auto& c : golden_) {
    // No --temperature, --top-p, --top-k: the request leaves them unset.
    const testing::CommandResult r = Run({"--prompt=" + c.prompt, "--json", "--seed=7"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto lines = JsonLines(r.out);
    ASSERT_EQ(lines.size(), 1u) << r.out;
    EXPECT_EQ(Ints(lines[0], "output_ids"), c.greedy_ids) << c.prompt;
  }
  // A flag the user gives still wins over the model's default.
  const testing::CommandResult sampled =
      Run({"--prompt=" + golden_[0].prompt, "--json", "--temperature=1", "--seed=7"});
  ASSERT_EQ(sampled.exit_code, 0) << sampled.err;
  EXPECT_NE(Ints(JsonLines(sampled.out).at(0), "output_ids"), golden_[0].greedy_ids);
}

TEST_F(GenerateCommandTest, AFailedCallNamesItsStatusCode) {
  // No worker: the router answers UNAVAILABLE at the deadline; nothing streamed, no echo.
  WaitForWorkers(0);
  const testing::CommandResult r = Run({"--prompt=Once", "--timeout=1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("error: UNAVAILABLE: "));
  EXPECT_EQ(r.out, "");
}

// --api-key (or PAGODA_API_KEY) on the clients against a router started with --api-key: with
// the key they work, without it they fail at once naming the refusal.
TEST(ClientApiKeyTest, GenerateAndBenchSendTheKeyAndFailClearlyWithoutIt) {
  const std::string dir = testing::TempDir();
  const int port = FreePort();
  const pid_t router = Spawn(
      {testing::BinaryPath("pagoda-router"), absl::StrCat("--port=", port),
       absl::StrCat("--worker-port=", FreePort()), "--host=127.0.0.1",
       "--model=" + testing::Stories260KModel(), "--tokenizer=" + testing::Stories260KTokenizer(),
       "--max-model-len=257", "--spawn-workers=1", "--worker-kv-cache-mb=8", "--api-key=sesame"},
      dir + "/router.log");
  struct KillAtEnd {  // however the test ends: an ASSERT returns early
    pid_t pid;
    ~KillAtEnd() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } kill_at_end{router};
  const std::string address = absl::StrCat("127.0.0.1:", port);
  ASSERT_TRUE(testing::WaitForHealth(address, "", testing::kServing)) << dir;
  const std::vector<testing::GoldenCase> golden = testing::LoadGoldenCases();
  const testing::GoldenCase& c = golden[0];
  auto generate = [&](std::vector<std::string> before, std::vector<std::string> flags) {
    std::vector<std::string> argv = std::move(before);
    for (const std::string& a :
         {testing::BinaryPath("pagoda"), std::string("generate"), "--server=" + address,
          "--prompt=" + c.prompt, std::string("--temperature=0"), std::string("--json")}) {
      argv.push_back(a);
    }
    argv.insert(argv.end(), flags.begin(), flags.end());
    return testing::RunCommand(argv);
  };
  const testing::CommandResult with_flag = generate({}, {"--api-key=sesame"});
  ASSERT_EQ(with_flag.exit_code, 0) << with_flag.err;
  const auto lines = JsonLines(with_flag.out);
  ASSERT_EQ(lines.size(), 1u) << with_flag.out;
  EXPECT_EQ(Ints(lines[0], "output_ids"), c.greedy_ids);
  const testing::CommandResult from_env = generate({"/usr/bin/env", "PAGODA_API_KEY=sesame"}, {});
  EXPECT_EQ(from_env.exit_code, 0) << from_env.err;
  EXPECT_EQ(from_env.out, with_flag.out);

  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{}, std::vector<std::string>{"--api-key=wrong"}}) {
    const testing::CommandResult refused = generate({}, flags);
    EXPECT_EQ(refused.exit_code, 1);
    EXPECT_THAT(refused.err, HasSubstr("UNAUTHENTICATED: missing or wrong API key")) << refused.err;
    EXPECT_EQ(refused.out, "");
  }

  auto bench = [&](const std::string& key) {
    return testing::RunCommand({testing::BinaryPath("pagoda"), "bench", "--server=" + address,
                                "--num-prompts=2", "--input-len=8", "--output-len=4", "--json",
                                key});
  };
  const testing::CommandResult benched = bench("--api-key=sesame");
  EXPECT_EQ(benched.exit_code, 0) << benched.err;
  EXPECT_THAT(benched.out, HasSubstr("\"completed\":2,"));
  const testing::CommandResult unbenched = bench("--api-key=");
  EXPECT_EQ(unbenched.exit_code, 2);
  EXPECT_THAT(unbenched.err, HasSubstr("UNAUTHENTICATED: missing or wrong API key"));
}

}  // namespace
}  // namespace pagoda
