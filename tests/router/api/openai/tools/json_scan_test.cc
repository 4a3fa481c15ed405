// JsonScanner, fed a text in pieces, answers as ScanJsonValue does on each whole prefix: the
// streamed tool-call parser relies on it to read each token's text once.
#include "router/api/openai/tools/json_scan.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pagoda {
namespace {

TEST(JsonScannerTest, PiecesGiveWhatEachPrefixGivesWhole) {
  const std::vector<std::string> texts = {
      R"(  {"a": [1, -2.5e+3, 0, true, false, null, "x\"\\\/\b\f\n\r\t\u00e9"], "b": {}} tail)",
      R"([[], {}, [{"k": [0.5E-2]}], "é漢😀"])",
      R"({"n": 01})",
      R"({"n": 1.})",
      R"({"n": -})",
      R"({"n": 1e})",
      R"({"a" 1})",
      R"({"a": 1,})",
      R"([1 2])",
      R"({"s": "\q"})",
      R"({"s": "\u12G4"})",
      R"(tru)",
      R"(trux)",
      R"(-0.0e-0 )",
      R"(12)",
      R"("a)"
      "\x01\"",
      "\"\xc3\x28\"",
      "\"\xe0\x80\x80\"",
      "\"\xf4\x90\x80\x80\"",
      "\"\xed\x9f\xbf\"",
      std::string(63, '[') + std::string(63, ']'),
      std::string(64, '[') + std::string(64, ']'),
      std::string(65, '['),
      "x",
      "",
  };
  std::mt19937 rng(11);
  for (const std::string& text : texts) {
    for (int split = 0; split < 4; ++split) {
      JsonScanner scanner(0);
      size_t len = 0;
      while (true) {
        const std::string_view prefix(text.data(), len);
        size_t want_end = 0, got_end = 0;
        const ScanResult want = ScanJsonValue(prefix, &want_end);
        const ScanResult got = scanner.Scan(prefix, &got_end);
        ASSERT_EQ(got, want) << "\"" << text << "\" cut at " << len;
        if (want == ScanResult::kComplete) {
          ASSERT_EQ(got_end, want_end) << text;
        }
        if (len == text.size()) break;
        len = std::min(text.size(), len + 1 + (split == 0 ? 0 : rng() % (3 * split)));
      }
    }
  }
}

}  // namespace
}  // namespace pagoda
