// The whole answer a GuardedHttpServer's loop sends when it refuses a request before any thread
// reads it (400, 401, 413, 417, 431, 503): a JSON error in OpenAI's shape (the router's clients
// read that; router/api/openai/openai_error.h cannot be seen from here, and workers' metrics
// ports are served the same way) and `Connection: close`.
#ifndef PAGODA_COMMON_PROCESS_HTTP_REFUSAL_H_
#define PAGODA_COMMON_PROCESS_HTTP_REFUSAL_H_

#include <string>

#include "absl/strings/string_view.h"

namespace pagoda {

// The response bytes: status line, Content-Type, Content-Length, Connection: close, the
// `extra_headers` lines (each ending "\r\n", e.g. CORS's), then the body
// {"error": {"message", "type", "param": null, "code"}}. `message` is the server's own text
// (no quote or backslash), never a client's. Another status gets 503's reason and code.
std::string HttpRefusal(int status, absl::string_view message, absl::string_view extra_headers);

}  // namespace pagoda

#endif  // PAGODA_COMMON_PROCESS_HTTP_REFUSAL_H_
