#include "router/spec/ngram_proposer.h"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<int> Propose(const std::vector<int>& tokens, int k, const NgramOptions& options = {}) {
  std::vector<int> draft;
  const int n = ProposeNgram(tokens, k, &draft, options);
  EXPECT_EQ(n, static_cast<int>(draft.size()));
  return draft;
}

TEST(NgramProposerTest, EmptyShortOrZeroKProposesNothing) {
  EXPECT_THAT(Propose({}, 4), IsEmpty());
  EXPECT_THAT(Propose({7}, 4), IsEmpty());
  EXPECT_THAT(Propose({7, 7, 7}, 0), IsEmpty());
  EXPECT_THAT(Propose({7, 7, 7}, -3), IsEmpty());
}

TEST(NgramProposerTest, ProposesWhatFollowedTheLatestEarlierOccurrence) {
  //                         1  2  3  (4  5)        1  2  3  (6  7)        1  2  3
  const std::vector<int> t = {1, 2, 3, 4, 5, 9, 9, 1, 2, 3, 6, 7, 8, 8, 8, 1, 2, 3};
  EXPECT_THAT(Propose(t, 2), ElementsAre(6, 7));
  EXPECT_THAT(Propose(t, 5), ElementsAre(6, 7, 8, 8, 8));
}

TEST(NgramProposerTest, TheLongestSuffixWinsOverAMoreRecentShorterOne) {
  // "2 3" is matched at 4 (-> 9) before "1 2 3" at 0 (-> 5); max_n = 3 takes the latter.
  const std::vector<int> t = {1, 2, 3, 5, 2, 3, 9, 0, 1, 2, 3};
  EXPECT_THAT(Propose(t, 1), ElementsAre(5));
  EXPECT_THAT(Propose(t, 1, {.min_n = 1, .max_n = 2}), ElementsAre(9));
}

TEST(NgramProposerTest, FallsBackToShorterSuffixesDownToMinN) {
  const std::vector<int> t = {4, 3, 8, 6, 3};  // only "3" occurs earlier
  EXPECT_THAT(Propose(t, 2), ElementsAre(8, 6));
  EXPECT_THAT(Propose(t, 2, {.min_n = 2, .max_n = 3}), IsEmpty());
}

TEST(NgramProposerTest, TheSuffixItselfIsNoMatch) {
  EXPECT_THAT(Propose({1, 2, 3, 4}, 3), IsEmpty());
  EXPECT_THAT(Propose({5, 6}, 3), IsEmpty());
}

TEST(NgramProposerTest, ALoopRepeatsWithItsPeriod) {
  EXPECT_THAT(Propose({1, 2, 1, 2, 1, 2}, 5), ElementsAre(1, 2, 1, 2, 1));
  EXPECT_THAT(Propose({0, 7, 8, 9, 7, 8, 9}, 7), ElementsAre(7, 8, 9, 7, 8, 9, 7));
  EXPECT_THAT(Propose({5, 5}, 3), ElementsAre(5, 5, 5));
  // A match one token before the end: period 1 ("3 3" -> 3 ...).
  EXPECT_THAT(Propose({1, 2, 3, 3}, 2), ElementsAre(3, 3));
}

TEST(NgramProposerTest, AppendsAfterWhatTheDraftHolds) {
  std::vector<int> draft = {42};
  EXPECT_EQ(ProposeNgram(std::vector<int>{1, 2, 1, 2}, 3, &draft), 3);
  EXPECT_THAT(draft, ElementsAre(42, 1, 2, 1));
}

TEST(NgramProposerTest, HugeAndNegativeTokenIdsAreJustIds) {
  const std::vector<int> t = {INT_MAX, INT_MIN, -1, 0, INT_MAX, INT_MIN};
  EXPECT_THAT(Propose(t, 3), ElementsAre(-1, 0, INT_MAX));
}

TEST(NgramProposerTest, MaxScanBoundsTheWindowSearched) {
  //                          0  1  2  3  4  5  6  7  8  9
  const std::vector<int> t = {1, 2, 6, 0, 2, 5, 0, 0, 1, 2};
  EXPECT_THAT(Propose(t, 1, {.max_scan = 10}), ElementsAre(6));  // "1 2" at 0
  EXPECT_THAT(Propose(t, 1, {.max_scan = 9}), ElementsAre(5));   // token 0 is out: "2" at 4
  EXPECT_THAT(Propose(t, 1, {.max_scan = 5}), IsEmpty());
  EXPECT_THAT(Propose(t, 1, {.max_scan = 0}), IsEmpty());
}

// The definition, spelled out: every n, every start, the sequence extended as it is drafted.
std::vector<int> BruteForce(const std::vector<int>& tokens, int k, const NgramOptions& o) {
  const int size = static_cast<int>(tokens.size());
  const int begin = std::max(0, size - o.max_scan);
  if (k <= 0) return {};
  for (int n = o.max_n; n >= o.min_n; --n) {
    for (int e = size - 1; e - n >= begin; --e) {
      bool match = true;
      for (int i = 0; i < n && match; ++i) match = tokens[e - n + i] == tokens[size - n + i];
      if (!match) continue;
      std::vector<int> seq = tokens;
      for (int i = 0; i < k; ++i) seq.push_back(seq[e + i]);
      return std::vector<int>(seq.begin() + size, seq.end());
    }
  }
  return {};
}

TEST(NgramProposerTest, AgreesWithBruteForceOnRandomStreams) {
  std::mt19937 rng(27);
  for (int trial = 0; trial < 20000; ++trial) {
    // Dense streams (a match in every block of the vector scan) and sparse ones (long runs
    // without the last token, a few copies of the suffix planted).
    const bool dense = trial % 2 == 0;
    const int vocab = dense ? 2 + static_cast<int>(rng() % 6) : 300;
    std::vector<int> tokens(rng() % (dense ? 60 : 400));
    for (int& t : tokens) t = static_cast<int>(rng() % vocab) - 2;  // negative ids too
    if (!dense && tokens.size() > 8) {
      for (int copies = static_cast<int>(rng() % 3); copies > 0; --copies) {
        const size_t length = 1 + rng() % 4;
        const size_t at = rng() % (tokens.size() - length);
        std::copy(tokens.end() - static_cast<ptrdiff_t>(length), tokens.end(),
                  tokens.begin() + static_cast<ptrdiff_t>(at));
      }
    }
    NgramOptions o;
    o.min_n = 1 + static_cast<int>(rng() % 3);
    o.max_n = o.min_n + static_cast<int>(rng() % 4);
    o.max_scan = static_cast<int>(rng() % (tokens.size() + 10));
    const int k = static_cast<int>(rng() % 10);
    ASSERT_EQ(Propose(tokens, k, o), BruteForce(tokens, k, o))
        << "trial " << trial << " min_n " << o.min_n << " max_n " << o.max_n << " max_scan "
        << o.max_scan << " k " << k;
  }
}

}  // namespace
}  // namespace pagoda
