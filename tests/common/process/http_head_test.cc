// The framing the connection front reads before a thread serves a request.
#include "common/process/http_head.h"

#include <string>

#include "gtest/gtest.h"

namespace pagoda {
namespace {

TEST(HttpHeadTest, ACompleteHeadGivesItsLengthAndBody) {
  HttpHead head;
  const std::string get = "GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /next";
  ASSERT_EQ(ScanHttpHead(get, HttpHeadLimits(), &head), HeadScan::kComplete);
  EXPECT_EQ(head.head_bytes, get.find("GET /next"));
  EXPECT_EQ(head.body, HttpHead::Body::kNone);
  ASSERT_EQ(ScanHttpHead("POST / HTTP/1.1\r\ncontent-length: 12\r\n\r\n", HttpHeadLimits(), &head),
            HeadScan::kComplete);
  EXPECT_EQ(head.body, HttpHead::Body::kSized);
  EXPECT_EQ(head.content_length, 12u);
  ASSERT_EQ(ScanHttpHead("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n", HttpHeadLimits(),
                         &head),
            HeadScan::kComplete);
  EXPECT_EQ(head.body, HttpHead::Body::kChunked);
  EXPECT_EQ(ScanHttpHead("GET / HTTP/1.1\r\nHost: x\r\n", HttpHeadLimits(), &head),
            HeadScan::kIncomplete);
}

TEST(HttpHeadTest, HeadsPastTheLimitsAreTooLarge) {
  HttpHeadLimits limits;
  limits.max_head_bytes = 64;
  limits.max_fields = 2;
  HttpHead head;
  EXPECT_EQ(ScanHttpHead("GET / HTTP/1.1\r\nX: " + std::string(100, 'a'), limits, &head),
            HeadScan::kTooLarge);  // no blank line within the limit
  EXPECT_EQ(ScanHttpHead("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits, &head),
            HeadScan::kTooLarge);
  EXPECT_EQ(ScanHttpHead("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\n\r\n", limits, &head),
            HeadScan::kComplete);
  limits.max_body_bytes = 10;
  EXPECT_EQ(ScanHttpHead("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", limits, &head),
            HeadScan::kBodyTooLarge);
}

TEST(HttpHeadTest, AmbiguousFramingIsBad) {
  HttpHead head;
  for (const std::string fields :
       {"Content-Length: 1\r\nContent-Length: 2\r\n", "Content-Length: -1\r\n",
        "Content-Length: 1x\r\n", "Content-Length: 99999999999999999999999\r\n",
        "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", "Transfer-Encoding: gzip\r\n"}) {
    EXPECT_EQ(ScanHttpHead("POST / HTTP/1.1\r\n" + fields + "\r\n", HttpHeadLimits(), &head),
              HeadScan::kBad)
        << fields;
  }
}

TEST(HttpHeadTest, OnlyTheContinueExpectationIsMet) {
  HttpHead head;
  EXPECT_EQ(ScanHttpHead("POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 5\r\n\r\n",
                         HttpHeadLimits(), &head),
            HeadScan::kComplete);
  EXPECT_TRUE(head.expect_continue);
  EXPECT_EQ(ScanHttpHead("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n", HttpHeadLimits(), &head),
            HeadScan::kComplete);
  EXPECT_FALSE(head.expect_continue);
  EXPECT_EQ(ScanHttpHead("POST / HTTP/1.1\r\nExpect: 200-ok\r\n\r\n", HttpHeadLimits(), &head),
            HeadScan::kBadExpectation);
}

TEST(HttpHeadTest, HeaderValuesAreFoundByNameWhateverTheirCase) {
  const std::string head =
      "POST / HTTP/1.1\r\nHost: x\r\nauthorization:  Bearer k \r\nAuthorization: second\r\n\r\n"
      "Authorization: in the body";
  EXPECT_EQ(HttpHeaderValue(head, "Authorization"), "Bearer k");
  EXPECT_EQ(HttpHeaderValue(head, "X-Missing"), "");
  EXPECT_EQ(HttpHeaderValue("POST / HTTP/1.1\r\nAuthorization: k", "Authorization"), "")
      << "an incomplete head has no fields yet";
}

}  // namespace
}  // namespace pagoda
