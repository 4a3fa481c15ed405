// The prompt's log probabilities as clients read them from a real pagoda-router and worker:
// vLLM's prompt_logprobs on /v1/chat/completions (streamed and not), GenerateRequest's
// prompt_logprobs over gRPC, and completions' echo with logprobs (lm-evaluation-harness's
// log-likelihood request), each equal to the float64 reference's log-softmax at every
// position. The served model is stories260K-hf with a chat template from the golden set.
#include <httplib.h>

#include <cmath>

#include "common/model/model_loader.h"
#include "nlohmann/json.hpp"
#include "tests/common/model/reference_model.h"
#include "tests/integration/serving_fixture.h"

namespace pagoda {
namespace {

using Json = nlohmann::json;

// What the worker computes in f32 may differ from the float64 reference by rounding only.
constexpr double kTolerance = 1e-4;

class PromptLogprobsApiTest : public ServingTest {
 protected:
  void SetUp() override {
    ServingTest::SetUp();
    model_ = ServeHfCopyWithChatTemplate("microsoft-Phi-3.5-mini-instruct");
    absl::StatusOr<ModelWeights> weights = LoadModelWeights(model_);
    ASSERT_TRUE(weights.ok()) << weights.status();
    weights_ = *std::move(weights);
  }

  Json PostJson(const std::string& path, const Json& body) {
    httplib::Client client("127.0.0.1", http_port_);
    client.set_read_timeout(60, 0);
    httplib::Result r = client.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r) << path;
    if (!r) return Json();
    EXPECT_EQ(r->status, 200) << r->body;
    return Json::parse(r->body, nullptr, false);
  }

  // The payloads of a streamed call's `data:` events, "[DONE]" left out.
  std::vector<Json> Stream(const std::string& path, Json body) {
    body["stream"] = true;
    httplib::Client client("127.0.0.1", http_port_);
    client.set_read_timeout(60, 0);
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    std::string buffer;
    std::vector<Json> events;
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      buffer.append(data, n);
      for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
        const std::string event = buffer.substr(6, end - 6);  // after "data: "
        buffer.erase(0, end + 2);
        if (event != "[DONE]") events.push_back(Json::parse(event));
      }
      return true;
    };
    EXPECT_TRUE(client.send(req));
    return events;
  }

  // The reference's log-softmax of `token` after the first `pos` + 1 tokens of `logits`' run.
  double Reference(const std::vector<double>& logits, int pos, int token) const {
    const int vocab = weights_.config.vocab_size;
    const double* row = &logits[static_cast<size_t>(pos) * vocab];
    double max = row[0];
    for (int i = 1; i < vocab; ++i) max = std::max(max, row[i]);
    double sum = 0;
    for (int i = 0; i < vocab; ++i) sum += std::exp(row[i] - max);
    return row[token] - max - std::log(sum);
  }

  // vLLM's form: null, then per position {"id": {"logprob", "rank", "decoded_token"}} holding
  // the prompt's token and its `top` alternatives.
  void ExpectVllmPromptLogprobs(const Json& got, const std::vector<int>& prompt, int top) {
    ASSERT_TRUE(got.is_array()) << got;
    ASSERT_EQ(got.size(), prompt.size());
    EXPECT_TRUE(got[0].is_null());
    const std::vector<double> ref = testing::ReferenceLogits(weights_, prompt);
    for (size_t pos = 1; pos < prompt.size(); ++pos) {
      const Json& entries = got[pos];
      const std::string id = std::to_string(prompt[pos]);
      ASSERT_TRUE(entries.contains(id)) << "position " << pos << ": " << entries;
      EXPECT_NEAR(entries[id]["logprob"].get<double>(),
                  Reference(ref, static_cast<int>(pos - 1), prompt[pos]), kTolerance)
          << "position " << pos;
      EXPECT_GE(entries[id]["rank"].get<int>(), 1);
      // The prompt's token, and the alternatives (it may be one of them).
      EXPECT_GE(entries.size(), static_cast<size_t>(std::max(top, 1)));
      EXPECT_LE(entries.size(), static_cast<size_t>(top + 1));
      for (const auto& [alt, entry] : entries.items()) {
        EXPECT_NEAR(entry["logprob"].get<double>(),
                    Reference(ref, static_cast<int>(pos - 1), std::stoi(alt)), kTolerance)
            << "position " << pos << ", token " << alt;
      }
    }
  }

  std::string model_;
  ModelWeights weights_;
};

TEST_F(PromptLogprobsApiTest, ChatPromptLogprobsEqualTheReferenceStreamedAndNot) {
  const Json chat = {{"messages", {{{"role", "user"}, {"content", "Tell me about a cat."}}}},
                     {"max_tokens", 2},
                     {"temperature", 0},
                     {"prompt_logprobs", 3}};
  const std::vector<int> prompt = PostJson("/tokenize", chat)["tokens"].get<std::vector<int>>();
  ASSERT_GT(prompt.size(), 10u);
  const Json reply = PostJson("/v1/chat/completions", chat);
  EXPECT_EQ(reply["usage"]["prompt_tokens"], prompt.size());
  ExpectVllmPromptLogprobs(reply["prompt_logprobs"], prompt, 3);

  // Streamed: on the first chunk only, the same as not streamed.
  const std::vector<Json> events = Stream("/v1/chat/completions", chat);
  int with = 0;
  for (const Json& e : events) {
    if (!e.contains("prompt_logprobs")) continue;
    ++with;
    EXPECT_EQ(e["prompt_logprobs"], reply["prompt_logprobs"]);
  }
  EXPECT_EQ(with, 1);
}

TEST_F(PromptLogprobsApiTest, GrpcPromptLogprobsEqualTheReference) {
  const std::vector<int> prompt =
      PostJson("/tokenize",
               {{"prompt", "Once upon a time, there was a little girl named Lily."}})["tokens"]
          .get<std::vector<int>>();
  ASSERT_GT(prompt.size(), 10u);
  v1::GenerateRequest request = Greedy("");
  request.clear_prompt();
  for (int id : prompt) request.add_prompt_token_ids(id);
  request.set_max_tokens(0);  // the prompt's log probabilities only
  request.set_prompt_logprobs(2);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = stub_->Generate(&ctx, request);
  std::vector<v1::GenerateResponse> messages;
  for (v1::GenerateResponse m; reader->Read(&m);) messages.push_back(m);
  const grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_FALSE(messages.empty());
  const auto& got = messages.front().prompt_logprobs();
  ASSERT_EQ(got.size(), static_cast<int>(prompt.size()) - 1) << "positions 1, 2, ...";
  const std::vector<double> ref = testing::ReferenceLogits(weights_, prompt);
  for (int k = 0; k < got.size(); ++k) {
    const v1::TokenLogprobs& entry = got[k];
    EXPECT_EQ(entry.token_id(), prompt[k + 1]);
    EXPECT_NEAR(entry.logprob(), Reference(ref, k, prompt[k + 1]), kTolerance) << "position " << k;
    ASSERT_EQ(entry.top_size(), 2);
    EXPECT_GE(entry.top(0).logprob(), entry.top(1).logprob());
    for (const v1::TopLogprob& t : entry.top()) {
      EXPECT_NEAR(t.logprob(), Reference(ref, k, t.token_id()), kTolerance);
    }
    EXPECT_EQ(entry.rank() == 1, entry.top(0).token_id() == prompt[k + 1]) << "position " << k;
  }
  for (size_t i = 1; i < messages.size(); ++i) EXPECT_EQ(messages[i].prompt_logprobs_size(), 0);
  EXPECT_EQ(messages.back().finish_reason(), "length");
  EXPECT_TRUE(messages.back().token_ids().empty());
}

// lm-evaluation-harness's log-likelihood request: echo, logprobs, max_tokens 0; the
// continuation's summed log probability is the reference's.
TEST_F(PromptLogprobsApiTest, EchoedCompletionLogprobsGiveAContinuationsLogLikelihood) {
  const std::string context = "Once upon a time, there was a little girl";
  const std::string continuation = " named Lily.";
  const std::vector<int> prompt =
      PostJson("/tokenize", {{"prompt", context + continuation}})["tokens"].get<std::vector<int>>();
  const size_t context_tokens = PostJson("/tokenize", {{"prompt", context}})["tokens"].size();
  ASSERT_LT(context_tokens, prompt.size());
  const Json reply = PostJson(
      "/v1/completions",
      {{"prompt", context + continuation}, {"echo", true}, {"logprobs", 1}, {"max_tokens", 0}});
  const Json& logprobs = reply["choices"][0]["logprobs"];
  ASSERT_EQ(logprobs["token_logprobs"].size(), prompt.size()) << reply;
  EXPECT_TRUE(logprobs["token_logprobs"][0].is_null());
  EXPECT_EQ(reply["choices"][0]["text"], context + continuation);
  const std::vector<double> ref = testing::ReferenceLogits(weights_, prompt);
  double got = 0, want = 0;
  for (size_t pos = context_tokens; pos < prompt.size(); ++pos) {
    got += logprobs["token_logprobs"][pos].get<double>();
    want += Reference(ref, static_cast<int>(pos - 1), prompt[pos]);
  }
  EXPECT_NEAR(got, want, 1e-3);
}

}  // namespace
}  // namespace pagoda
