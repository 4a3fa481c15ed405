// tokenizer.json in the SentencePiece style: the Llama 2 tokenizer.json encodes like its
// tokenizer.bin and passes llama.cpp's test vectors; stories260K-hf's gives the golden prompt
// ids; decode is streaming-safe; malformed files are refused with a reason.
#include "lib/text/hf_tokenizer.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "absl/strings/str_split.h"
#include "common/json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/text/incremental_decoder.h"
#include "lib/text/llama2c_tokenizer.h"
#include "lib/text/split_regex.h"
#include "lib/text/tokenizer_loader.h"
#include "lib/text/utf8.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Tokenizer> Load(const std::string& rel) {
  auto t = LoadTokenizer(testing::SharedPath(rel));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

TEST(HfTokenizerTest, Llama2TokenizerJsonPassesLlamaCppVectors) {
  auto tok = Load("models/llama2-tokenizer/tokenizer.json");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 32000);
  const std::string dir = testing::SharedPath("models/ggml-vocab-llama-spm/");
  const std::string inp = testing::ReadFile(dir + "ggml-vocab-llama-spm.gguf.inp");
  const std::string out = testing::ReadFile(dir + "ggml-vocab-llama-spm.gguf.out");
  std::vector<std::string> texts = absl::StrSplit(inp, "\n__ggml_vocab_test__\n");
  std::vector<std::string> expected = absl::StrSplit(out, '\n');
  if (!texts.empty() && texts.back().empty()) texts.pop_back();
  ASSERT_GE(expected.size(), texts.size());
  ASSERT_GT(texts.size(), 40u);
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int> want;
    for (absl::string_view id : absl::StrSplit(expected[i], ' ', absl::SkipEmpty())) {
      want.push_back(std::stoi(std::string(id)));
    }
    EXPECT_EQ(tok->Encode(texts[i]), want) << "vector " << i << ": \"" << texts[i] << "\"";
    // Decoding gives the text back (SentencePiece drops the one space it prepended).
    EXPECT_EQ(tok->Decode(tok->Encode(texts[i])), texts[i]) << "vector " << i;
  }
}

TEST(HfTokenizerTest, EncodesTheGoldenPromptsLikeTokenizerBin) {
  auto json = Load("models/llama2-tokenizer/tokenizer.json");
  auto bin = Load("models/llama2-tokenizer/tokenizer.bin");
  auto small_json = Load("models/stories260K-hf/tokenizer.json");
  ASSERT_TRUE(json && bin && small_json);
  for (const testing::GoldenCase& c : testing::LoadGoldenCases()) {
    std::vector<int> ids = {1};
    for (int id : json->Encode(c.prompt)) ids.push_back(id);
    EXPECT_EQ(ids, c.llama2_prompt_ids) << c.prompt;
    EXPECT_EQ(json->Encode(c.prompt), bin->Encode(c.prompt)) << c.prompt;
    std::vector<int> small = {1};
    for (int id : small_json->Encode(c.prompt)) small.push_back(id);
    EXPECT_EQ(small, c.prompt_ids) << c.prompt << " (stories260K-hf)";
  }
}

TEST(HfTokenizerTest, SpecialTokensInTheTextAreMatchedAndDecodeIsStreamingSafe) {
  auto tok = Load("models/llama2-tokenizer/tokenizer.json");
  ASSERT_NE(tok, nullptr);
  const std::vector<int> ids = tok->Encode("Hi</s>there");
  EXPECT_THAT(ids, ::testing::Contains(2)) << "</s> written in the text is the special token";
  // Byte-fallback pieces of one emoji never come out half-way.
  const std::vector<int> emoji = tok->Encode("a 🦙 b");
  IncrementalDecoder decoder(tok.get(), 1);
  std::string text;
  for (int id : emoji) {
    const std::string piece = decoder.Append(id);
    EXPECT_EQ(ValidUtf8(piece), piece);
    text += piece;
  }
  EXPECT_EQ(text + decoder.Flush(), "a 🦙 b");
}

// ../shared/golden/<name>_tokenizer.json: ids and decoded text from Hugging Face's tokenizers.
// `fast_paths` false: the split regex runs through PCRE2 rather than the hand-written splitter.
std::unique_ptr<HfTokenizer> LoadByteLevel(const std::string& model, bool fast_paths) {
  const std::string path = testing::SharedPath("models/" + model + "/tokenizer.json");
  auto j = ParseJson(testing::ReadFile(path), path);
  EXPECT_TRUE(j.ok()) << j.status();
  if (!j.ok()) return nullptr;
  auto t = HfTokenizer::FromJson(*j, path, "", fast_paths);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

void ExpectGolden(const std::string& model, const std::string& golden, bool fast_paths = true) {
  std::unique_ptr<Tokenizer> tok = LoadByteLevel(model, fast_paths);
  ASSERT_NE(tok, nullptr);
  auto cases = ParseJson(testing::ReadFile(testing::SharedPath("golden/" + golden)), golden);
  ASSERT_TRUE(cases.ok()) << cases.status();
  const Json* list = JsonMember(*cases, "cases");
  ASSERT_NE(list, nullptr);
  ASSERT_GE(list->size(), 10u);
  for (const Json& c : *list) {
    const std::string text = c["text"].get<std::string>();
    const std::vector<int> ids = c["ids"].get<std::vector<int>>();
    EXPECT_EQ(tok->Encode(text), ids) << model << ": \"" << text << "\"";
    EXPECT_EQ(tok->Decode(ids), c["decoded"].get<std::string>()) << model;
  }
}

TEST(HfTokenizerTest, Llama3ByteLevelTokenizerMatchesHuggingFace) {
  ExpectGolden("llama3-tokenizer", "llama3_tokenizer.json");
}

TEST(HfTokenizerTest, Qwen3ByteLevelTokenizerMatchesHuggingFace) {
  ExpectGolden("qwen3-tokenizer", "qwen3_tokenizer.json");
}

TEST(HfTokenizerTest, GoldenSetsPassThroughPcre2Too) {
  ExpectGolden("llama3-tokenizer", "llama3_tokenizer.json", /*fast_paths=*/false);
  ExpectGolden("qwen3-tokenizer", "qwen3_tokenizer.json", /*fast_paths=*/false);
}

// Text made of the pieces the split patterns care about, at random.
std::string RandomText(std::mt19937& rng, int pieces) {
  static const std::vector<std::string> kParts = {
      "a",  "Z",  "é",  "ß",      "中",           "文",  "й",      "1",      "7",       "٣",  "²",
      " ",  "  ", "\n", "\r",     "\t",           "'",   "'s",     "'LL",    "'ve",     "'D", ".",
      ",",  "!",  "?",  "😀",      "🦙",         "—",   "\u00a0", "\u3000", "e\u0301", "$",  "()",
      "\"", "-",  "_",  "\u200d", "\xef\xbf\xbd", "\xff"};
  std::string s;
  for (int i = 0; i < pieces; ++i) s += kParts[rng() % kParts.size()];
  return s;
}

TEST(HfTokenizerTest, HandWrittenSplittersEqualPcre2) {
  std::mt19937 rng(42);
  std::vector<std::string> texts;
  for (int i = 0; i < 2000; ++i) texts.push_back(RandomText(rng, 1 + rng() % 40));
  for (const std::string model : {"llama3-tokenizer", "qwen3-tokenizer"}) {
    auto fast = LoadByteLevel(model, true);
    auto pcre = LoadByteLevel(model, false);
    ASSERT_TRUE(fast && pcre);
    for (const std::string& text : texts) {
      ASSERT_EQ(fast->Encode(text), pcre->Encode(text)) << model << ": \"" << text << "\"";
    }
    // Speed on a long text, reported: about the same (BPE, not the split, dominates).
    std::string long_text;
    for (const std::string& t : texts) long_text += t;
    double seconds[2];
    for (int k = 0; k < 2; ++k) {
      const auto start = std::chrono::steady_clock::now();
      const size_t n = (k == 0 ? fast : pcre)->Encode(long_text).size();
      seconds[k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EXPECT_GT(n, 0u);
    }
    std::cout << model << ": " << long_text.size() << " bytes, hand-written " << seconds[0] * 1e3
              << " ms, PCRE2 " << seconds[1] * 1e3 << " ms\n";
  }
}

TEST(SplitRegexTest, IsolatesEveryMatchAndKeepsTheGapsBetween) {
  auto re = SplitRegex::Compile(R"(\p{N}+|[a-z]+)");
  ASSERT_TRUE(re.ok()) << re.status();
  const std::string text = "ab12 cd!3é";
  std::vector<std::string> pieces;
  for (const auto& [b, e] : (*re)->Split(text)) pieces.push_back(text.substr(b, e - b));
  EXPECT_EQ(pieces, std::vector<std::string>({"ab", "12", " ", "cd", "!", "3", "é"}));
  // A pattern that can match empty still advances by whole characters.
  auto empty = SplitRegex::Compile("x*");
  ASSERT_TRUE(empty.ok());
  pieces.clear();
  const std::string text2 = "éxxa";
  for (const auto& [b, e] : (*empty)->Split(text2)) pieces.push_back(text2.substr(b, e - b));
  EXPECT_EQ(pieces, std::vector<std::string>({"é", "xx", "a"}));
  EXPECT_THAT(SplitRegex::Compile("(unclosed").status().message(), HasSubstr("offset"));
  // Long runs split as they should (no JIT stack limit cuts them short).
  auto llama3 = SplitRegex::Compile(kLlama3Pattern);
  ASSERT_TRUE(llama3.ok());
  const std::string spaces = std::string(200000, ' ') + "ab" + std::string(100000, '7');
  const auto long_pieces = (*llama3)->Split(spaces);
  ASSERT_GE(long_pieces.size(), 3u);
  EXPECT_EQ(long_pieces[0], std::make_pair(size_t{0}, size_t{199999}));
  EXPECT_EQ(long_pieces[1], std::make_pair(size_t{199999}, size_t{200002}));
  EXPECT_EQ(long_pieces.size(), 2u + 100000 / 3 + 1) << "digits in threes";
}

TEST(HfTokenizerTest, AnySplitRegexIsAcceptedThroughPcre2) {
  // Qwen's tokenizer.json with "\\X" (one character per piece) in place of its pattern: every
  // character becomes its own piece, so no merge crosses characters.
  const std::string path = testing::SharedPath("models/qwen3-tokenizer/tokenizer.json");
  std::string text = testing::ReadFile(path);
  const std::string qwen = JsonDump(Json(kQwenPattern));
  const size_t at = text.find(qwen.substr(1, qwen.size() - 2));
  ASSERT_NE(at, std::string::npos);
  text.replace(at, qwen.size() - 2, "\\\\X");
  const std::string other = testing::TempDir() + "/tokenizer.json";
  testing::WriteFile(other, text);
  auto t = LoadTokenizer(other);
  ASSERT_TRUE(t.ok()) << t.status();
  auto q = Load("models/qwen3-tokenizer/tokenizer.json");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->Encode("hello world").size(), 2u);
  const std::vector<int> ids = (*t)->Encode("hello world");
  ASSERT_EQ(ids.size(), 11u);
  EXPECT_EQ((*t)->Decode(std::vector<int>{ids[0]}), "h");
  EXPECT_EQ((*t)->Decode(ids), "hello world");
  EXPECT_EQ((*t)->Decode((*t)->Encode("wörld 😀\n")), "wörld 😀\n");
}

TEST(HfTokenizerTest, QwenNormalizesToNfcFirst) {
  auto tok = Load("models/qwen3-tokenizer/tokenizer.json");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("cafe\u0301 na\u0131\u0308ve"), tok->Encode("caf\u00E9 na\u0131\u0308ve"));
  EXPECT_NE(tok->Encode("cafe\u0301"), std::vector<int>()) << "not empty";
  // Llama 3's tokenizer.json has no normalizer: the decomposed form stays decomposed.
  auto llama3 = Load("models/llama3-tokenizer/tokenizer.json");
  ASSERT_NE(llama3, nullptr);
  EXPECT_NE(llama3->Encode("cafe\u0301"), llama3->Encode("caf\u00E9"));
}

TEST(HfTokenizerTest, ByteLevelSpecialTokensAreMatchedInTheText) {
  auto tok = Load("models/llama3-tokenizer/tokenizer.json");
  ASSERT_NE(tok, nullptr);
  const std::vector<int> ids = tok->Encode("<|begin_of_text|>Hi<|eot_id|>");
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 128000);
  EXPECT_EQ(ids.back(), 128009);
  EXPECT_EQ(tok->bos_id(), 128000);
  EXPECT_EQ(tok->Decode(ids), "<|begin_of_text|>Hi<|eot_id|>");
}

TEST(HfTokenizerTest, TheMetaspaceFormOfTheLlama2TokenizerAlsoWorks) {
  // Newer conversions drop the normalizer for a Metaspace pre-tokenizer, which prepends "▁"
  // only when the text does not start with one (so a leading space is not doubled).
  auto j = ParseJson(
      testing::ReadFile(testing::SharedPath("models/llama2-tokenizer/tokenizer.json")), "t");
  ASSERT_TRUE(j.ok());
  (*j)["normalizer"] = nullptr;
  (*j)["pre_tokenizer"] = {{"type", "Metaspace"},
                           {"replacement", "\u2581"},
                           {"prepend_scheme", "first"},
                           {"split", false}};
  const std::string text = JsonDump(*j);
  const std::string path = testing::TempDir() + "/metaspace.json";
  testing::WriteFile(path, text);
  auto metaspace = LoadTokenizer(path);
  ASSERT_TRUE(metaspace.ok()) << metaspace.status();
  auto legacy = Load("models/llama2-tokenizer/tokenizer.json");
  for (const testing::GoldenCase& c : testing::LoadGoldenCases()) {
    EXPECT_EQ((*metaspace)->Encode(c.prompt), legacy->Encode(c.prompt)) << c.prompt;
  }
  EXPECT_EQ((*metaspace)->Encode(" Hello"), std::vector<int>({15043}));   // "▁Hello"
  EXPECT_EQ(legacy->Encode(" Hello"), std::vector<int>({29871, 15043}));  // "▁" "▁Hello"
  // After a special token, "first" adds no "▁".
  EXPECT_EQ((*metaspace)->Encode("<s>Hello"), std::vector<int>({1, 10994}));  // "Hello"
}

TEST(HfTokenizerTest, MalformedAndUnsupportedFilesAreRefused) {
  const std::string dir = testing::TempDir();
  struct Case {
    std::string json, message;
  };
  const std::vector<Case> cases = {
      {"{", "not valid JSON"},
      {R"({"model": {"type": "Unigram"}})", "model type Unigram is not supported"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})",
       "not in the vocabulary"},
      {R"({"model": {"type": "BPE", "vocab": [], "merges": []}})", "vocab must be an object"},
      {R"({"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE"}})",
       "ByteLevel alone needs use_regex: true and add_prefix_space: false"},
      {R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern":)"
       R"( {"Regex": "(x"}, "behavior": "Isolated"}, {"type": "ByteLevel", "use_regex": false}]},)"
       R"( "model": {"type": "BPE", "vocab": {}, "merges": []}})",
       "missing closing parenthesis"},
      {R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern":)"
       R"( {"Regex": "x"}, "behavior": "Removed"}, {"type": "ByteLevel", "use_regex": false}]},)"
       R"( "model": {"type": "BPE", "vocab": {}, "merges": []}})",
       "behavior Isolated"},
      {R"({"normalizer": {"type": "NFKC"}, "model": {"type": "BPE", "vocab": {}, "merges": []}})",
       "normalizer NFKC is not supported"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string path = dir + "/t" + std::to_string(n++) + ".json";
    std::ofstream(path) << c.json;
    auto t = LoadTokenizer(path);
    ASSERT_FALSE(t.ok()) << c.json;
    EXPECT_THAT(t.status().message(), HasSubstr(c.message)) << c.json;
  }
}

// --- Special tokens around a text ---------------------------------------------------------

// A tiny BPE tokenizer.json with `post_processor` (raw JSON) and, when not empty, a
// tokenizer_config.json beside it; returns the tokenizer.json's path.
std::string TinyTokenizer(const std::string& post_processor, const std::string& config = "") {
  static int n = 0;
  const std::string dir = testing::TempDir() + "/special" + std::to_string(++n);
  std::filesystem::create_directories(dir);
  testing::WriteFile(dir + "/tokenizer.json",
                     R"({"model": {"type": "BPE", "vocab": {"<s>": 0, "</s>": 1, "a": 2, "b": 3},)"
                     R"( "merges": []}, "post_processor": )" +
                         post_processor + "}");
  if (!config.empty()) testing::WriteFile(dir + "/tokenizer_config.json", config);
  return dir + "/tokenizer.json";
}

std::vector<int> EncodeWithSpecials(const std::string& path, const std::string& text) {
  auto t = LoadTokenizer(path);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? (*t)->Encode(text, /*add_special_tokens=*/true) : std::vector<int>{-1};
}

TEST(HfTokenizerSpecialTokensTest, EachTokenizerAddsExactlyWhatItDefines) {
  // Llama 2 style: TemplateProcessing "<s> $A" (and tokenizer_config add_bos_token true).
  auto small = Load("models/stories260K-hf/tokenizer.json");
  ASSERT_NE(small, nullptr);
  for (const testing::GoldenCase& c : testing::LoadGoldenCases()) {
    EXPECT_EQ(small->Encode(c.prompt, true), c.prompt_ids) << c.prompt;
  }
  auto llama2 = Load("models/llama2-tokenizer/tokenizer.json");
  ASSERT_NE(llama2, nullptr);
  EXPECT_EQ(llama2->prefix_ids(), std::vector<int>({1}));
  EXPECT_TRUE(llama2->suffix_ids().empty());
  // Qwen: a ByteLevel post-processor and add_bos_token false add nothing (transformers gives
  // [12522, 5193, ...] for a text, no BOS).
  auto qwen = Load("models/qwen3-tokenizer/tokenizer.json");
  ASSERT_NE(qwen, nullptr);
  EXPECT_TRUE(qwen->prefix_ids().empty());
  EXPECT_TRUE(qwen->suffix_ids().empty());
  EXPECT_EQ(qwen->Encode("Hello world", true), qwen->Encode("Hello world"));
  EXPECT_TRUE(qwen->chat_template().starts_with("{%- if tools %}")) << "tokenizer_config.json's";
  EXPECT_EQ(llama2->chat_template(), "") << "none in its tokenizer_config.json";
  // llama2.c's tokenizer.bin: BOS always, as run.c does.
  auto bin = Load("models/stories260K/tok512.bin");
  ASSERT_NE(bin, nullptr);
  EXPECT_EQ(bin->Encode("Once upon a time", true), testing::LoadGoldenCases().front().prompt_ids);
  EXPECT_EQ(bin->Encode("a", false), bin->Encode("a"));
}

TEST(HfTokenizerSpecialTokensTest, PostProcessorsAndConfigOverrides) {
  const std::string bos_template =
      R"({"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},)"
      R"( {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],)"
      R"( "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]},)"
      R"( "</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}}})";
  EXPECT_EQ(EncodeWithSpecials(TinyTokenizer(bos_template), "ab"), std::vector<int>({0, 2, 3, 1}));
  // Llama 3's real file: Sequence[ByteLevel, TemplateProcessing].
  EXPECT_EQ(EncodeWithSpecials(TinyTokenizer(R"({"type": "Sequence", "processors": [)"
                                             R"({"type": "ByteLevel"}, )" +
                                             bos_template + "]}"),
                               "a"),
            std::vector<int>({0, 2, 1}));
  EXPECT_EQ(EncodeWithSpecials(TinyTokenizer(R"({"type": "ByteLevel"})"), "ab"),
            std::vector<int>({2, 3}));
  EXPECT_EQ(EncodeWithSpecials(TinyTokenizer("null"), "ab"), std::vector<int>({2, 3}));
  EXPECT_EQ(EncodeWithSpecials(TinyTokenizer(R"({"type": "RobertaProcessing", "sep": ["</s>", 1],)"
                                             R"( "cls": ["<s>", 0]})"),
                               "a"),
            std::vector<int>({0, 2, 1}));
  // tokenizer_config.json's add_bos_token / add_eos_token decide when set.
  EXPECT_EQ(EncodeWithSpecials(TinyTokenizer(bos_template, R"({"add_bos_token": false})"), "a"),
            std::vector<int>({2, 1}));
  EXPECT_EQ(EncodeWithSpecials(TinyTokenizer("null", R"({"add_bos_token": true, "bos_token": )"
                                                     R"({"content": "<s>"}, "add_eos_token": true,)"
                                                     R"( "eos_token": "</s>"})"),
                               "a"),
            std::vector<int>({0, 2, 1}));
  // Without special tokens nothing is added.
  auto t = LoadTokenizer(TinyTokenizer(bos_template));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->Encode("ab", false), std::vector<int>({2, 3}));

  struct Case {
    std::string post, config, message;
  };
  const std::vector<Case> bad = {
      {R"({"type": "Unknown"})", "", "type Unknown is not supported"},
      {R"({"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<x>"}}]})", "",
       "\"<x>\" is not in the vocabulary"},
      {"null", R"({"add_bos_token": true, "bos_token": null})", "bos_token is not set"},
      {"null", R"({"add_bos_token": "yes"})", "add_bos_token is not true or false"},
  };
  for (const Case& c : bad) {
    auto r = LoadTokenizer(TinyTokenizer(c.post, c.config));
    ASSERT_FALSE(r.ok()) << c.post << c.config;
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace pagoda
