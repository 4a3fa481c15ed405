// The page at `/` on the HTTP port (issue 41): a chat playground and a cluster view, three
// files (index.html, app.js, app.css) built into the binary (embed_web_files.cmake writes them
// as byte arrays). Answers GET of `/` and `/ui/<file>` with a strong ETag (the file's SHA-256),
// revalidation on every load (Cache-Control: no-cache, 304 when If-None-Match matches), and a
// Content-Security-Policy that allows this origin only: no external script, style, font,
// image or connection. Plain C++, no transport. Thread-safe: constant after construction.
#ifndef PAGODA_ROUTER_API_WEB_WEB_UI_H_
#define PAGODA_ROUTER_API_WEB_WEB_UI_H_

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pagoda {

// A file built into the binary.
struct EmbeddedFile {
  std::string_view name;    // "index.html"
  std::string_view bytes;   // its contents
  std::string_view sha256;  // of the contents, 64 hex digits
};

// The page's files, as the build embedded them (the generated web_files.cc).
std::span<const EmbeddedFile> EmbeddedWebFiles();

// What a GET of one of the page's paths answers.
struct WebResponse {
  int status = 404;          // 200, 304 (not modified) or 404 (not a file of the page)
  std::string content_type;  // "" for 304 and 404
  std::string_view body;     // the file's bytes (200 only); borrowed from the file
  std::vector<std::pair<std::string, std::string>> headers;  // ETag, Cache-Control, CSP, ...
};

class WebUi {
 public:
  // The Content-Security-Policy every answer carries.
  static constexpr std::string_view kContentSecurityPolicy =
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
      "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

  // `files` outlive the WebUi; index.html is served at `/`, every file at `/ui/<name>`.
  explicit WebUi(std::span<const EmbeddedFile> files = EmbeddedWebFiles());

  // Whether `path` (without its query) is one of the page's: `/` or under `/ui/`. The API
  // key gate takes HTTP Basic on these (a browser cannot send a bearer header on navigation).
  static bool IsPagePath(std::string_view path);
  // The Content-Type of a file by its extension ("application/octet-stream" when unknown).
  static std::string_view ContentType(std::string_view name);

  // GET `path` with the request's If-None-Match value ("" when absent).
  WebResponse Get(std::string_view path, std::string_view if_none_match) const;

 private:
  const EmbeddedFile* Find(std::string_view path) const;

  const std::span<const EmbeddedFile> files_;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_WEB_WEB_UI_H_
