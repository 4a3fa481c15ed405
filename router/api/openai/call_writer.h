// How one call's output becomes its HTTP answer: a JSON body gathered from the core's chunks,
// or server-sent events written as the chunks come. One implementation per endpoint family
// (chat and completions here; /v1/responses in responses_output.h); the server's loop that
// takes the chunks is shared.
// Not thread-safe: one per call, used by the thread that writes its response.
#ifndef PAGODA_ROUTER_API_OPENAI_CALL_WRITER_H_
#define PAGODA_ROUTER_API_OPENAI_CALL_WRITER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "router/api/openai/openai_request.h"
#include "router/api/openai/openai_response.h"
#include "router/api/request_output.h"

namespace pagoda {

class CallWriter {
 public:
  virtual ~CallWriter() = default;

  // The call whose requests were (or are about to be) submitted.
  virtual const OpenAiCall& call() const = 0;

  // Not streaming: gather `chunks`, then the whole body (JSON).
  virtual void Add(const std::vector<OutputChunk>& chunks) = 0;
  virtual std::string Body() = 0;

  // Streaming, each the bytes to send: the stream's opening, the events for `chunks`, its
  // good end, or its end on `error` (after the opening).
  virtual std::string Opening() = 0;
  virtual std::string Events(const std::vector<OutputChunk>& chunks) = 0;
  virtual std::string Closing() = 0;
  virtual std::string Failed(const absl::Status& error) = 0;
};

// /v1/completions and /v1/chat/completions: OpenAiResponse's objects, streamed as `data:`
// events ended by `data: [DONE]`.
class CompletionWriter final : public CallWriter {
 public:
  // `call` is owned here: the requests were submitted from it, the response reads it.
  CompletionWriter(std::unique_ptr<OpenAiCall> call, const Tokenizer* tokenizer, std::string model,
                   std::string fingerprint);

  const OpenAiCall& call() const override { return *call_; }
  void Add(const std::vector<OutputChunk>& chunks) override { response_.Add(chunks); }
  std::string Body() override { return response_.Body(); }
  std::string Opening() override;
  std::string Events(const std::vector<OutputChunk>& chunks) override;
  std::string Closing() override;
  std::string Failed(const absl::Status& error) override;

 private:
  const std::unique_ptr<OpenAiCall> call_;
  OpenAiResponse response_;  // reads *call_
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_CALL_WRITER_H_
