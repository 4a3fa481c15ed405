#include "common/process/progress_meter.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ProgressMeterTest, DescribeSaysBytesPercentRateAndTimeLeft) {
  EXPECT_EQ(ProgressMeter::Describe(int64_t{1200} << 20, int64_t{2200} << 20, absl::Seconds(2)),
            "1.3 / 2.3 GB (54%), 629 MB/s, 2 s left");
  EXPECT_EQ(ProgressMeter::Describe(50'000'000, 100'000'000, absl::Seconds(1)),
            "50.0 / 100.0 MB (50%), 50 MB/s, 1 s left");
  // No total: no percent and no estimate; nothing done yet: no rate.
  EXPECT_EQ(ProgressMeter::Describe(3'000'000, 0, absl::Seconds(1)), "3.0 MB, 3 MB/s");
  EXPECT_EQ(ProgressMeter::Describe(0, 100'000'000, absl::ZeroDuration()), "0.0 / 100.0 MB (0%)");
}

TEST(ProgressMeterTest, OnATerminalTheLineIsRedrawnInPlaceAndEndsAtOneHundredPercent) {
  char* buffer = nullptr;
  size_t size = 0;
  FILE* terminal = open_memstream(&buffer, &size);
  ASSERT_NE(terminal, nullptr);
  {
    ProgressMeter meter("loading weights", 100'000'000, ProgressMeter::Mode::kTerminal, terminal);
    meter.Add(60'000'000);
    meter.Add(30'000'000);  // the estimate was a little high: Done still says 100%
  }
  std::fclose(terminal);
  const std::string out(buffer, size);
  std::free(buffer);
  EXPECT_THAT(out, StartsWith("\rloading weights: "));
  EXPECT_THAT(out, HasSubstr("100.0 / 100.0 MB (100%) in "));
  EXPECT_THAT(out, EndsWith(" s\x1b[K\n"));
}

TEST(ProgressMeterTest, QuietWritesNothing) {
  char* buffer = nullptr;
  size_t size = 0;
  FILE* terminal = open_memstream(&buffer, &size);
  {
    ProgressMeter meter("x", 10, ProgressMeter::Mode::kQuiet, terminal);
    meter.Add(10);
  }
  std::fclose(terminal);
  EXPECT_EQ(size, 0u);
  std::free(buffer);
}

}  // namespace
}  // namespace pagoda
