#include "router/spec/suffix_index.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<int> Propose(const SuffixIndex& index, const std::vector<int>& context, int k) {
  std::vector<int> draft;
  const int n = index.Propose(context, k, &draft);
  EXPECT_EQ(n, static_cast<int>(draft.size()));
  return draft;
}

SuffixIndexOptions Options(int64_t max_tokens, int min_n, int max_n, int max_chain = 32) {
  return {.max_tokens = max_tokens, .min_n = min_n, .max_n = max_n, .max_chain = max_chain};
}

TEST(SuffixIndexTest, EmptyIndexShortContextOrZeroKProposesNothing) {
  SuffixIndex index(Options(64, 2, 3));
  EXPECT_THAT(Propose(index, {1, 2}, 4), IsEmpty());
  index.Add({}, std::vector<int>{1, 2, 3});
  EXPECT_THAT(Propose(index, {1, 2}, 4), ElementsAre(3));
  EXPECT_THAT(Propose(index, {1, 2}, 0), IsEmpty());
  EXPECT_THAT(Propose(index, {2}, 4), IsEmpty());  // shorter than min_n
  EXPECT_THAT(Propose(index, {}, 4), IsEmpty());
  index.Add(std::vector<int>{1, 2}, {});  // an empty output adds nothing
  EXPECT_EQ(index.num_tokens(), 3u);
}

TEST(SuffixIndexTest, ProposesTheRestOfAnEarlierOutputUpToItsEnd) {
  SuffixIndex index(Options(64, 1, 3));
  index.Add({}, std::vector<int>{5, 6, 7, 8, 9});
  index.Add({}, std::vector<int>{40, 41});
  EXPECT_THAT(Propose(index, {0, 5, 6}, 2), ElementsAre(7, 8));
  EXPECT_THAT(Propose(index, {0, 5, 6}, 10), ElementsAre(7, 8, 9));  // not into the next Add
  EXPECT_THAT(Propose(index, {9}, 3), IsEmpty());                    // a match at the very end
}

TEST(SuffixIndexTest, TheContextTailPredictsTheOutputsStartButIsNeverProposed) {
  SuffixIndex index(Options(64, 2, 2));
  index.Add(std::vector<int>{1, 2, 3, 4}, std::vector<int>{10, 11});
  EXPECT_THAT(Propose(index, {7, 3, 4}, 3), ElementsAre(10, 11));
  EXPECT_THAT(Propose(index, {2, 3}, 3), IsEmpty());  // followed by a context token
  EXPECT_THAT(Propose(index, {1, 2}, 3), IsEmpty());  // beyond max_n: not even kept
  EXPECT_EQ(index.num_tokens(), 4u);
}

TEST(SuffixIndexTest, TheLongestSuffixWins) {
  SuffixIndex index(Options(64, 1, 3));
  index.Add({}, std::vector<int>{1, 2, 3, 50});
  index.Add({}, std::vector<int>{9, 2, 3, 60});
  index.Add({}, std::vector<int>{3, 70});
  EXPECT_THAT(Propose(index, {1, 2, 3}, 1), ElementsAre(50));
  EXPECT_THAT(Propose(index, {8, 2, 3}, 1), ElementsAre(60));
  EXPECT_THAT(Propose(index, {8, 8, 3}, 1), ElementsAre(70));
}

TEST(SuffixIndexTest, TheContinuationSeenMostOftenWinsTiesTheMostRecent) {
  SuffixIndex index(Options(64, 2, 2));
  index.Add({}, std::vector<int>{1, 2, 7, 7});
  index.Add({}, std::vector<int>{1, 2, 7, 8});
  index.Add({}, std::vector<int>{1, 2, 9});
  // 7 twice against 9 once (the most recent), then 8 against 7 (a tie: the most recent).
  EXPECT_THAT(Propose(index, {1, 2}, 3), ElementsAre(7, 8));
  index.Add({}, std::vector<int>{1, 2, 9, 5});
  EXPECT_THAT(Propose(index, {1, 2}, 3), ElementsAre(9, 5));  // 2 against 2
}

TEST(SuffixIndexTest, EveryTokenOfTheDraftIsTheOneSeenMostOften) {
  SuffixIndex index(Options(64, 2, 2));
  index.Add({}, std::vector<int>{1, 2, 3, 4, 6});
  index.Add({}, std::vector<int>{1, 2, 3, 4, 7});
  index.Add({}, std::vector<int>{1, 2, 3, 5});
  // 3 three times, then 4 twice against 5 once (the most recent), then 7 against 6 (a tie).
  EXPECT_THAT(Propose(index, {1, 2}, 8), ElementsAre(3, 4, 7));
}

TEST(SuffixIndexTest, ALoopInAnOutputIsProposedAsItRan) {
  SuffixIndex index(Options(64, 1, 3));
  index.Add(std::vector<int>{0}, std::vector<int>{1, 2, 1, 2, 1, 2, 1, 2});
  EXPECT_THAT(Propose(index, {9, 1, 2}, 4), ElementsAre(1, 2, 1, 2));
}

TEST(SuffixIndexTest, HugeAndNegativeTokenIdsAreJustIds) {
  SuffixIndex index(Options(64, 1, 3));
  index.Add(std::vector<int>{INT_MIN}, std::vector<int>{INT_MAX, -1, 0, INT_MIN});
  EXPECT_THAT(Propose(index, {INT_MIN, INT_MAX}, 4), ElementsAre(-1, 0, INT_MIN));
  EXPECT_THAT(Propose(index, {-1}, 1), ElementsAre(0));
}

TEST(SuffixIndexTest, TheRingEvictsTheOldestAndNeverProposesOverwrittenTokens) {
  SuffixIndex index(Options(8, 1, 2));
  index.Add({}, std::vector<int>{1, 2, 3, 4});     // positions 0-3
  index.Add({}, std::vector<int>{9, 9, 9, 9, 9});  // 4-8: position 0 evicted
  EXPECT_EQ(index.num_tokens(), 8u);
  EXPECT_THAT(Propose(index, {1, 2}, 4), ElementsAre(3, 4));  // "2" is still held
  index.Add({}, std::vector<int>{9, 9});                      // 9-10: positions 1 and 2 evicted
  EXPECT_EQ(index.num_tokens(), 8u);
  EXPECT_THAT(Propose(index, {1, 2}, 4), IsEmpty());
  EXPECT_THAT(Propose(index, {3}, 4), IsEmpty());
  EXPECT_THAT(Propose(index, {4}, 4), IsEmpty());                // held, but the last of its Add
  EXPECT_THAT(Propose(index, {9, 9}, 4), ElementsAre(9, 9, 9));  // 4-6 go on the longest
}

TEST(SuffixIndexTest, AnAddLongerThanTheRingKeepsItsEnd) {
  SuffixIndex index(Options(4, 1, 2));
  index.Add(std::vector<int>{1, 2}, std::vector<int>{3, 4, 5, 6, 7});
  EXPECT_EQ(index.num_tokens(), 4u);
  EXPECT_THAT(Propose(index, {4, 5}, 4), ElementsAre(6, 7));
  EXPECT_THAT(Propose(index, {3}, 4), IsEmpty());
  EXPECT_THAT(Propose(index, {2}, 4), IsEmpty());
}

TEST(SuffixIndexTest, MemoryIsBoundedByMaxTokens) {
  SuffixIndex index(Options(1000, 2, 4));
  const size_t bytes = index.memory_bytes();
  EXPECT_LE(bytes, 1000u * (4 + 3 * (4 + 8)));
  std::vector<int> output(100);
  for (int i = 0; i < 100; ++i) {
    std::iota(output.begin(), output.end(), i);
    index.Add({}, output);
  }
  EXPECT_EQ(index.num_tokens(), 1000u);
  EXPECT_LE(index.memory_bytes(), bytes + 11 * 24);  // the ring's Adds: at most 11 held
}

// Adds and proposals from several threads at once (worker loops share one index per model).
TEST(SuffixIndexTest, ConcurrentAddsAndProposalsSeeWholeAdds) {
  SuffixIndex index(Options(256, 1, 3));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&index, t] {
      std::vector<int> draft;
      for (int i = 0; i < 2000; ++i) {
        if (t % 2 == 0) {
          index.Add(std::vector<int>{t}, std::vector<int>{1, 2, 3, 4, 5, 6});
        } else {
          draft.clear();
          const int n = index.Propose(std::vector<int>{t, 1, 2}, 4, &draft);
          if (n > 0) {
            ASSERT_THAT(draft, ElementsAre(3, 4, 5, 6));
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(index.num_tokens(), 256u);
}

// The contract spelled out over every held position, as the Adds laid them out.
class ReferenceIndex {
 public:
  explicit ReferenceIndex(const SuffixIndexOptions& options) : o_(options) {}

  void Add(std::vector<int> context, std::vector<int> output) {
    if (output.empty()) return;
    const size_t max_n = static_cast<size_t>(o_.max_n);
    if (context.size() > max_n) context.erase(context.begin(), context.end() - max_n);
    while (context.size() + output.size() > static_cast<size_t>(o_.max_tokens)) {
      if (!context.empty()) {
        context.erase(context.begin());
      } else {
        output.erase(output.begin());
      }
    }
    const int64_t start = static_cast<int64_t>(tokens_.size());
    const int64_t output_start = start + static_cast<int64_t>(context.size());
    tokens_.insert(tokens_.end(), context.begin(), context.end());
    tokens_.insert(tokens_.end(), output.begin(), output.end());
    for (int64_t p = start; p < static_cast<int64_t>(tokens_.size()); ++p) {
      start_.push_back(start);
      output_start_.push_back(output_start);
      end_.push_back(static_cast<int64_t>(tokens_.size()));
    }
  }

  std::vector<int> Propose(const std::vector<int>& context, int k) const {
    const int size = static_cast<int>(context.size());
    if (k <= 0) return {};
    const int64_t next = static_cast<int64_t>(tokens_.size());
    const int64_t oldest = std::max<int64_t>(0, next - o_.max_tokens);
    for (int n = std::min(o_.max_n, size); n >= o_.min_n; --n) {
      std::vector<int64_t> ends;  // most recent first
      for (int64_t e = next - 1; e >= oldest; --e) {
        if (e - n + 1 < std::max(oldest, start_[e]) || e + 1 < output_start_[e] ||
            e + 1 >= end_[e]) {
          continue;
        }
        if (std::equal(context.end() - n, context.end(), tokens_.begin() + (e - n + 1))) {
          ends.push_back(e);
        }
      }
      if (ends.empty()) continue;
      // The most frequent path: at each offset the token most survivors have (ties: the first
      // of them, the most recent), then only those survive.
      std::vector<int> draft;
      for (int j = 0; j < k; ++j) {
        std::vector<int64_t> survivors;
        for (int64_t e : ends) {
          if (end_[e] - (e + 1) > j) survivors.push_back(e);
        }
        if (survivors.empty()) break;
        int best_token = 0, best_count = 0;
        for (int64_t e : survivors) {
          const int token = tokens_[e + 1 + j];
          const int count =
              static_cast<int>(std::count_if(survivors.begin(), survivors.end(), [&](int64_t f) {
                return tokens_[f + 1 + j] == token;
              }));
          if (count > best_count) best_token = token, best_count = count;
        }
        draft.push_back(best_token);
        ends.clear();
        for (int64_t e : survivors) {
          if (tokens_[e + 1 + j] == best_token) ends.push_back(e);
        }
      }
      return draft;
    }
    return {};
  }

  // Whether `draft` is what followed some held occurrence of a suffix of `context` (n from
  // min_n to max_n), up to k tokens or the end of its Add.
  bool IsContinuation(const std::vector<int>& context, int k, const std::vector<int>& draft) const {
    const int64_t next = static_cast<int64_t>(tokens_.size());
    const int64_t oldest = std::max<int64_t>(0, next - o_.max_tokens);
    const int size = static_cast<int>(context.size());
    for (int n = o_.min_n; n <= std::min(o_.max_n, size); ++n) {
      for (int64_t e = oldest; e < next; ++e) {
        if (e - n + 1 < std::max(oldest, start_[e]) || e + 1 < output_start_[e] ||
            e + 1 >= end_[e] ||
            !std::equal(context.end() - n, context.end(), tokens_.begin() + (e - n + 1))) {
          continue;
        }
        const int64_t to = std::min<int64_t>(end_[e], e + 1 + k);
        if (std::vector<int>(tokens_.begin() + e + 1, tokens_.begin() + to) == draft) return true;
      }
    }
    return false;
  }

 private:
  const SuffixIndexOptions o_;
  std::vector<int> tokens_;                          // every position ever added, evicted or not
  std::vector<int64_t> start_, output_start_, end_;  // per position: its Add's bounds
};

// Random Adds and proposals on a small vocabulary (many matches, many collisions, the ring
// wrapping often); `check` compares one proposal with the reference.
template <typename Check>
void RandomStreams(int max_chain, Check check) {
  std::mt19937 rng(27);
  int num_drafts = 0;
  for (int trial = 0; trial < 300; ++trial) {
    SuffixIndexOptions o;
    o.max_tokens = 1 + static_cast<int64_t>(rng() % 64);
    o.min_n = 1 + static_cast<int>(rng() % 3);
    o.max_n = o.min_n + static_cast<int>(rng() % 3);
    o.max_chain = max_chain;
    SuffixIndex index(o);
    ReferenceIndex reference(o);
    const int vocab = 2 + static_cast<int>(rng() % 4);
    auto random_tokens = [&](int max_length) {
      std::vector<int> t(rng() % (max_length + 1));
      for (int& x : t) x = static_cast<int>(rng() % vocab) - 1;
      return t;
    };
    for (int step = 0; step < 60; ++step) {
      if (rng() % 3 == 0) {
        const std::vector<int> context = random_tokens(5);
        const std::vector<int> output = random_tokens(24);
        index.Add(context, output);
        reference.Add(context, output);
        ASSERT_LE(index.num_tokens(), static_cast<size_t>(o.max_tokens));
      } else {
        const std::vector<int> context = random_tokens(6);
        const int k = static_cast<int>(rng() % 8);
        const std::vector<int> draft = Propose(index, context, k);
        num_drafts += !draft.empty();
        check(reference, context, k, draft);
        ASSERT_FALSE(::testing::Test::HasFailure())
            << "trial " << trial << " step " << step << " max_tokens " << o.max_tokens << " min_n "
            << o.min_n << " max_n " << o.max_n;
      }
    }
  }
  EXPECT_GT(num_drafts, 3000);  // of ~12000 proposals: the streams do match
}

TEST(SuffixIndexTest, AgreesWithBruteForceOnRandomStreams) {
  // max_chain >= max_tokens: every walk reaches every held entry, so the choice is exact.
  RandomStreams(
      256, [](const ReferenceIndex& reference, const std::vector<int>& context, int k,
              const std::vector<int>& draft) { EXPECT_EQ(draft, reference.Propose(context, k)); });
}

TEST(SuffixIndexTest, ShortWalksStillProposeOnlyHeldContinuations) {
  RandomStreams(2, [](const ReferenceIndex& reference, const std::vector<int>& context, int k,
                      const std::vector<int>& draft) {
    if (draft.empty()) return;
    EXPECT_TRUE(reference.IsContinuation(context, k, draft));
  });
}

}  // namespace
}  // namespace pagoda
