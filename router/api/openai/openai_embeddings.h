// OpenAI's /v1/embeddings: inputs (a string, a list of strings, token ids or a list of token-id
// lists) become one embedding request each (GenerationRequest::pooling), which runs through the
// same prefill steps as generation and samples nothing; each answers with its pooled,
// L2-normalized hidden state (the final norm's output), sent as floats or base64.
#ifndef PAGODA_ROUTER_API_OPENAI_OPENAI_EMBEDDINGS_H_
#define PAGODA_ROUTER_API_OPENAI_OPENAI_EMBEDDINGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json.h"
#include "router/api/openai/openai_request.h"

namespace pagoda {

// Inputs per call at most (each is its own request in the queue), and their tokens together
// (each input's own bound is the model length).
inline constexpr int kMaxEmbeddingInputs = 256;
inline constexpr int64_t kMaxEmbeddingTokens = int64_t{1} << 18;

struct EmbeddingCall {
  std::string model;                        // as asked; "" when not given
  std::vector<GenerationRequest> requests;  // one per input, in order
  bool base64 = false;                      // encoding_format: little-endian f32, base64
};

// INVALID_ARGUMENT naming the field for a bad request (`dimensions` other than the model's
// dim is refused by name, as is any field this endpoint does not read; a null field is
// absent, as on every endpoint). REQUIRES: `body` is a JSON object.
absl::StatusOr<EmbeddingCall> ParseEmbeddingRequest(const OrderedJson& body,
                                                    const OpenAiContext& context, Pooling pooling);

// The response object: {"object": "list", "data": [{"object": "embedding", "index": i,
// "embedding": ...}], "model", "usage": {prompt_tokens, total_tokens}}.
std::string EmbeddingResponseBody(const EmbeddingCall& call,
                                  const std::vector<std::vector<float>>& embeddings,
                                  int64_t prompt_tokens, const std::string& model);

// --pooling's values: "last" or "mean".
absl::StatusOr<Pooling> ParsePooling(const std::string& name);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_OPENAI_EMBEDDINGS_H_
