#include "router/link/loading_board.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1'000'000);

LoadReport Report(std::string name, int64_t done, int64_t total) {
  return {.worker_name = std::move(name),
          .what = "loading weights",
          .done_bytes = done,
          .total_bytes = total,
          .elapsed_ms = 2000};
}

TEST(LoadingBoardTest, AReportIsLoggedOnceAnIntervalAndListedUntilItsWorkerConnects) {
  LoadingBoard board(absl::Seconds(5));
  auto line =
      board.Report(Report("h:12", 500'000'000, 1'000'000'000), "ipv4:10.0.0.5:4711", kStart);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->value_or(""),
            "worker h:12 (ipv4:10.0.0.5:4711) loading weights: 500.0 / 1000.0 MB (50%), 250 "
            "MB/s, 2 s left");
  // Too soon for another log line, but the board has the newer figure.
  line = board.Report(Report("h:12", 750'000'000, 1'000'000'000), "p", kStart + absl::Seconds(1));
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(*line, std::nullopt);
  EXPECT_THAT(board.Loading(kStart + absl::Seconds(1)),
              ElementsAre(HasSubstr("h:12 loading weights: 750.0 / 1000.0 MB (75%)")));
  EXPECT_TRUE(board.Report(Report("h:12", 800, 1000), "p", kStart + absl::Seconds(6))->has_value());
  // A report goes stale; a connected worker is off the board at once.
  EXPECT_TRUE(
      board.Loading(kStart + absl::Seconds(6) + LoadingBoard::kFresh + absl::Seconds(1)).empty());
  board.Connected("h:12");
  EXPECT_TRUE(board.Loading(kStart + absl::Seconds(6)).empty());
}

TEST(LoadingBoardTest, OutOfRangeReportsAreRefusedByField) {
  LoadingBoard board;
  auto refused = [&](const LoadReport& r) {
    absl::StatusOr<std::optional<std::string>> line = board.Report(r, "p", kStart);
    EXPECT_EQ(line.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(line.status().message());
  };
  EXPECT_THAT(refused(Report("", 1, 2)), HasSubstr("worker_name"));
  EXPECT_THAT(refused(Report("a\nforged log line", 1, 2)), HasSubstr("worker_name"));
  EXPECT_THAT(refused(Report(std::string(129, 'a'), 1, 2)), HasSubstr("worker_name"));
  LoadReport bad_what = Report("w", 1, 2);
  bad_what.what = "\x1b[2J";
  EXPECT_THAT(refused(bad_what), HasSubstr("what"));
  EXPECT_THAT(refused(Report("w", 3, 2)), HasSubstr("done_bytes"));
  EXPECT_THAT(refused(Report("w", -1, 2)), HasSubstr("done_bytes"));
  EXPECT_THAT(refused(Report("w", 1, -2)), HasSubstr("total_bytes"));
  EXPECT_THAT(refused(Report("w", 1, int64_t{1} << 60)), HasSubstr("total_bytes"));
  LoadReport bad_time = Report("w", 1, 2);
  bad_time.elapsed_ms = -5;
  EXPECT_THAT(refused(bad_time), HasSubstr("elapsed_ms"));
  EXPECT_TRUE(board.Loading(kStart).empty());
  // An unknown total is fine: no percent then.
  EXPECT_TRUE(board.Report(Report("w", 7, 0), "p", kStart).ok());
}

TEST(LoadingBoardTest, ItHoldsAtMostItsBoundStalestFirstOut) {
  LoadingBoard board;
  for (int i = 0; i <= LoadingBoard::kMaxWorkers; ++i) {
    ASSERT_TRUE(
        board.Report(Report(absl::StrCat("w", i), 1, 2), "p", kStart + absl::Seconds(i) / 1000)
            .ok());
  }
  const std::vector<std::string> listed = board.Loading(kStart + absl::Seconds(2));
  EXPECT_EQ(listed.size(), static_cast<size_t>(LoadingBoard::kMaxWorkers));
  EXPECT_THAT(listed, ::testing::Not(::testing::Contains(HasSubstr("w0 "))));
}

}  // namespace
}  // namespace pagoda
