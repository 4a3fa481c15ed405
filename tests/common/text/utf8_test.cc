// Text sent in protobuf `string` fields and JSON must be valid UTF-8 whatever bytes the tokens
// carry (a bench with random prompts on a random model found invalid bytes in responses).
#include "common/text/utf8.h"

#include "common/text/incremental_decoder.h"
#include "common/text/llama2c_tokenizer.h"
#include "common/text/unicode.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

TEST(Utf8Test, CharLengthTellsValidInvalidAndIncomplete) {
  EXPECT_EQ(Utf8CharLength("a"), 1);
  EXPECT_EQ(Utf8CharLength("\xC3\xA9"), 2);          // é
  EXPECT_EQ(Utf8CharLength("\xF0\x9F\x98\x80"), 4);  // 😀
  EXPECT_EQ(Utf8CharLength("\x80"), 0);              // stray continuation
  EXPECT_EQ(Utf8CharLength("\xC0\xAF"), 0);          // overlong
  EXPECT_EQ(Utf8CharLength("\xED\xA0\x80"), 0);      // surrogate
  EXPECT_EQ(Utf8CharLength("\xE4\x61"), 0);          // lead, then not a continuation
  EXPECT_EQ(Utf8CharLength("\xF8\x80\x80\x80"), 0);  // no such lead
  EXPECT_EQ(Utf8CharLength("\xF0\x9F\x98"), kUtf8Incomplete);
  EXPECT_EQ(ValidUtf8("a\x80"
                      "b\xE4"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
}

TEST(Utf8Test, TheDecoderEmitsOnlyValidUtf8WhateverTheBytes) {
  auto tok = Llama2cTokenizer::Load(testing::SharedPath("models/llama2-tokenizer/tokenizer.bin"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto byte = [](int b) { return 3 + b; };  // <0xNN> byte-fallback tokens
  IncrementalDecoder decoder(tok->get(), 1);
  std::string text;
  for (int b : {0x80, 0xE4, 0xBD, 0x61, 0xF0, 0x9F, 0x98, 0x80, 0xE4}) {
    const std::string piece = decoder.Append(byte(b));
    EXPECT_EQ(ValidUtf8(piece), piece) << "after byte " << b;
    text += piece;
  }
  const std::string rest = decoder.Flush();
  EXPECT_EQ(ValidUtf8(rest), rest);
  text += rest;
  // A stray 0x80; E4 BD cut short by 'a' (two bytes that start nothing); 😀; a lone E4.
  EXPECT_EQ(text,
            "\xEF\xBF\xBD"
            "\xEF\xBF\xBD\xEF\xBF\xBD"
            "a"
            "\xF0\x9F\x98\x80"
            "\xEF\xBF\xBD");
}

TEST(UnicodeTest, NfcComposesReordersAndLeavesComposedTextAlone) {
  // Expected values from Python's unicodedata.normalize("NFC", ...), Unicode 14.
  EXPECT_EQ(NormalizeNfc("cafe\u0301"), "caf\u00E9");
  EXPECT_EQ(NormalizeNfc("caf\u00E9 na\u00EFve"), "caf\u00E9 na\u00EFve");
  EXPECT_EQ(NormalizeNfc("\u1100\u1161\u11A8"), "\uAC01");   // Hangul L V T
  EXPECT_EQ(NormalizeNfc("a\u0323\u0302"), "\u1EAD");        // ậ: dot below, circumflex
  EXPECT_EQ(NormalizeNfc("a\u0302\u0323"), "\u1EAD");        // ... in either order
  EXPECT_EQ(NormalizeNfc("\u212B"), "\u00C5");               // Angstrom sign -> Å
  EXPECT_EQ(NormalizeNfc("\u0958"), "\u0915\u093C");         // excluded from composing
  EXPECT_EQ(NormalizeNfc("e\u0301\u0301"), "\u00E9\u0301");  // the second one blocked
  EXPECT_EQ(NormalizeNfc("日本語のテキスト"), "日本語のテキスト");
}

}  // namespace
}  // namespace pagoda
