// `pagoda run` as a user runs it: a real process, its stdout parsed as JSON.
#include <string>
#include <vector>

#include "common/json.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using testing::CommandResult;
using ::testing::HasSubstr;
using testing::RunCommand;

struct Line {
  std::vector<int> prompt_ids, output_ids;
  std::string text, finish_reason, error;
};

std::vector<Line> ParseLines(const std::string& out) {
  std::vector<Line> lines;
  size_t start = 0;
  while (start < out.size()) {
    const size_t end = out.find('\n', start);
    const std::string json = out.substr(start, end - start);
    start = end == std::string::npos ? out.size() : end + 1;
    if (json.empty()) continue;
    google::protobuf::Struct s;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &s).ok()) << json;
    Line l;
    auto ints = [&](const char* key) {
      std::vector<int> v;
      if (!s.fields().contains(key)) return v;
      for (const auto& x : s.fields().at(key).list_value().values()) v.push_back(x.number_value());
      return v;
    };
    auto str = [&](const char* key) {
      return s.fields().contains(key) ? s.fields().at(key).string_value() : std::string();
    };
    l.prompt_ids = ints("prompt_ids");
    l.output_ids = ints("output_ids");
    l.text = str("text");
    l.finish_reason = str("finish_reason");
    l.error = str("error");
    lines.push_back(std::move(l));
  }
  return lines;
}

std::vector<std::string> RunArgs(std::vector<std::string> extra) {
  std::vector<std::string> args = {
      testing::BinaryPath("pagoda"), "run", "--model=" + testing::Stories260KModel(),
      "--tokenizer=" + testing::Stories260KTokenizer(), "--temperature=0", "--json",
      // run.c -n 256 computes 256 positions: 257 tokens in all.
      "--max-model-len=257"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The text run.c printed after the prompt, up to where we have output.
void ExpectGolden(const Line& line, const testing::GoldenCase& c) {
  EXPECT_EQ(line.prompt_ids, c.prompt_ids) << c.prompt;
  EXPECT_EQ(line.output_ids, c.greedy_ids) << c.prompt;
  EXPECT_EQ(line.finish_reason, c.greedy_ids.back() == 1 ? "stop" : "length") << c.prompt;
  EXPECT_TRUE(c.stdout_text.starts_with(c.prompt + line.text)) << c.prompt << "\n" << line.text;
}

TEST(PagodaRunTest, EachGoldenPromptAlone) {
  for (const auto& c : testing::LoadGoldenCases()) {
    const CommandResult r = RunCommand(RunArgs({"--prompt=" + c.prompt}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto lines = ParseLines(r.out);
    ASSERT_EQ(lines.size(), 1u);
    ExpectGolden(lines[0], c);
  }
}

TEST(PagodaRunTest, AllGoldenPromptsInOneBatchInInputOrder) {
  const auto cases = testing::LoadGoldenCases();
  std::string prompts;
  for (const auto& c : cases) prompts += c.prompt + "\n";
  const std::string file = testing::TempDir() + "/prompts.txt";
  testing::WriteFile(file, prompts);
  // A small step budget and pool make the batch chunk its prefills and preempt.
  const CommandResult r = RunCommand(
      RunArgs({"--prompts-file=" + file, "--max-num-batched-tokens=32", "--num-kv-blocks=40"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = ParseLines(r.out);
  ASSERT_EQ(lines.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) ExpectGolden(lines[i], cases[i]);
}

// 16-bit KV changes few greedy choices (tests/worker/kv_dtype_accuracy_test.cc measures how
// few), so this checks that the batch runs, not its tokens.
TEST(PagodaRunTest, SixteenBitKvRunsTheBatchAndABadDtypeIsRefused) {
  const auto cases = testing::LoadGoldenCases();
  std::string prompts;
  for (const auto& c : cases) prompts += c.prompt + "\n";
  const std::string file = testing::TempDir() + "/prompts.txt";
  testing::WriteFile(file, prompts);
  const CommandResult r =
      RunCommand(RunArgs({"--prompts-file=" + file, "--kv-cache-dtype=bf16",
                          "--max-num-batched-tokens=32", "--num-kv-blocks=40"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = ParseLines(r.out);
  ASSERT_EQ(lines.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(lines[i].prompt_ids, cases[i].prompt_ids);
    EXPECT_FALSE(lines[i].output_ids.empty()) << cases[i].prompt;
  }
  const CommandResult bad = RunCommand(RunArgs({"--prompt=x", "--kv-cache-dtype=int4"}));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--kv-cache-dtype=int4: expected auto, f32, bf16, f16 or int8"));
}

TEST(PagodaRunTest, TextModeStreamsWhatRunCPrints) {
  const auto c = testing::LoadGoldenCases()[2];  // ends with BOS: the whole story
  std::vector<std::string> args = RunArgs({"--prompt=" + c.prompt});
  std::erase(args, "--json");
  const CommandResult r = RunCommand(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, c.stdout_text);
}

TEST(PagodaRunTest, APromptLongerThanTheContextFailsAlone) {
  const std::string file = testing::TempDir() + "/prompts.txt";
  std::string huge;
  for (int i = 0; i < 200; ++i) huge += "Once upon a time ";
  testing::WriteFile(file, "Once upon a time\n" + huge + "\nOne day, a big red ball\n");
  const CommandResult r = RunCommand(RunArgs({"--prompts-file=" + file}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("prompt 2"));
  const auto lines = ParseLines(r.out);
  ASSERT_EQ(lines.size(), 3u);
  const auto cases = testing::LoadGoldenCases();
  ExpectGolden(lines[0], cases[0]);
  EXPECT_THAT(lines[1].error, HasSubstr("model length"));
  ExpectGolden(lines[2], cases[3]);
}

TEST(PagodaRunTest, AMaxModelLenAboveTheModelsContextIsRefused) {
  const CommandResult r = RunCommand(RunArgs({"--prompt=x", "--max-model-len=4096"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--max-model-len=4096 is above the model's context of 512 tokens"));
}

TEST(PagodaRunTest, RopeScalingStretchesTheContextThatMaxModelLenMayAskFor) {
  // YaRN x4 on stories260K's 512 positions: 2,048, and a prompt past 512 tokens runs.
  std::string prompt;
  for (int i = 0; i < 120; ++i) prompt += "Once upon a time, ";
  const CommandResult r =
      RunCommand(RunArgs({"--prompt=" + prompt, "--max-model-len=2048", "--max-tokens=4",
                          R"(--rope-scaling={"rope_type":"yarn","factor":4})"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Line> lines = ParseLines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_GT(lines[0].prompt_ids.size(), 512u);
  EXPECT_EQ(lines[0].output_ids.size(), 4u);
  // Above the scaled context, and a malformed or unknown scaling, are refused by name.
  const CommandResult above = RunCommand(RunArgs(
      {"--prompt=x", "--max-model-len=2049", R"(--rope-scaling={"rope_type":"yarn","factor":4})"}));
  EXPECT_EQ(above.exit_code, 1);
  EXPECT_THAT(above.err, HasSubstr("above the model's context of 2048 tokens, RoPE scaling (yarn"));
  const CommandResult dynamic =
      RunCommand(RunArgs({"--prompt=x", R"(--rope-scaling={"rope_type":"dynamic","factor":2})"}));
  EXPECT_EQ(dynamic.exit_code, 1);
  EXPECT_THAT(dynamic.err, HasSubstr("--rope-scaling: type \"dynamic\" is not supported"));
}

TEST(PagodaRunTest, MalformedFilesFailWithAMessage) {
  const std::string dir = testing::TempDir();
  const std::string model = testing::ReadFile(testing::Stories260KModel());
  const std::string tok = testing::ReadFile(testing::Stories260KTokenizer());
  struct Bad {
    std::string name, model, tokenizer, message;
  };
  std::string bad_header = model;
  bad_header[12] = 6;  // n_heads = 6 does not divide dim 64
  const std::vector<Bad> cases = {
      {"truncated model", model.substr(0, model.size() / 2), tok, "truncated"},
      {"bad header", bad_header, tok, "n_heads"},
      {"empty model", "", tok, "truncated"},
      {"truncated tokenizer", model, tok.substr(0, tok.size() - 10), "tokenizer"},
      {"vocab mismatch", model,
       testing::ReadFile(testing::SharedPath("models/llama2-tokenizer/tokenizer.bin")),
       "does not match"},
  };
  for (const Bad& b : cases) {
    testing::WriteFile(dir + "/m.bin", b.model);
    testing::WriteFile(dir + "/t.bin", b.tokenizer);
    const CommandResult r =
        RunCommand({testing::BinaryPath("pagoda"), "run", "--model=" + dir + "/m.bin",
                    "--tokenizer=" + dir + "/t.bin", "--prompt=hi"});
    EXPECT_EQ(r.exit_code, 1) << b.name << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(b.message)) << b.name;
  }
}

TEST(PagodaRunTest, ParallelSamplesAreReproducible) {
  auto run = [] {
    std::vector<std::string> args = RunArgs({"--prompt=Lily and Tom went to the park.", "--n=3",
                                             "--temperature=0.8", "--seed=5", "--max-tokens=40"});
    return RunCommand(args);
  };
  const CommandResult a = run(), b = run();
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  const auto lines = ParseLines(a.out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].output_ids, lines[1].output_ids);
  for (const Line& l : lines) EXPECT_LE(l.output_ids.size(), 40u);
}

TEST(PagodaRunTest, TokenizeCommandPrintsIdsAndDecodedText) {
  const CommandResult r =
      RunCommand({testing::BinaryPath("pagoda"), "tokenize",
                  "--tokenizer=" + testing::Stories260KTokenizer(), "--text=Hello world"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[{\"ids\":[346,306,414,263,304,341],\"decoded\":\"Hello world\"}]\n");
  // A tokenizer.json, and a model directory holding one (Llama 3's ids for "Hello world").
  for (const std::string& path : {testing::SharedPath("models/llama3-tokenizer/tokenizer.json"),
                                  testing::SharedPath("models/llama3-tokenizer")}) {
    const CommandResult j = RunCommand(
        {testing::BinaryPath("pagoda"), "tokenize", "--tokenizer=" + path, "--text=Hello world"});
    ASSERT_EQ(j.exit_code, 0) << j.err;
    EXPECT_EQ(j.out, "[{\"ids\":[9906,1917],\"decoded\":\"Hello world\"}]\n") << path;
  }
}

TEST(PagodaRunTest, AHuggingFaceDirectoryRunsLikeItsLlama2cCheckpoint) {
  const CommandResult r =
      RunCommand({testing::BinaryPath("pagoda"), "run",
                  "--model=" + testing::SharedPath("models/stories260K-hf"),
                  "--prompt=Once upon a time", "--temperature=0", "--max-model-len=257", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const testing::GoldenCase golden = testing::LoadGoldenCases()[0];
  ASSERT_EQ(golden.prompt, "Once upon a time");
  EXPECT_THAT(r.out, HasSubstr("\"output_ids\":" + JsonDump(Json(golden.greedy_ids))));
}

}  // namespace
}  // namespace pagoda
