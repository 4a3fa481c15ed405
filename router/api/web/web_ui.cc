#include "router/api/web/web_ui.h"

#include <algorithm>

namespace pagoda {
namespace {

constexpr std::string_view kIndex = "index.html";
constexpr std::string_view kFilePrefix = "/ui/";

// The strong entity tag of a file: its digest's first 128 bits, quoted.
std::string ETagOf(const EmbeddedFile& file) {
  std::string etag(1, '"');
  etag.append(file.sha256.substr(0, 32));
  etag.push_back('"');
  return etag;
}

std::string_view StripSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether an If-None-Match value ("*", or a list of tags, weak ones "W/...") names `etag`;
// a weak comparison, as RFC 9110 13.1.2 asks for If-None-Match.
bool NoneMatchNames(std::string_view if_none_match, std::string_view etag) {
  while (!if_none_match.empty()) {
    const size_t comma = std::min(if_none_match.find(','), if_none_match.size());
    std::string_view tag = StripSpaces(if_none_match.substr(0, comma));
    if_none_match.remove_prefix(std::min(comma + 1, if_none_match.size()));
    if (tag == "*") return true;
    if (tag.starts_with("W/")) tag.remove_prefix(2);
    if (tag == etag) return true;
  }
  return false;
}

}  // namespace

WebUi::WebUi(std::span<const EmbeddedFile> files) : files_(files) {}

bool WebUi::IsPagePath(std::string_view path) {
  return path == "/" || path.starts_with(kFilePrefix);
}

std::string_view WebUi::ContentType(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  if (name.ends_with(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

const EmbeddedFile* WebUi::Find(std::string_view path) const {
  std::string_view name;
  if (path == "/") {
    name = kIndex;
  } else if (path.starts_with(kFilePrefix)) {
    name = path.substr(kFilePrefix.size());
  } else {
    return nullptr;
  }
  for (const EmbeddedFile& file : files_) {
    if (file.name == name) return &file;
  }
  return nullptr;
}

WebResponse WebUi::Get(std::string_view path, std::string_view if_none_match) const {
  WebResponse out;
  const EmbeddedFile* file = Find(path);
  if (file == nullptr) return out;
  std::string etag = ETagOf(*file);
  out.status = NoneMatchNames(if_none_match, etag) ? 304 : 200;
  if (out.status == 200) {
    out.content_type = std::string(ContentType(file->name));
    out.body = file->bytes;
  }
  // The files change only with the binary: revalidated on each load, never re-sent unchanged.
  out.headers = {{"ETag", std::move(etag)},
                 {"Cache-Control", "no-cache"},
                 {"Content-Security-Policy", std::string(kContentSecurityPolicy)},
                 {"X-Content-Type-Options", "nosniff"},
                 {"Referrer-Policy", "no-referrer"}};
  return out;
}

}  // namespace pagoda
