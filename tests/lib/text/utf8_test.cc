// Text sent in protobuf `string` fields and JSON must be valid UTF-8 whatever bytes the tokens
// carry (a bench with random prompts on a random model found invalid bytes in responses).
#include "lib/text/utf8.h"

#include "gtest/gtest.h"
#include "lib/text/incremental_decoder.h"
#include "lib/text/llama2c_tokenizer.h"
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

TEST(Utf8Test, DecodersGiveOneReplacementPerByteThatStartsNoCharacter) {
  // é, a stray continuation, an overlong '/', 😀 cut short by 'a', U+10FFFF.
  const std::string text =
      "\xC3\xA9\x80\xC0\xAF\xF0\x9F\x98"
      "a\xF4\x8F\xBF\xBF";
  const std::u32string cps = DecodeUtf8(text);
  EXPECT_EQ(cps,
            std::u32string({0xE9, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD, 'a', 0x10FFFF}));
  EXPECT_EQ(Utf8CodePointCount(text), cps.size());
  size_t length = 0;
  EXPECT_EQ(Utf8CodePointAt(text, 0, &length), 0xE9u);
  EXPECT_EQ(length, 2u);
  EXPECT_EQ(Utf8CodePointAt(text, 5, &length), 0xFFFDu) << "an incomplete character";
  EXPECT_EQ(length, 1u);
  EXPECT_EQ(EncodeUtf8(cps), ValidUtf8(text)) << "re-encoding is what ValidUtf8 keeps";
  EXPECT_EQ(EncodeUtf8(U"\u00E9\u20AC\U0001F600"), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

TEST(Utf8Test, SequenceLengthReadsOnlyTheLeadByte) {
  EXPECT_EQ(Utf8SequenceLength('a'), 1);
  EXPECT_EQ(Utf8SequenceLength(0xC0), 2) << "overlong, but a two-byte lead";
  EXPECT_EQ(Utf8SequenceLength(0xE4), 3);
  EXPECT_EQ(Utf8SequenceLength(0xF7), 4);
  EXPECT_EQ(Utf8SequenceLength(0x80), 0);
  EXPECT_EQ(Utf8SequenceLength(0xF8), 0);
}

}  // namespace
}  // namespace pagoda
