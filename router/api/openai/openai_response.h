// OpenAI's response objects for one call: `text_completion` and `chat.completion` bodies, or
// their streamed chunks (`data: {...}` server-sent events), built from the core's output
// chunks. Besides OpenAI's fields every object carries `seed`: the one this call sampled with,
// so a sampled answer can be replayed.
// Not thread-safe: one per call, used by the thread that writes its response.
#ifndef PAGODA_ROUTER_API_OPENAI_OPENAI_RESPONSE_H_
#define PAGODA_ROUTER_API_OPENAI_OPENAI_RESPONSE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/json.h"
#include "lib/text/tokenizer.h"
#include "router/api/openai/openai_request.h"
#include "router/api/request_output.h"
#include "router/core/sequence.h"

namespace pagoda {

class OpenAiResponse {
 public:
  // `call` as parsed; `model`: the served name; `fingerprint`: system_fingerprint.
  OpenAiResponse(const OpenAiCall& call, const Tokenizer* tokenizer, std::string model,
                 std::string fingerprint);

  // Streaming: the events that open the stream (chat: each choice's assistant role; echo:
  // the prompts), those for `chunks`, and the closing usage event (when asked). Each string
  // is one event's JSON.
  std::vector<std::string> OpeningEvents();
  std::vector<std::string> Events(const std::vector<OutputChunk>& chunks);
  std::vector<std::string> ClosingEvents();

  // Not streaming: gather `chunks`, then the whole body.
  void Add(const std::vector<OutputChunk>& chunks);
  std::string Body() const;

 private:
  struct Choice {
    int prev_id = -1;     // the token before the next one (for its text)
    int text_offset = 0;  // completions' logprobs.text_offset of the next token
    std::string text;     // gathered (not streaming)
    OrderedJson logprobs = OrderedJson::array();  // chat: content entries
    OrderedJson tokens = OrderedJson::array();    // completions: the four lists
    OrderedJson token_logprobs = OrderedJson::array();
    OrderedJson top_logprobs = OrderedJson::array();
    OrderedJson text_offsets = OrderedJson::array();
    OrderedJson prompt_logprobs = nullptr;  // vLLM's form, when asked
    FinishReason finish_reason = FinishReason::kNone;
    std::unique_ptr<ChatOutput> output;  // streamed chat with tool or reasoning parsing
  };
  // The prompt's token texts, log probabilities and alternatives at the head of completions'
  // four lists in `out` (echo with logprobs).
  void AppendPromptEntries(const OutputChunk& c, OrderedJson* out) const;
  // vLLM's prompt_logprobs: per position null (the first) or {"id": {logprob, rank,
  // decoded_token}} for the prompt's token and its alternatives.
  OrderedJson VllmPromptLogprobs(const OutputChunk& c) const;
  const std::vector<int>& PromptOf(const OutputChunk& c) const {
    return call_.requests[c.index / n_].prompt_ids;
  }
  OrderedJson Envelope(bool chunk) const;
  // `c`'s log probabilities in the endpoint's form; advances `choice` past its tokens.
  OrderedJson LogprobsOf(const OutputChunk& c, Choice* choice) const;
  OrderedJson ChoiceObject(int index, const Choice& choice) const;
  // A streamed chat chunk's delta for `c` (parsed when call.output is active).
  OrderedJson ChatDelta(const OutputChunk& c, Choice* choice) const;
  void CountUsage(const OutputChunk& c);
  OrderedJson UsageJson() const;
  std::string TokenText(int prev_id, int id) const;

  const OpenAiCall& call_;
  const Tokenizer* const tokenizer_;
  const std::string model_;
  const std::string fingerprint_;
  const std::string id_;
  const int64_t created_;
  int n_ = 1;  // samples per prompt
  std::vector<Choice> choices_;
  int64_t prompt_tokens_ = 0, completion_tokens_ = 0, cached_tokens_ = 0;
};

// One server-sent event: "data: PAYLOAD\n\n".
std::string SseEvent(std::string_view payload);

// JSON text that never throws: invalid UTF-8 (a token may end inside a character) becomes
// U+FFFD.
std::string DumpJson(const OrderedJson& j);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_OPENAI_RESPONSE_H_
