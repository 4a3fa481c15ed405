#include "tests/common/model/model_runs.h"

#include <map>
#include <utility>

#include "glog/logging.h"
#include "router/core/engine.h"
#include "tests/test_util.h"
#include "worker/in_process_executor.h"
#include "worker/llama_model.h"

namespace pagoda::testing {
namespace {

// One engine step, its tokens appended to `out` by request.
void Step(Engine& engine, std::map<int64_t, std::vector<int>>* out) {
  absl::StatusOr<std::vector<SequenceUpdate>> updates = engine.Step();
  CHECK(updates.ok()) << updates.status();
  for (const SequenceUpdate& u : *updates) {
    (*out)[u.request_id].insert((*out)[u.request_id].end(), u.token_ids.begin(), u.token_ids.end());
  }
}

}  // namespace

std::vector<std::vector<float>> BatchLogits(ModelWeights w,
                                            const std::vector<std::vector<int>>& prompts) {
  std::vector<int> tokens, positions, rows;
  std::vector<int64_t> slots;
  std::vector<std::vector<int>> tables;
  int block = 0;
  for (const std::vector<int>& p : prompts) {
    const int blocks = (static_cast<int>(p.size()) + 15) / 16;
    tables.emplace_back();
    for (int b = 0; b < blocks; ++b) tables.back().push_back(block + b);
    for (size_t i = 0; i < p.size(); ++i) {
      rows.push_back(static_cast<int>(tokens.size()));
      tokens.push_back(p[i]);
      positions.push_back(static_cast<int>(i));
      slots.push_back(static_cast<int64_t>(block) * 16 + static_cast<int64_t>(i));
    }
    block += blocks;
  }
  std::vector<AttentionSequence> seqs;
  int start = 0;
  for (size_t s = 0; s < prompts.size(); ++s) {
    const int len = static_cast<int>(prompts[s].size());
    seqs.push_back({start, len, 0, tables[s].data()});
    start += len;
  }
  const int t = static_cast<int>(tokens.size());
  const int vocab = w.config.vocab_size;
  auto model = LlamaModel::Create(std::move(w), t, t);
  CHECK(model.ok()) << model.status();
  KvPool kv((*model)->config(), block, 16);
  const float* logits = (*model)->Forward({tokens, positions, slots, seqs, rows}, kv);
  std::vector<std::vector<float>> out;
  start = 0;
  for (const std::vector<int>& p : prompts) {
    out.emplace_back(logits + static_cast<size_t>(start) * vocab,
                     logits + static_cast<size_t>(start + p.size()) * vocab);
    start += static_cast<int>(p.size());
  }
  return out;
}

std::vector<float> PromptLogits(ModelWeights w, const std::vector<int>& tokens) {
  return BatchLogits(std::move(w), {tokens})[0];
}

std::vector<std::vector<int>> GreedyGoldenRuns(ModelWeights w, bool batched) {
  const ModelConfig c = w.config;
  WorkerOptions wo;
  wo.num_blocks = 256;
  auto worker = WorkerEngine::Create(std::move(w), wo);
  CHECK(worker.ok()) << worker.status();
  InProcessExecutor executor(*std::move(worker));
  EngineOptions eo;
  eo.max_model_len = 257;  // run.c -n 256
  Engine engine(c, &executor, eo);
  std::map<int64_t, std::vector<int>> out;
  std::vector<int64_t> ids;
  for (const GoldenCase& g : LoadGoldenCases()) {
    GenerationRequest r;
    r.prompt_ids = g.prompt_ids;
    r.sampling.temperature = 0;
    r.stop_token_ids = {1};  // run.c stops at BOS
    ids.push_back(static_cast<int64_t>(ids.size()));
    const absl::Status added = engine.AddRequest(ids.back(), r);
    CHECK(added.ok()) << added;
    while (!batched && engine.has_unfinished()) Step(engine, &out);
  }
  while (engine.has_unfinished()) Step(engine, &out);
  std::vector<std::vector<int>> tokens;
  for (int64_t id : ids) tokens.push_back(out[id]);
  return tokens;
}

std::vector<int> GreedyRun(ModelWeights w, const std::vector<int>& prompt, int max_tokens) {
  const ModelConfig c = w.config;
  WorkerOptions wo;
  wo.num_blocks = (c.max_seq_len + 15) / 16 + 1;
  auto worker = WorkerEngine::Create(std::move(w), wo);
  CHECK(worker.ok()) << worker.status();
  InProcessExecutor executor(*std::move(worker));
  Engine engine(c, &executor, EngineOptions{});
  GenerationRequest r;
  r.prompt_ids = prompt;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  if (max_tokens > 0) r.max_tokens = max_tokens;
  const absl::Status added = engine.AddRequest(0, r);
  CHECK(added.ok()) << added;
  std::map<int64_t, std::vector<int>> out;
  while (engine.has_unfinished()) Step(engine, &out);
  return out[0];
}

}  // namespace pagoda::testing
