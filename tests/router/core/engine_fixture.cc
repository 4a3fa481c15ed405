#include "tests/router/core/engine_fixture.h"

#include <string>

#include "common/model/llama2c_checkpoint.h"
#include "glog/logging.h"
#include "lib/text/llama2c_tokenizer.h"

namespace pagoda::testing {

void EngineFixture::Start(int num_blocks, int max_model_len, int max_num_batched_tokens,
                          KvReservation reservation, bool prefix_caching) {
  absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(Stories260KModel());
  ASSERT_TRUE(w.ok()) << w.status();
  config_ = w->config;
  WorkerOptions wo;
  wo.num_blocks = num_blocks;
  wo.max_num_batched_tokens = max_num_batched_tokens;
  wo.max_num_seqs = 64;
  auto worker = WorkerEngine::Create(*std::move(w), wo);
  ASSERT_TRUE(worker.ok()) << worker.status();
  engine_.reset();  // before the executor it borrows
  executor_ = std::make_unique<InProcessExecutor>(*std::move(worker));
  EngineOptions eo;
  eo.max_num_batched_tokens = max_num_batched_tokens;
  eo.max_num_seqs = 64;
  eo.max_model_len = max_model_len;
  eo.kv_reservation = reservation;
  eo.enable_prefix_caching = prefix_caching;
  eo.speculative = speculative_;
  engine_ = std::make_unique<Engine>(config_, executor_.get(), eo);
}

std::map<int64_t, Result> EngineFixture::RunAll(std::map<int64_t, Result> results) {
  peak_running_ = 0;
  while (engine_->has_unfinished()) {
    if (!StepInto(results)) break;
    peak_running_ = std::max(peak_running_, engine_->scheduler().num_running());
  }
  ExpectNothingLeaked();
  return results;
}

bool EngineFixture::StepInto(std::map<int64_t, Result>& results) {
  auto updates = engine_->Step();
  EXPECT_TRUE(updates.ok()) << updates.status();
  if (!updates.ok()) return false;
  for (const SequenceUpdate& u : *updates) {
    Result& r = results[u.request_id];
    if (static_cast<int>(r.outputs.size()) <= u.seq_index) {
      r.outputs.resize(u.seq_index + 1);
      r.reasons.resize(u.seq_index + 1);
      r.logprobs.resize(u.seq_index + 1);
    }
    // The queue time comes with a sequence's first output token, and only with a first token
    // (not again after a preemption; a resumed sequence's first one here is not its first).
    const bool first_here = !u.token_ids.empty() && r.outputs[u.seq_index].empty();
    if (u.queue_seconds >= 0) {
      EXPECT_TRUE(first_here) << "sequence " << u.seq_id;
    }
    if (first_here && u.num_output_tokens == 1) {
      EXPECT_GE(u.queue_seconds, 0) << "sequence " << u.seq_id;
    }
    for (int t : u.token_ids) r.outputs[u.seq_index].push_back(t);
    for (const SampledToken& s : u.samples) r.logprobs[u.seq_index].push_back(s.logprob);
    if (u.finished) r.reasons[u.seq_index] = u.finish_reason;
    r.num_cached_tokens = u.num_cached_tokens;
  }
  return true;
}

void EngineFixture::ExpectNothingLeaked() {
  ASSERT_TRUE(engine_->Step().ok());  // delivers the last finished ids to the worker
  EXPECT_EQ(engine_->scheduler().kv().pool().num_used_blocks(), 0);
  EXPECT_EQ(executor_->engine().num_sequences(), 0);
}

int64_t EngineFixture::Add(const std::vector<int>& prompt, SamplingParams sampling, int n,
                           std::optional<int> max_tokens) {
  GenerationRequest r;
  r.prompt_ids = prompt;
  r.sampling = sampling;
  r.n = n;
  r.max_tokens = max_tokens;
  return Add(r);
}

int64_t EngineFixture::Add(const GenerationRequest& request) {
  const int64_t id = next_request_id_++;
  const absl::Status added = engine_->AddRequest(id, request);
  EXPECT_TRUE(added.ok()) << added;
  return id;
}

SamplingParams EngineFixture::Greedy() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}

SamplingParams EngineFixture::Sampled(uint64_t seed) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.seed = seed;
  return p;
}

std::vector<std::vector<int>> EngineFixture::ManyPrompts() {
  auto tok = Llama2cTokenizer::Load(Stories260KTokenizer());
  CHECK(tok.ok()) << tok.status();
  const char* subjects[] = {"The cat",     "A little boy", "Tom and Sue", "The old man",
                            "A tiny bird", "Lily",         "The big dog", "Mom"};
  const char* verbs[] = {" went to the park", " saw a ball", " was very happy", " liked to sing"};
  std::vector<std::vector<int>> prompts;
  for (const char* s : subjects) {
    for (const char* v : verbs) {
      std::vector<int> ids = {1};
      for (int id : (*tok)->Encode(std::string(s) + v)) ids.push_back(id);
      prompts.push_back(ids);
    }
  }
  return prompts;
}

}  // namespace pagoda::testing
