#include "common/process/http_client.h"

#include <httplib.h>

namespace pagoda {

HttpResult HttpGet(const std::string& host, int port, const std::string& path, int timeout_ms) {
  httplib::Client client(host, port);
  const auto timeout = std::chrono::milliseconds(timeout_ms);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  HttpResult result;
  const httplib::Result r = client.Get(path);
  if (!r) return result;
  result.status = r->status;
  result.body = r->body;
  result.content_type = r->get_header_value("Content-Type");
  return result;
}

}  // namespace pagoda
