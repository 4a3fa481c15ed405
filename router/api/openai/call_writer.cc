#include "router/api/openai/call_writer.h"

#include <utility>

#include "router/api/openai/openai_error.h"

namespace pagoda {
namespace {

std::string Joined(const std::vector<std::string>& events) {
  std::string out;
  for (const std::string& e : events) out += SseEvent(e);
  return out;
}

}  // namespace

CompletionWriter::CompletionWriter(std::unique_ptr<OpenAiCall> call, const Tokenizer* tokenizer,
                                   std::string model, std::string fingerprint)
    : call_(std::move(call)),
      response_(*call_, tokenizer, std::move(model), std::move(fingerprint)) {}

std::string CompletionWriter::Opening() { return Joined(response_.OpeningEvents()); }

std::string CompletionWriter::Events(const std::vector<OutputChunk>& chunks) {
  return Joined(response_.Events(chunks));
}

std::string CompletionWriter::Closing() {
  return Joined(response_.ClosingEvents()) + SseEvent("[DONE]");
}

std::string CompletionWriter::Failed(const absl::Status& error) {
  return SseEvent(ErrorOf(error).Body()) + SseEvent("[DONE]");
}

}  // namespace pagoda
