// The page's files as a browser receives them: paths, types, entity tags and revalidation, the
// Content-Security-Policy, and the files the build embedded.
#include "router/api/web/web_ui.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::string_view kDigest =
    "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
constexpr EmbeddedFile kFiles[] = {{"index.html", "<!doctype html>", kDigest},
                                   {"app.js", "\"use strict\";", kDigest},
                                   {"app.css", "body{}", kDigest}};

std::string Header(const WebResponse& r, const std::string& name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "";
}

TEST(WebUiTest, IndexIsAtTheRootAndEveryFileUnderUi) {
  const WebUi ui(kFiles);
  const WebResponse index = ui.Get("/", "");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(index.body, "<!doctype html>");
  const WebResponse js = ui.Get("/ui/app.js", "");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(js.body, "\"use strict\";");
  EXPECT_EQ(ui.Get("/ui/app.css", "").content_type, "text/css; charset=utf-8");
  EXPECT_EQ(ui.Get("/ui/index.html", "").status, 200);
}

TEST(WebUiTest, AnythingElseIsNotFound) {
  const WebUi ui(kFiles);
  for (const char* path : {"/ui/", "/ui/nope.js", "/index.html", "/app.js", "/ui/../app.js",
                           "/ui/app.js/", "", "/v1/models"}) {
    const WebResponse r = ui.Get(path, "");
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_TRUE(r.body.empty()) << path;
  }
}

TEST(WebUiTest, ContentTypesFollowTheExtension) {
  EXPECT_EQ(WebUi::ContentType("a.html"), "text/html; charset=utf-8");
  EXPECT_EQ(WebUi::ContentType("a.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(WebUi::ContentType("a.css"), "text/css; charset=utf-8");
  EXPECT_EQ(WebUi::ContentType("a.svg"), "image/svg+xml");
  EXPECT_EQ(WebUi::ContentType("a.js.map"), "application/octet-stream");
  EXPECT_EQ(WebUi::ContentType("js"), "application/octet-stream");
}

TEST(WebUiTest, AStrongETagRevalidatesToNotModified) {
  const WebUi ui(kFiles);
  const WebResponse first = ui.Get("/", "");
  const std::string etag = Header(first, "ETag");
  EXPECT_EQ(etag, "\"00112233445566778899aabbccddeeff\"");  // strong: no W/
  EXPECT_EQ(Header(first, "Cache-Control"), "no-cache");
  for (const std::string& match :
       {etag, "W/" + etag, "\"other\", " + etag, "  " + etag + " ,\"x\"", std::string("*")}) {
    const WebResponse again = ui.Get("/", match);
    EXPECT_EQ(again.status, 304) << match;
    EXPECT_TRUE(again.body.empty()) << match;
    EXPECT_EQ(Header(again, "ETag"), etag) << match;
  }
  for (const std::string& miss : {std::string("\"other\""), std::string("00112233"),
                                  std::string(","), etag.substr(0, etag.size() - 1)}) {
    EXPECT_EQ(ui.Get("/", miss).status, 200) << miss;
  }
}

TEST(WebUiTest, EveryAnswerForbidsOtherOrigins) {
  const WebUi ui(kFiles);
  for (const char* path : {"/", "/ui/app.js", "/ui/app.css"}) {
    const WebResponse r = ui.Get(path, "");
    const std::string csp = Header(r, "Content-Security-Policy");
    EXPECT_THAT(csp, HasSubstr("default-src 'none'")) << path;
    EXPECT_THAT(csp, HasSubstr("script-src 'self'")) << path;
    EXPECT_THAT(csp, HasSubstr("connect-src 'self'")) << path;
    EXPECT_THAT(csp, HasSubstr("frame-ancestors 'none'")) << path;
    EXPECT_THAT(csp, Not(HasSubstr("*"))) << path;
    EXPECT_THAT(csp, Not(HasSubstr("unsafe"))) << path;
    EXPECT_EQ(Header(r, "X-Content-Type-Options"), "nosniff") << path;
  }
}

TEST(WebUiTest, PagePathsAreTheRootAndUi) {
  EXPECT_TRUE(WebUi::IsPagePath("/"));
  EXPECT_TRUE(WebUi::IsPagePath("/ui/app.js"));
  EXPECT_FALSE(WebUi::IsPagePath(""));
  EXPECT_FALSE(WebUi::IsPagePath("/ui"));
  EXPECT_FALSE(WebUi::IsPagePath("/v1/models"));
  EXPECT_FALSE(WebUi::IsPagePath("//"));
}

// What the build embedded: the three files, their digests, and nothing fetched from elsewhere.
TEST(WebUiTest, TheBuiltInPageLoadsOnlyItsOwnFiles) {
  const WebUi ui;
  for (const char* path : {"/", "/ui/app.js", "/ui/app.css"}) {
    const WebResponse r = ui.Get(path, "");
    ASSERT_EQ(r.status, 200) << path;
    EXPECT_GT(r.body.size(), 100u) << path;
    EXPECT_THAT(std::string(r.body), Not(HasSubstr("://"))) << path << " names another origin";
    EXPECT_THAT(std::string(r.body), Not(HasSubstr("@import"))) << path;
  }
  for (const EmbeddedFile& file : EmbeddedWebFiles()) {
    EXPECT_EQ(file.sha256.size(), 64u) << file.name;
  }
  const std::string index(ui.Get("/", "").body);
  EXPECT_THAT(index, HasSubstr("src=\"/ui/app.js\""));
  EXPECT_THAT(index, HasSubstr("href=\"/ui/app.css\""));
  EXPECT_THAT(index, Not(HasSubstr("<script>"))) << "an inline script the CSP would block";
  EXPECT_THAT(index, Not(HasSubstr("style=\""))) << "an inline style the CSP would block";
}

}  // namespace
}  // namespace pagoda
