// The OpenAI-compatible HTTP API of a real pagoda-router with a real worker, on loopback: the
// served model is stories260K-hf with a chat template from the golden set. The official Node
// SDK drives the same API in tests/openai_sdk; here the checks that need the gRPC API beside
// it (same tokens both ways), raw bytes (SSE framing, bad bodies) or the router's internals
// (blocks freed, abort counted).
#include <httplib.h>

#include "nlohmann/json.hpp"
#include "router/api/request_policy.h"
#include "tests/integration/serving_fixture.h"

namespace pagoda {
namespace {

using Json = nlohmann::json;

class OpenAiTest : public ServingTest {
 protected:
  void SetUp() override {
    ServingTest::SetUp();
    // A real model's template (Phi-3.5's, from the golden set).
    model_ = ServeHfCopyWithChatTemplate("microsoft-Phi-3.5-mini-instruct");
  }

  httplib::Result Post(const std::string& path, const Json& body) {
    httplib::Client client("127.0.0.1", http_port_);
    client.set_read_timeout(60, 0);
    return client.Post(path.c_str(), body.dump(), "application/json");
  }
  Json PostJson(const std::string& path, const Json& body, int want_status = 200) {
    httplib::Result r = Post(path, body);
    EXPECT_TRUE(r) << path;
    if (!r) return Json();
    EXPECT_EQ(r->status, want_status) << r->body;
    return Json::parse(r->body, nullptr, false);
  }
  // The payloads of a streamed call's events, "[DONE]" included; `stop_after` > 0 closes
  // the connection after that many.
  std::vector<std::string> Stream(const std::string& path, const Json& body, int stop_after = 0) {
    httplib::Client client("127.0.0.1", http_port_);
    client.set_read_timeout(60, 0);
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    std::string buffer;
    std::vector<std::string> events;
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      buffer.append(data, n);
      // (A read may bring more events than stop_after: the rest are not taken.)
      for (size_t end; (stop_after == 0 || static_cast<int>(events.size()) < stop_after) &&
                       (end = buffer.find("\n\n")) != std::string::npos;) {
        const std::string event = buffer.substr(0, end);
        buffer.erase(0, end + 2);
        EXPECT_TRUE(event.starts_with("data: ")) << event;
        events.push_back(event.substr(6));
      }
      return stop_after == 0 || static_cast<int>(events.size()) < stop_after;
    };
    client.send(req);
    if (stop_after == 0) {
      EXPECT_EQ(buffer, "") << "bytes after the last event";
    }
    return events;
  }
  double AbortCount() {
    // /metrics on the API's own port.
    httplib::Client client("127.0.0.1", http_port_);
    const std::string text = client.Get("/metrics")->body;
    const std::string series = "finished_reason=\"abort\"} ";
    const size_t at = text.find(series);
    if (at == std::string::npos) return -1;
    return std::stod(text.substr(at + series.size()));
  }

  // A gauge's value from the API's own /metrics; -1 if it is not there.
  double Gauge(const std::string& name) {
    httplib::Client client("127.0.0.1", http_port_);
    const std::string text = client.Get("/metrics")->body;
    const size_t at = text.find(name + "{");
    if (at == std::string::npos) return -1;
    const size_t value = text.find("} ", at);
    return std::stod(text.substr(value + 2));
  }

  // Stops every worker and waits until the router knows.
  void StopWorkers() {
    for (pid_t pid : workers_) Kill(pid);
    workers_.clear();
    WaitForWorkers(0);
  }

  static Json Chat(const std::string& content) {
    return Json{{"messages", {{{"role", "user"}, {"content", content}}}}};
  }

  std::string model_;
};

TEST_F(OpenAiTest, GreedyChatOverHttpEqualsTheSamePromptOverGrpc) {
  Json chat = Chat("Tell me a story about a cat.");
  const Json ids = PostJson("/tokenize", chat)["tokens"];
  ASSERT_GT(ids.size(), 5u);
  chat["temperature"] = 0;
  chat["max_tokens"] = 40;
  const Json reply = PostJson("/v1/chat/completions", chat);

  v1::GenerateRequest request = Greedy("");
  request.clear_prompt();
  for (int id : ids) request.add_prompt_token_ids(id);
  request.set_max_tokens(40);
  request.mutable_sampling()->set_temperature(0);
  const testing::StreamOutput grpc = Generate(request);
  ASSERT_TRUE(grpc.status.ok()) << grpc.status.error_message();

  EXPECT_EQ(reply["object"], "chat.completion");
  EXPECT_EQ(reply["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(reply["choices"][0]["message"]["content"], grpc.text[0]);
  EXPECT_EQ(reply["usage"]["completion_tokens"], grpc.ids[0].size());
  EXPECT_EQ(reply["usage"]["prompt_tokens"], ids.size());
  EXPECT_EQ(reply["choices"][0]["finish_reason"], grpc.finish[0]);
  EXPECT_TRUE(reply["system_fingerprint"].get<std::string>().starts_with("fp_"));
}

// The model's EOS ids are 1 and 2 (generation_config.json): +100 ends a sequence at once,
// unless min_tokens holds them back. Both APIs carry the fields to the same sampler.
TEST_F(OpenAiTest, LogitBiasAndMinTokensShapeTheOutputAlikeOverHttpAndGrpc) {
  const Json ids = PostJson("/tokenize", {{"prompt", "Once upon a time"}})["tokens"];
  Json ask = {{"prompt", ids},
              {"max_tokens", 40},
              {"temperature", 1},
              {"seed", 7},
              {"logit_bias", {{"1", 100}, {"2", 100}, {"13", -100}}}};
  const Json eager = PostJson("/v1/completions", ask);
  EXPECT_LT(eager["usage"]["completion_tokens"].get<int>(), 5) << eager;
  EXPECT_EQ(eager["choices"][0]["finish_reason"], "stop");
  ask["min_tokens"] = 25;
  const Json held = PostJson("/v1/completions", ask);
  EXPECT_GE(held["usage"]["completion_tokens"].get<int>(), 25) << held;
  EXPECT_EQ(held["choices"][0]["finish_reason"], "stop") << "EOS comes once it may";
  ask["stream"] = true;
  std::string streamed;
  for (const std::string& e : Stream("/v1/completions", ask)) {
    if (e != "[DONE]") streamed += Json::parse(e)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(streamed, held["choices"][0]["text"]);

  v1::GenerateRequest request = Greedy("");
  request.clear_prompt();
  for (int id : ids) request.add_prompt_token_ids(id);
  request.set_max_tokens(40);
  request.set_min_tokens(25);
  request.mutable_sampling()->set_temperature(1);
  request.mutable_sampling()->set_seed(7);
  auto& bias = *request.mutable_sampling()->mutable_logit_bias();
  bias[1] = 100;
  bias[2] = 100;
  bias[13] = -100;
  const testing::StreamOutput grpc = Generate(request);
  ASSERT_TRUE(grpc.status.ok()) << grpc.status.error_message();
  EXPECT_EQ(grpc.text[0], held["choices"][0]["text"]);
  EXPECT_EQ(grpc.ids[0].size(), held["usage"]["completion_tokens"]);
  bias[512] = 1;  // outside the vocabulary
  EXPECT_EQ(Generate(request).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(OpenAiTest, CompletionsTakeEveryPromptForm) {
  const Json ids = PostJson("/tokenize", {{"prompt", "Once upon a time"}})["tokens"];
  for (const Json& prompt : {Json("Once upon a time"), ids}) {
    const Json r = PostJson("/v1/completions", {{"prompt", prompt}, {"temperature", 0}});
    ASSERT_EQ(r["choices"].size(), 1u) << r;
    EXPECT_EQ(r["usage"]["completion_tokens"], 16) << "OpenAI's default max_tokens";
    EXPECT_EQ(r["usage"]["prompt_tokens"], ids.size());
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  }
  // Two prompts (text and ids) times n = 2: four choices, prompt by prompt.
  const Json r =
      PostJson("/v1/completions",
               {{"prompt", {Json("Once"), ids}}, {"n", 2}, {"max_tokens", 5}, {"seed", 3}});
  ASSERT_EQ(r["choices"].size(), 4u) << r;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r["choices"][i]["index"], i);
  EXPECT_EQ(r["usage"]["completion_tokens"], 20);
  EXPECT_EQ(r["usage"]["total_tokens"],
            r["usage"]["prompt_tokens"].get<int>() + r["usage"]["completion_tokens"].get<int>());
  // echo: the prompt starts the text.
  const Json echoed = PostJson(
      "/v1/completions",
      {{"prompt", "Once upon a time"}, {"echo", true}, {"max_tokens", 3}, {"temperature", 0}});
  EXPECT_TRUE(echoed["choices"][0]["text"].get<std::string>().starts_with("Once upon a time"));
}

TEST_F(OpenAiTest, AStreamedChatIsWellFormedServerSentEvents) {
  Json chat = Chat("Hi");
  chat["stream"] = true;
  chat["stream_options"] = {{"include_usage", true}};
  chat["max_tokens"] = 12;
  chat["n"] = 2;
  const std::vector<std::string> events = Stream("/v1/chat/completions", chat);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string id;
  int finished = 0, completion_tokens = 0;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const Json e = Json::parse(events[i], nullptr, false);
    ASSERT_FALSE(e.is_discarded()) << events[i];
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    if (id.empty()) id = e["id"];
    EXPECT_EQ(e["id"], id) << "one id for the whole stream";
    if (i < 2) {
      EXPECT_EQ(e["choices"][0]["delta"]["role"], "assistant") << events[i];
    }
    if (i + 2 == events.size()) {  // the usage chunk closes the stream
      EXPECT_TRUE(e["choices"].empty());
      completion_tokens = e["usage"]["completion_tokens"];
      continue;
    }
    if (!e["choices"][0]["finish_reason"].is_null()) ++finished;
  }
  EXPECT_EQ(finished, 2);
  EXPECT_EQ(completion_tokens, 24);
}

TEST_F(OpenAiTest, BadRequestsGetOpenAisErrorObjectNamingTheField) {
  struct Case {
    Json body;
    std::string param;
    std::string code;  // OpenAI's string code
  };
  const Json too_many_ids = std::vector<int>(257, 1);
  const std::vector<Case> cases = {
      {{{"prompt", "x"}, {"temperature", -1}}, "temperature", "invalid_value"},
      {{{"prompt", "x"}, {"temperature", "hot"}}, "temperature", "invalid_type"},
      {{{"prompt", "x"}, {"max_tokens", 0}}, "max_tokens", "invalid_value"},
      {{{"prompt", "x"}, {"max_tokens", 100000}}, "max_tokens", "context_length_exceeded"},
      {{{"prompt", too_many_ids}}, "prompt", "context_length_exceeded"},
      {{{"prompt", std::string(257 * 64 + 1, 'a')}}, "prompt", "context_length_exceeded"},
      {{{"prompt", "x"}, {"n", 99}}, "n", "invalid_value"},
      {{{"prompt", "x"}, {"n", -1}}, "n", "invalid_value"},
      {{{"prompt", "x"}, {"top_p", 0}}, "top_p", "invalid_value"},
      {{{"prompt", "x"}, {"stop", {1, 2}}}, "stop", "invalid_value"},
      {{{"prompt", "x"}, {"logprobs", 21}}, "logprobs", "invalid_value"},
      {{{"prompt", "x"}, {"stream", "yes"}}, "stream", "invalid_type"},
      {{{"prompt", "x"}, {"suffix", "y"}}, "suffix", "unsupported_parameter"},
      {{{"prompt", {1, 99999}}}, "prompt", "invalid_value"},
      {{{"prompt", Json::array()}}, "prompt", "invalid_value"},
      {{{"prompt", 5}}, "prompt", "invalid_value"},
      {{{"max_tokens", 5}}, "prompt", "missing_required_parameter"},
      {{{"prompt", "x"}, {"logit_bias", {{"5", 1000}}}}, "logit_bias", "invalid_value"},
      {{{"prompt", "x"}, {"logit_bias", {{"512", 1}}}}, "logit_bias", "invalid_value"},
      {{{"prompt", "x"}, {"logit_bias", {{"x", 1}}}}, "logit_bias", "invalid_value"},
      {{{"prompt", "x"}, {"logit_bias", {{"5", "up"}}}}, "logit_bias", "invalid_type"},
      {{{"prompt", "x"}, {"logit_bias", "no"}}, "logit_bias", "invalid_type"},
      {{{"prompt", "x"}, {"min_tokens", 17}}, "min_tokens", "invalid_value"},  // > 16
      {{{"prompt", "x"}, {"min_tokens", -1}}, "min_tokens", "invalid_value"},
  };
  for (const Case& c : cases) {
    const Json r = PostJson("/v1/completions", c.body, 400);
    EXPECT_EQ(r["error"]["param"], c.param) << c.body << " -> " << r;
    EXPECT_EQ(r["error"]["code"], c.code) << c.body << " -> " << r;
    EXPECT_EQ(r["error"]["type"], "invalid_request_error");
    EXPECT_FALSE(r["error"]["message"].get<std::string>().empty());
  }
  EXPECT_EQ(PostJson("/v1/chat/completions", Json::object(), 400)["error"]["code"],
            "missing_required_parameter");
  EXPECT_EQ(PostJson("/v1/chat/completions", {{"messages", "hi"}}, 400)["error"]["param"],
            "messages");
  EXPECT_EQ(PostJson("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", 7}}}}},
                     400)["error"]["param"],
            "messages");
  EXPECT_EQ(
      PostJson("/v1/chat/completions", {{"messages", {{{"content", "x"}}}}}, 400)["error"]["param"],
      "messages");
  // A call demanded with no tools to call, a flag of the wrong type, a field nobody reads.
  struct ChatCase {
    const char* field;
    Json value;
    const char* code;
  };
  for (const ChatCase& c : {ChatCase{"tool_choice", "required", "invalid_value"},
                            ChatCase{"parallel_tool_calls", "no", "invalid_type"},
                            ChatCase{"frobnicate", 1, "unsupported_parameter"},
                            ChatCase{"store", true, "unsupported_parameter"}}) {
    Json body = {{"messages", {{{"role", "user"}, {"content", "x"}}}}};
    body[c.field] = c.value;
    const Json e = PostJson("/v1/chat/completions", body, 400)["error"];
    EXPECT_EQ(e["param"], c.field);
    EXPECT_EQ(e["code"], c.code) << e;
  }
  // Not JSON, an unknown model, an unknown route.
  httplib::Result r = Post("/v1/completions", Json("not an object"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  // A message nested a million deep is refused, not a stack overflow.
  httplib::Client client("127.0.0.1", http_port_);
  const std::string deep = R"({"messages":[{"role":"user","content":"x","extra":)" +
                           std::string(1'000'000, '[') + std::string(1'000'000, ']') + "}]}";
  r = client.Post("/v1/chat/completions", deep, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  const Json unknown = PostJson("/v1/completions", {{"prompt", "x"}, {"model", "gpt-4"}}, 404);
  EXPECT_EQ(unknown["error"]["code"], "model_not_found");
  EXPECT_EQ(PostJson("/v1/nothing", Json::object(), 404)["error"]["type"], "not_found_error");
  EXPECT_EQ(PostJson("/v1/nothing", Json::object(), 404)["error"]["code"], "not_found");
}

TEST_F(OpenAiTest, AStreamingClientThatLeavesAbortsItsSequences) {
  const double aborted_before = AbortCount();
  const std::vector<std::string> events =
      Stream("/v1/completions",
             {{"prompt", "Once"}, {"max_tokens", 240}, {"ignore_eos", true}, {"stream", true}},
             /*stop_after=*/3);
  EXPECT_EQ(events.size(), 3u);
  WaitForNoUsedBlocks();
  testing::WaitUntil([&] { return AbortCount() > aborted_before; }, std::chrono::seconds(30),
                     "the stream its client left is counted as an abort",
                     std::chrono::milliseconds(25));
  EXPECT_EQ(AbortCount(), aborted_before + 1) << "the sequence ran on after its client left";
}

TEST_F(OpenAiTest, AnUnsetSeedIsDrawnReportedAndReplays) {
  const Json ask = {{"prompt", "Once upon a time"}, {"temperature", 1}, {"max_tokens", 24}};
  const Json a = PostJson("/v1/completions", ask);
  const Json b = PostJson("/v1/completions", ask);
  EXPECT_NE(a["seed"], b["seed"]);
  EXPECT_NE(a["choices"][0]["text"], b["choices"][0]["text"]);
  Json replay = ask;
  replay["seed"] = a["seed"];
  EXPECT_EQ(PostJson("/v1/completions", replay)["choices"][0]["text"], a["choices"][0]["text"]);

  // The same on gRPC: the last message reports the seed drawn, and replays with it.
  v1::GenerateRequest request = Greedy("Once upon a time");
  request.mutable_sampling()->set_temperature(1);
  request.set_max_tokens(24);
  const testing::StreamOutput first = Generate(request);
  const testing::StreamOutput second = Generate(request);
  ASSERT_TRUE(first.status.ok() && second.status.ok());
  EXPECT_NE(first.ids[0], second.ids[0]);
  request.mutable_sampling()->set_seed(first.seed);
  EXPECT_EQ(Generate(request).ids[0], first.ids[0]);
}

// README's rule for both APIs: with no worker ready a call waits for one, on gRPC until just
// before its deadline, on HTTP (whose clients send none) kWorkerWait; then UNAVAILABLE / 503.
TEST_F(OpenAiTest, WithoutAWorkerBothApisWaitTheirBoundThenAnswerUnavailable) {
  httplib::Client client("127.0.0.1", http_port_);
  EXPECT_EQ(client.Get("/health")->status, 200);
  const Json models = Json::parse(client.Get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["id"], "chat-model");
  EXPECT_EQ(models["data"][0]["max_model_len"], 257);
  EXPECT_EQ(models["data"][0]["meta"]["n_vocab"], 512);
  StopWorkers();
  testing::WaitUntil([&] { return client.Get("/health")->status == 503; }, std::chrono::seconds(30),
                     "the HTTP port's /health answers 503 with no worker",
                     std::chrono::milliseconds(50));

  grpc::Status grpc_status;
  absl::Duration grpc_waited;
  std::thread grpc_call([&] {
    const absl::Time start = absl::Now();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    auto reader = stub_->Generate(&ctx, Greedy("Once"));
    v1::GenerateResponse response;
    EXPECT_FALSE(reader->Read(&response));
    grpc_status = reader->Finish();
    grpc_waited = absl::Now() - start;
  });
  int streamed_status = 0;
  std::string streamed_body;
  std::thread streaming_call([&] {
    const httplib::Result r = Post("/v1/completions", {{"prompt", "x"}, {"stream", true}});
    ASSERT_TRUE(r);
    streamed_status = r->status;
    streamed_body = r->body;
  });
  const absl::Time start = absl::Now();
  const Json error = PostJson("/v1/completions", {{"prompt", "x"}}, 503);
  const absl::Duration http_waited = absl::Now() - start;
  grpc_call.join();
  streaming_call.join();

  EXPECT_EQ(grpc_status.error_code(), grpc::StatusCode::UNAVAILABLE) << grpc_status.error_message();
  EXPECT_GT(grpc_waited, absl::Seconds(1)) << "it waited for a worker";
  EXPECT_EQ(error["error"]["type"], "service_unavailable_error");
  EXPECT_EQ(error["error"]["code"], "service_unavailable");
  EXPECT_GE(http_waited, kWorkerWait - absl::Seconds(1)) << "it waited for a worker";
  EXPECT_LT(http_waited, kWorkerWait + absl::Seconds(10));
  EXPECT_EQ(streamed_status, 503) << "a stream opens only once a worker took the call";
  EXPECT_EQ(Json::parse(streamed_body, nullptr, false)["error"]["type"],
            "service_unavailable_error");
}

TEST_F(OpenAiTest, AnHttpCallSentBeforeAnyWorkerIsServedWhenOneJoins) {
  StopWorkers();
  Json reply;
  std::thread call([&] {
    reply = PostJson("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 5}});
  });
  // Queued, not refused: then a worker joins.
  testing::WaitUntil([&] { return Gauge("pagoda_num_requests_waiting") >= 1; },
                     std::chrono::seconds(30), "the call waits for a worker",
                     std::chrono::milliseconds(25));
  EXPECT_EQ(Gauge("pagoda_num_requests_waiting"), 1);
  StartWorker(model_);
  call.join();
  EXPECT_EQ(reply["usage"]["completion_tokens"], 5) << reply;
}

}  // namespace
}  // namespace pagoda
