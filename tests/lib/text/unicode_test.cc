// Unicode normalization, against Python's unicodedata.
#include "lib/text/unicode.h"

#include "gtest/gtest.h"

namespace pagoda {
namespace {

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
