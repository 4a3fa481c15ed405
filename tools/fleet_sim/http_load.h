// M concurrent streaming completions over the OpenAI HTTP API (POST /v1/completions with
// "stream": true), one keep-alive connection per stream, every connection on one epoll
// thread. Each stream asks again once its reply has ended. A server-sent event of text counts
// as one token at the client (its gap is the per-token latency); the final usage chunk
// corrects the count to the completion tokens.
#ifndef PAGODA_TOOLS_FLEET_SIM_HTTP_LOAD_H_
#define PAGODA_TOOLS_FLEET_SIM_HTTP_LOAD_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tools/fleet_sim/load_options.h"

namespace pagoda::fleet {

class HttpLoad {
 public:
  HttpLoad(LoadOptions options, LoadStats* stats);
  ~HttpLoad();  // Stop()s

  void Start();
  void Stop();

 private:
  struct Conn;
  void Loop();
  bool Open(Conn& c);
  void Send(Conn& c);
  void Close(Conn& c, bool failed);
  // Consumes what arrived; false when the connection must be closed.
  bool Consume(Conn& c);

  const LoadOptions options_;
  LoadStats* const stats_;
  std::vector<std::unique_ptr<Conn>> conns_;
  int epoll_ = -1;
  uint32_t host_ = 0;  // network order
  uint16_t port_ = 0;  // network order
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace pagoda::fleet

#endif  // PAGODA_TOOLS_FLEET_SIM_HTTP_LOAD_H_
