#include "common/secret.h"

#include <sys/random.h>

#include <cstdlib>

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
  constexpr std::string_view kPrefix = "Bearer ";
  // Length and prefix are not secret; the bytes of the secret are compared in full.
  if (header.size() != kPrefix.size() + secret.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < header.size(); ++i) {
    const char want = i < kPrefix.size() ? kPrefix[i] : secret[i - kPrefix.size()];
    diff |= static_cast<unsigned char>(header[i] ^ want);
  }
  return diff == 0;
}

}  // namespace pagoda
