// The real vocabularies the grammar tests walk: Llama 2's (32k, SentencePiece) and Llama 3's
// (128k, byte-level BPE), as TokenVocabulary reads them.
#ifndef PAGODA_TESTS_LIB_GRAMMAR_TEST_VOCABULARY_H_
#define PAGODA_TESTS_LIB_GRAMMAR_TEST_VOCABULARY_H_

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/grammar/token_vocabulary.h"
#include "lib/text/tokenizer_loader.h"
#include "tests/test_util.h"

namespace pagoda::testing {

// Special tokens (<unk>, <s>, </s>, <|...|>) get no bytes: a grammar never allows them.
inline bool LooksSpecial(const Tokenizer& tok, int id, const std::string& bytes) {
  if (id == tok.bos_id() || id == tok.eos_id()) return true;
  if (bytes == "<unk>" || bytes == "<s>" || bytes == "</s>") return true;
  return bytes.size() > 4 && bytes.starts_with("<|") && bytes.ends_with("|>");
}

// `rel` under the shared folder, e.g. "models/llama3-tokenizer/tokenizer.json".
inline std::shared_ptr<const TokenVocabulary> LoadVocabulary(const std::string& rel) {
  auto tok = LoadTokenizer(SharedPath(rel));
  EXPECT_TRUE(tok.ok()) << tok.status();
  if (!tok.ok()) return nullptr;
  std::vector<std::string> bytes((*tok)->vocab_size());
  for (int id = 0; id < (*tok)->vocab_size(); ++id) {
    // Mid-text bytes: after EOS no SentencePiece leading space is dropped.
    std::string b = (*tok)->TokenBytes((*tok)->eos_id(), id);
    if (!LooksSpecial(**tok, id, b)) bytes[id] = std::move(b);
  }
  auto v = TokenVocabulary::Create(std::move(bytes), {(*tok)->eos_id()});
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : nullptr;
}

}  // namespace pagoda::testing

#endif  // PAGODA_TESTS_LIB_GRAMMAR_TEST_VOCABULARY_H_
