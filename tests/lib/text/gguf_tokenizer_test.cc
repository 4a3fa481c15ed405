// GGUF vocabularies: llama.cpp's vocab-only GGUF passes its 47 tokenizer vectors; byte-level
// vocabularies written here encode like their tokenizer.json; BOS follows the file and
// llama.cpp's defaults.
#include "lib/text/gguf_tokenizer.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/json.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/text/tokenizer_loader.h"
#include "lib/text/unicode.h"
#include "tests/common/model/gguf_writer.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

TEST(GgufTokenizerTest, LlamaCppVocabVectorsPassFromTheGgufsOwnVocabulary) {
  const std::string dir = testing::SharedPath("models/ggml-vocab-llama-spm/");
  auto tok = LoadTokenizer(dir + "ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 32000);
  EXPECT_EQ((*tok)->prefix_ids(), std::vector<int>({1})) << "add_bos_token = true";
  EXPECT_TRUE((*tok)->suffix_ids().empty());
  const std::string inp = testing::ReadFile(dir + "ggml-vocab-llama-spm.gguf.inp");
  const std::string out = testing::ReadFile(dir + "ggml-vocab-llama-spm.gguf.out");
  std::vector<std::string> texts = absl::StrSplit(inp, "\n__ggml_vocab_test__\n");
  std::vector<std::string> expected = absl::StrSplit(out, '\n');
  // 47 pairs; the last is the empty text after the final separator, which encodes to nothing.
  ASSERT_EQ(texts.size(), 47u);
  ASSERT_GE(expected.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int> want;
    for (absl::string_view id : absl::StrSplit(expected[i], ' ', absl::SkipEmpty())) {
      want.push_back(std::stoi(std::string(id)));
    }
    EXPECT_EQ((*tok)->Encode(texts[i]), want) << "vector " << i << ": \"" << texts[i] << "\"";
    EXPECT_EQ((*tok)->Decode((*tok)->Encode(texts[i])), texts[i]) << "vector " << i;
  }
}

// A "gpt2" GGUF vocabulary made from a tokenizer.json, as llama.cpp's converter makes it.
std::string ByteLevelGguf(const std::string& tokenizer_json, const std::string& pre, bool add_bos) {
  auto j = ParseJson(testing::ReadFile(tokenizer_json), tokenizer_json);
  CHECK(j.ok()) << j.status();
  const Json& model = (*j)["model"];
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  auto put = [&](const std::string& piece, int id, int type) {
    if (static_cast<size_t>(id) >= tokens.size()) {
      tokens.resize(id + 1, "[PAD" + std::to_string(id) + "]");
      types.resize(id + 1, 5);
    }
    tokens[id] = piece;
    types[id] = type;
  };
  for (const auto& [piece, id] : model["vocab"].items()) put(piece, id.get<int>(), 1);
  for (const Json& a : (*j)["added_tokens"]) {
    put(a["content"].get<std::string>(), a["id"].get<int>(), 3);
  }
  std::vector<std::string> merges;
  for (const Json& m : model["merges"]) {
    merges.push_back(m.is_string() ? m.get<std::string>()
                                   : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  testing::GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddString("tokenizer.ggml.pre", pre);
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddI32Array("tokenizer.ggml.token_type", types);
  w.AddStringArray("tokenizer.ggml.merges", merges);
  w.AddU32("tokenizer.ggml.bos_token_id", 0);
  w.AddU32("tokenizer.ggml.eos_token_id", 1);
  w.AddBool("tokenizer.ggml.add_bos_token", add_bos);
  w.AddString("tokenizer.chat_template", "{{ messages }}");
  const std::string path = testing::TempDir() + "/" + pre + ".gguf";
  CHECK(w.Write(path).ok());
  return path;
}

void ExpectGoldenThroughGguf(const std::string& model, const std::string& pre,
                             const std::string& golden, bool nfc_sensitive_ok) {
  const std::string path =
      ByteLevelGguf(testing::SharedPath("models/" + model + "/tokenizer.json"), pre, true);
  auto tok = LoadTokenizer(path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->prefix_ids(), std::vector<int>({0}));
  EXPECT_EQ((*tok)->chat_template(), "{{ messages }}");
  auto cases = ParseJson(testing::ReadFile(testing::SharedPath("golden/" + golden)), golden);
  ASSERT_TRUE(cases.ok()) << cases.status();
  int checked = 0;
  for (const Json& c : (*cases)["cases"]) {
    const std::string text = c["text"].get<std::string>();
    // llama.cpp does not NFC-normalize (Qwen's tokenizer.json does): skip texts it changes.
    if (!nfc_sensitive_ok && NormalizeNfc(text) != text) continue;
    const std::vector<int> ids = c["ids"].get<std::vector<int>>();
    EXPECT_EQ((*tok)->Encode(text), ids) << model << ": \"" << text << "\"";
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

TEST(GgufTokenizerTest, ByteLevelVocabulariesEncodeLikeTheirTokenizerJson) {
  ExpectGoldenThroughGguf("llama3-tokenizer", "llama-bpe", "llama3_tokenizer.json", true);
  ExpectGoldenThroughGguf("qwen3-tokenizer", "qwen2", "qwen3_tokenizer.json", false);
}

TEST(GgufTokenizerTest, AddBosFollowsTheFileAndLlamaCppsDefaults) {
  const std::string json = testing::SharedPath("models/qwen3-tokenizer/tokenizer.json");
  auto no_bos = LoadTokenizer(ByteLevelGguf(json, "qwen2", false));
  ASSERT_TRUE(no_bos.ok()) << no_bos.status();
  EXPECT_TRUE((*no_bos)->prefix_ids().empty());
  EXPECT_EQ((*no_bos)->Encode("Hello", true), (*no_bos)->Encode("Hello"));
  auto refused = LoadTokenizer(ByteLevelGguf(json, "falcon", false));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("tokenizer.ggml.pre \"falcon\""));
}

}  // namespace
}  // namespace pagoda
