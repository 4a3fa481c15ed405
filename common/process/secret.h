// Shared secrets that guard Pagoda's ports: the cluster's worker token and the public API key,
// both sent as gRPC metadata `authorization: Bearer <secret>` (DESIGN §10).
#ifndef PAGODA_COMMON_PROCESS_SECRET_H_
#define PAGODA_COMMON_PROCESS_SECRET_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pagoda {

// The environment variables that carry the secrets when the flags are not given (a flag is
// visible to anyone who can list processes; the environment is not).
inline constexpr char kWorkerTokenEnv[] = "PAGODA_WORKER_TOKEN";
inline constexpr char kApiKeyEnv[] = "PAGODA_API_KEY";

// `flag_value` if set, else the value of environment variable `env` (or "").
std::string SecretFromFlagOrEnv(const std::string& flag_value, const char* env);

// 32 random bytes from the kernel, as 64 hex digits.
std::string RandomToken();

// Whether `header` (an `authorization` metadata value) is exactly "Bearer <secret>", the scheme
// in any case ("bearer"). Compares in time independent of where the values differ. REQUIRES:
// !secret.empty().
bool BearerMatches(std::string_view header, std::string_view secret);

// Whether `header` (an HTTP Authorization value) is HTTP Basic, "Basic base64(user:password)",
// whose password is exactly `secret`, whatever the user (a browser prompts for both; the key is
// the password). False for another scheme, bad base64 or no ':'. The secret's bytes compare in
// time independent of where they differ. REQUIRES: !secret.empty().
bool BasicPasswordMatches(std::string_view header, std::string_view secret);

// PEM contents for TLS on the worker link; "" = not given.
struct TlsPem {
  std::string cert;  // this side's certificate chain
  std::string key;   // its private key
  std::string ca;    // the CA that signs the peer's certificate
};
// Reads the files given ("" = none). INVALID_ARGUMENT when only one of cert and key is given;
// NOT_FOUND naming a file that cannot be read.
absl::StatusOr<TlsPem> ReadTlsPem(const std::string& cert_path, const std::string& key_path,
                                  const std::string& ca_path);

}  // namespace pagoda

#endif  // PAGODA_COMMON_PROCESS_SECRET_H_
