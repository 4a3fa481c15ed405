// The answers the HTTP server's loop sends when it refuses a request before any thread reads it.
#include "common/process/http_refusal.h"

#include <string>

#include "common/json.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

// The JSON body of a whole response.
Json BodyOf(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  EXPECT_NE(at, std::string::npos) << response;
  return Json::parse(response.substr(at + 4));
}

TEST(HttpRefusalTest, AnswersWithOpenAisErrorAndCloses) {
  const std::string response = HttpRefusal(401, "missing or wrong API key", "");
  const std::string body = R"({"error": {"message": "missing or wrong API key", )"
                           R"("type": "invalid_request_error", "param": null, )"
                           R"("code": "invalid_api_key"}})";
  EXPECT_EQ(response,
            "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
            "Content-Length: " +
                std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
}

TEST(HttpRefusalTest, EachStatusHasItsReasonTypeAndCode) {
  struct Case {
    int status;
    const char* status_line;
    const char* type;
    const char* code;
  };
  for (const Case& c : {
           Case{400, "HTTP/1.1 400 Bad Request\r\n", "invalid_request_error", "invalid_request"},
           Case{413, "HTTP/1.1 413 Payload Too Large\r\n", "invalid_request_error",
                "request_too_large"},
           Case{417, "HTTP/1.1 417 Expectation Failed\r\n", "invalid_request_error",
                "expectation_failed"},
           Case{431, "HTTP/1.1 431 Request Header Fields Too Large\r\n", "invalid_request_error",
                "headers_too_large"},
           Case{503, "HTTP/1.1 503 Service Unavailable\r\n", "service_unavailable_error",
                "service_unavailable"},
       }) {
    const std::string response = HttpRefusal(c.status, "why", "");
    EXPECT_EQ(response.rfind(c.status_line, 0), 0u) << response;
    const Json body = BodyOf(response);
    EXPECT_EQ(body["error"]["message"], "why");
    EXPECT_EQ(body["error"]["type"], c.type) << c.status;
    EXPECT_EQ(body["error"]["code"], c.code) << c.status;
    EXPECT_TRUE(body["error"]["param"].is_null());
  }
}

TEST(HttpRefusalTest, ExtraHeadersGoBeforeTheBlankLine) {
  const std::string response =
      HttpRefusal(413, "too large", "Vary: Origin\r\nAccess-Control-Allow-Origin: *\r\n");
  EXPECT_NE(response.find("Connection: close\r\nVary: Origin\r\nAccess-Control-Allow-Origin: "
                          "*\r\n\r\n{"),
            std::string::npos)
      << response;
  EXPECT_EQ(BodyOf(response)["error"]["code"], "request_too_large");
}

}  // namespace
}  // namespace pagoda
