// Runs a model the way the serving path does, for the loaders' tests: logits of prompts
// prefilled in one forward pass, and run.c's golden prompts generated greedily by an Engine.
#ifndef PAGODA_TESTS_COMMON_MODEL_MODEL_RUNS_H_
#define PAGODA_TESTS_COMMON_MODEL_MODEL_RUNS_H_

#include <vector>

#include "common/model/model_weights.h"

namespace pagoda::testing {

// Logits (prompt length, vocab) of every position of each prompt, all prefilled together in
// one step.
std::vector<std::vector<float>> BatchLogits(ModelWeights w,
                                            const std::vector<std::vector<int>>& prompts);
// BatchLogits of one prompt.
std::vector<float> PromptLogits(ModelWeights w, const std::vector<int>& tokens);

// The greedy continuation of each of LoadGoldenCases()'s prompts, stopping at BOS as run.c
// does, one request at a time or all batched, up to 256 positions (run.c -n 256).
std::vector<std::vector<int>> GreedyGoldenRuns(ModelWeights w, bool batched);

// The greedy continuation of `prompt` through an Engine, one request, until the model's context
// (max_seq_len) is full or `max_tokens` (> 0) are out: every token the model samples, EOS
// included.
std::vector<int> GreedyRun(ModelWeights w, const std::vector<int>& prompt, int max_tokens = 0);

}  // namespace pagoda::testing

#endif  // PAGODA_TESTS_COMMON_MODEL_MODEL_RUNS_H_
