#include "common/process/secret.h"

#include <sys/random.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pagoda {

std::string SecretFromFlagOrEnv(const std::string& flag_value, const char* env) {
  if (!flag_value.empty()) return flag_value;
  const char* value = std::getenv(env);
  return value == nullptr ? "" : value;
}

std::string RandomToken() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    PCHECK(n > 0 || errno == EINTR) << "getrandom";
    if (n > 0) got += n;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

bool BearerMatches(std::string_view header, std::string_view secret) {
  CHECK(!secret.empty()) << "BearerMatches needs a secret";
  constexpr std::string_view kPrefix = "bearer ";
  // Length and prefix are not secret; the bytes of the secret are compared in full. The
  // scheme is case-insensitive (RFC 9110 11.1), the secret is not.
  if (header.size() != kPrefix.size() + secret.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < kPrefix.size(); ++i) {
    diff |= static_cast<unsigned char>(absl::ascii_tolower(header[i]) ^ kPrefix[i]);
  }
  for (size_t i = kPrefix.size(); i < header.size(); ++i) {
    diff |= static_cast<unsigned char>(header[i] ^ secret[i - kPrefix.size()]);
  }
  return diff == 0;
}

namespace {

// a == b, in time that depends on their lengths only.
bool SameBytes(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

bool BasicPasswordMatches(std::string_view header, std::string_view secret) {
  CHECK(!secret.empty()) << "BasicPasswordMatches needs a secret";
  constexpr std::string_view kPrefix = "basic ";
  if (header.size() <= kPrefix.size()) return false;
  const absl::string_view scheme(header.data(), kPrefix.size());
  const absl::string_view encoded(header.data() + kPrefix.size(), header.size() - kPrefix.size());
  std::string credentials;
  if (!absl::EqualsIgnoreCase(scheme, absl::string_view(kPrefix.data(), kPrefix.size())) ||
      !absl::Base64Unescape(absl::StripAsciiWhitespace(encoded), &credentials)) {
    return false;
  }
  const size_t colon = credentials.find(':');
  if (colon == std::string::npos) return false;
  return SameBytes(std::string_view(credentials).substr(colon + 1), secret);
}

absl::StatusOr<TlsPem> ReadTlsPem(const std::string& cert_path, const std::string& key_path,
                                  const std::string& ca_path) {
  if (cert_path.empty() != key_path.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  auto read = [](const std::string& path, std::string* out) -> absl::Status {
    if (path.empty()) return absl::OkStatus();
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
    *out = std::string(std::istreambuf_iterator<char>(in), {});
    if (out->empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": empty"));
    return absl::OkStatus();
  };
  TlsPem pem;
  for (auto [path, out] : {std::pair{&cert_path, &pem.cert}, std::pair{&key_path, &pem.key},
                           std::pair{&ca_path, &pem.ca}}) {
    if (absl::Status s = read(*path, out); !s.ok()) return s;
  }
  return pem;
}

}  // namespace pagoda
