#include "worker/kv_ledger.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int kBs = 4;

std::vector<int> Range(int from, int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

// (block, parent index, first token) of each exported block.
struct Row {
  int block, parent, first;
  bool operator==(const Row&) const = default;
};
std::vector<Row> Rows(const std::vector<CachedBlock>& out) {
  std::vector<Row> rows;
  for (const CachedBlock& c : out) rows.push_back({c.block, c.parent, c.tokens.at(0)});
  return rows;
}

TEST(KvLedgerTest, FullBlocksOfASequenceAreExportedParentsFirst) {
  KvLedger ledger(8, kBs);
  const std::vector<int> table = {5, 2, 7};
  // A prompt of 10 tokens in two chunks, then a decode: blocks 5 and 2 full, 7 partial.
  ledger.Wrote(table, 0, Range(100, 6));
  ledger.Wrote(table, 6, Range(106, 4));
  ledger.Wrote(table, 10, Range(110, 1));
  const std::vector<CachedBlock> out = ledger.Export(8);
  EXPECT_EQ(Rows(out), (std::vector<Row>{{5, -1, 100}, {2, 0, 104}}));
  EXPECT_THAT(out[1].tokens, ElementsAre(104, 105, 106, 107));
}

TEST(KvLedgerTest, ReusingAParentBreaksItsChildren) {
  KvLedger ledger(8, kBs);
  ledger.Wrote(std::vector<int>{1, 2}, 0, Range(0, 8));
  // Block 1 now starts another sequence: block 2's K/V attended to what 1 held before.
  ledger.Wrote(std::vector<int>{1}, 0, Range(50, 4));
  EXPECT_EQ(Rows(ledger.Export(8)), (std::vector<Row>{{1, -1, 50}}));
}

TEST(KvLedgerTest, ARewrittenPositionBreaksTheChildrenButKeepsTheBlock) {
  KvLedger ledger(8, kBs);
  const std::vector<int> table = {3, 4, 6};
  ledger.Wrote(table, 0, Range(0, 12));
  // A rejected draft's positions written again with other tokens (block 4, offsets 2..3).
  ledger.Wrote(table, 6, std::vector<int>{90, 91});
  const std::vector<CachedBlock> out = ledger.Export(8);
  EXPECT_EQ(Rows(out), (std::vector<Row>{{3, -1, 0}, {4, 0, 4}}));
  EXPECT_THAT(out[1].tokens, ElementsAre(4, 5, 90, 91));
}

TEST(KvLedgerTest, GapsForeignWritesAndPullsAreNeverVouchedFor) {
  KvLedger ledger(8, kBs);
  ledger.Wrote(std::vector<int>{0}, 2, Range(0, 2));  // offsets 2..3 with 0..1 unknown
  ledger.Wrote(std::vector<int>{1, 2}, 0, Range(0, 8));
  ledger.Overwritten(1);  // a pull wrote block 1 (and so block 2's parent changed)
  ledger.Wrote(std::vector<int>{3, 4}, 0, Range(0, 6));
  ledger.Wrote(std::vector<int>{5, 4}, 6, Range(6, 2));  // another parent: another lineage
  EXPECT_EQ(Rows(ledger.Export(8)), (std::vector<Row>{{3, -1, 0}}));
}

TEST(KvLedgerTest, ACopyHoldsWhatItsSourceHolds) {
  KvLedger ledger(8, kBs);
  ledger.Wrote(std::vector<int>{0, 1}, 0, Range(0, 6));
  ledger.Copied(1, 5);  // copy-on-write of the shared partial block
  ledger.Wrote(std::vector<int>{0, 5}, 6, Range(20, 2));
  ledger.Wrote(std::vector<int>{0, 1}, 6, Range(30, 2));
  const std::vector<CachedBlock> out = ledger.Export(8);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].block, 0);
  EXPECT_THAT(out[1].tokens, ElementsAre(4, 5, 20, 21));  // the copy (block 5)
  EXPECT_THAT(out[2].tokens, ElementsAre(4, 5, 30, 31));  // the source, written on
  EXPECT_EQ(out[1].parent, 0);
  EXPECT_EQ(out[2].parent, 0);
}

TEST(KvLedgerTest, ExportStopsAtItsCapWithWholeChainsFirst) {
  KvLedger ledger(8, kBs);
  ledger.Wrote(std::vector<int>{0, 1, 2}, 0, Range(0, 12));
  ledger.Wrote(std::vector<int>{3, 4}, 0, Range(100, 8));
  EXPECT_EQ(Rows(ledger.Export(4)),
            (std::vector<Row>{{0, -1, 0}, {1, 0, 4}, {2, 1, 8}, {3, -1, 100}}));
  EXPECT_THAT(ledger.Export(0), IsEmpty());
}

TEST(KvLedgerTest, ASaltedSequencesBlocksAreNeverOffered) {
  KvLedger ledger(8, kBs);
  ledger.Wrote(std::vector<int>{0, 1}, 0, Range(0, 8), /*offer=*/false);
  ledger.Wrote(std::vector<int>{2}, 0, Range(0, 4));
  EXPECT_EQ(Rows(ledger.Export(8)), (std::vector<Row>{{2, -1, 0}}));
}

}  // namespace
}  // namespace pagoda
