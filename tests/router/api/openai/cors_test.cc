#include "router/api/openai/cors.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace pagoda {
namespace {

std::map<std::string, std::string> AsMap(const HeaderList& headers) {
  return std::map<std::string, std::string>(headers.begin(), headers.end());
}

CorsPolicy Policy(const char* origins, bool credentials = false, const char* methods = "*",
                  const char* headers = "*") {
  absl::StatusOr<CorsOptions> o = ParseCorsOptions(origins, methods, headers, credentials);
  EXPECT_TRUE(o.ok()) << o.status();
  return CorsPolicy(o.ok() ? *o : CorsOptions());
}

TEST(CorsTest, OffUnlessOriginsAreGiven) {
  const CorsPolicy off = Policy("");
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(off.ResponseHeaders("https://a.example").empty());
  EXPECT_FALSE(off.IsPreflight("OPTIONS", "https://a.example", "POST"));
}

TEST(CorsTest, AnAllowedOriginIsEchoedAndOthersGetNothingToRead) {
  const CorsPolicy p = Policy(" https://a.example , http://localhost:3000");
  EXPECT_EQ(AsMap(p.ResponseHeaders("https://a.example")),
            (std::map<std::string, std::string>{
                {"Access-Control-Allow-Origin", "https://a.example"}, {"Vary", "Origin"}}));
  EXPECT_EQ(AsMap(p.ResponseHeaders("https://b.example")),
            (std::map<std::string, std::string>{{"Vary", "Origin"}}));
  EXPECT_TRUE(p.ResponseHeaders("").empty()) << "not a cross-origin request";
}

TEST(CorsTest, AnyOriginIsAStarUnlessCredentialsAreAllowed) {
  EXPECT_EQ(AsMap(Policy("*").ResponseHeaders("https://a.example")),
            (std::map<std::string, std::string>{{"Access-Control-Allow-Origin", "*"}}));
  // The CORS spec refuses "*" with credentials: the origin itself is allowed instead.
  EXPECT_EQ(
      AsMap(Policy("*", /*credentials=*/true).ResponseHeaders("https://a.example")),
      (std::map<std::string, std::string>{{"Access-Control-Allow-Origin", "https://a.example"},
                                          {"Access-Control-Allow-Credentials", "true"},
                                          {"Vary", "Origin"}}));
}

TEST(CorsTest, APreflightIsAllowedWhatItAsksForOrTheConfiguredLists) {
  const CorsPolicy any = Policy("https://a.example");
  EXPECT_TRUE(any.IsPreflight("OPTIONS", "https://a.example", "POST"));
  EXPECT_FALSE(any.IsPreflight("OPTIONS", "https://a.example", ""));
  EXPECT_FALSE(any.IsPreflight("POST", "https://a.example", "POST"));
  auto h = AsMap(any.PreflightHeaders("https://a.example", "POST", "authorization, content-type"));
  EXPECT_EQ(h["Access-Control-Allow-Methods"], "POST");
  EXPECT_EQ(h["Access-Control-Allow-Headers"], "authorization, content-type");
  EXPECT_EQ(h["Access-Control-Allow-Origin"], "https://a.example");
  EXPECT_FALSE(h["Access-Control-Max-Age"].empty());
  // What is not a token list is not echoed into a header.
  h = AsMap(any.PreflightHeaders("https://a.example", "POST", "a\"b"));
  EXPECT_EQ(h.count("Access-Control-Allow-Headers"), 0u);
  const CorsPolicy listed = Policy("https://a.example", false, "GET, POST", "authorization");
  h = AsMap(listed.PreflightHeaders("https://a.example", "DELETE", "x-other"));
  EXPECT_EQ(h["Access-Control-Allow-Methods"], "GET, POST");
  EXPECT_EQ(h["Access-Control-Allow-Headers"], "authorization");
  h = AsMap(listed.PreflightHeaders("https://b.example", "POST", ""));
  EXPECT_EQ(h.count("Access-Control-Allow-Methods"), 0u) << "nothing for a foreign origin";
}

TEST(CorsTest, FlagsThatWouldWriteBadHeadersAreRefused) {
  EXPECT_FALSE(ParseCorsOptions("a.example", "*", "*", false).ok());
  EXPECT_FALSE(ParseCorsOptions("https://a.example\r\nX: y", "*", "*", false).ok());
  EXPECT_FALSE(ParseCorsOptions("*", "GET POST", "*", false).ok());
  EXPECT_FALSE(ParseCorsOptions("*", "*", "a:b", false).ok());
  EXPECT_TRUE(ParseCorsOptions("*", "GET,POST", "authorization,content-type", true).ok());
}

}  // namespace
}  // namespace pagoda
