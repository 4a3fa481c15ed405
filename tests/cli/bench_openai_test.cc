// `pagoda bench --backend=openai` against a scripted OpenAI-compatible server on loopback (an
// httplib::Server in this process): what it sends (token-id prompts, max_tokens, streaming with
// usage, the API key), how it reads the stream and reports it, and how it fails on a server
// that misbehaves. The same command against a real router's --http-port and llama-server:
// README and docs/BENCHMARKS.md.
#include <httplib.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

enum class Behavior { kGood, kBadChunk, kRefuse, kNoDone, kErrorEvent };

class FakeOpenAiServer {
 public:
  FakeOpenAiServer(Behavior behavior, Json model) : behavior_(behavior) {
    server_.Get("/v1/models", [model](const httplib::Request&, httplib::Response& res) {
      res.set_content(JsonDump(Json{{"object", "list"}, {"data", Json::array({model})}}),
                      "application/json");
    });
    server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Json body = Json::parse(req.body, nullptr, false);
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(body);
        authorizations_.push_back(req.get_header_value("Authorization"));
      }
      if (behavior_ == Behavior::kRefuse) {
        res.status = 401;
        res.set_content(R"({"error":{"message":"bad key","type":"invalid_request_error"}})",
                        "application/json");
        return;
      }
      const int n = body.value("max_tokens", 0);
      const int prompt = static_cast<int>(body.value("prompt", Json::array()).size());
      res.set_chunked_content_provider(
          "text/event-stream", [this, n, prompt](size_t, httplib::DataSink& sink) {
            auto event = [&](const std::string& data) {
              const std::string line = "data: " + data + "\n\n";
              sink.write(line.data(), line.size());
            };
            for (int i = 0; i < n; ++i) {
              if (behavior_ == Behavior::kBadChunk && i == 1) event("{not json");
              if (behavior_ == Behavior::kErrorEvent && i == 1) {
                event(R"({"error":{"message":"worker lost","code":500}})");
              }
              event(JsonDump(Json{{"choices", Json::array({{{"index", 0}, {"text", "x"}}})}}));
            }
            event(JsonDump(Json{{"choices", Json::array()},
                                {"usage",
                                 {{"prompt_tokens", prompt},
                                  {"completion_tokens", n},
                                  {"prompt_tokens_details", {{"cached_tokens", prompt / 2}}}}}}));
            if (behavior_ != Behavior::kNoDone) event("[DONE]");
            sink.done();
            return true;
          });
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeOpenAiServer() {
    // httplib's stop() does nothing before listen_after_bind has begun, and join() would then
    // never return: a server that does not listen in time ends the run, not hangs it.
    if (!testing::WaitUntil([this] { return server_.is_running(); }, std::chrono::seconds(30),
                            "the fake OpenAI server listens")) {
      std::abort();
    }
    server_.stop();
    thread_.join();
  }

  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_); }
  std::vector<Json> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  std::vector<std::string> authorizations() {
    std::lock_guard<std::mutex> lock(mu_);
    return authorizations_;
  }

 private:
  const Behavior behavior_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<Json> requests_;
  std::vector<std::string> authorizations_;
};

const Json kModel = {{"id", "fake-model"}, {"max_model_len", 257}, {"meta", {{"n_vocab", 300}}}};

testing::CommandResult Bench(const std::string& url, std::vector<std::string> flags) {
  std::vector<std::string> argv = {testing::BinaryPath("pagoda"), "bench", "--backend=openai",
                                   "--base-url=" + url};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return testing::RunCommand(argv);
}

Json Report(const testing::CommandResult& r) {
  Json j = Json::parse(r.out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << r.out << r.err;
  return j.is_object() ? j : Json::object();
}

TEST(BenchOpenAiTest, SendsTokenIdPromptsStreamedAndReportsWhatItRead) {
  FakeOpenAiServer server(Behavior::kGood, kModel);
  const testing::CommandResult r =
      Bench(server.url() + "/v1/", {"--num-prompts=4", "--input-len=10", "--output-len=5",
                                    "--ignore-eos", "--api-key=k3y", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json report = Report(r);
  EXPECT_EQ(report.value("backend", ""), "openai");
  EXPECT_EQ(report.value("completed", -1), 4);
  EXPECT_EQ(report.value("total_input_tokens", -1), 40);
  EXPECT_EQ(report.value("total_output_tokens", -1), 20) << "usage.completion_tokens";
  EXPECT_EQ(report.value("prefix_cache_hit_rate", -1.0), 0.5) << "cached_tokens";
  EXPECT_GT(report.value("p99_itl_ms", -1.0), 0);
  const std::vector<Json> requests = server.requests();
  ASSERT_EQ(requests.size(), 4u);
  for (const Json& q : requests) {
    EXPECT_EQ(q.value("model", ""), "fake-model") << "GET /v1/models' first id";
    EXPECT_EQ(q.value("max_tokens", 0), 5);
    EXPECT_EQ(q.value("temperature", -1.0), 0);
    EXPECT_EQ(q.value("stream", false), true);
    EXPECT_EQ(q["stream_options"].value("include_usage", false), true);
    EXPECT_EQ(q.value("ignore_eos", false), true);
    ASSERT_TRUE(q["prompt"].is_array());
    ASSERT_EQ(q["prompt"].size(), 10u);
    for (const Json& id : q["prompt"]) {
      EXPECT_TRUE(id.is_number_integer() && id.get<int>() >= 0 && id.get<int>() < 300) << id;
    }
  }
  for (const std::string& auth : server.authorizations()) EXPECT_EQ(auth, "Bearer k3y");
}

TEST(BenchOpenAiTest, EndsStreamsEarlyAndGrowsChatHistories) {
  FakeOpenAiServer server(Behavior::kGood, kModel);
  // max_tokens 2x the output: the client stops reading each stream after 5 tokens.
  const testing::CommandResult early =
      Bench(server.url(), {"--num-prompts=3", "--input-len=6", "--output-len=5",
                           "--max-tokens-ratio=2", "--model-name=other", "--json"});
  ASSERT_EQ(early.exit_code, 0) << early.err;
  EXPECT_EQ(Report(early).value("total_output_tokens", -1), 15);
  for (const Json& q : server.requests()) {
    EXPECT_EQ(q.value("max_tokens", 0), 10);
    EXPECT_EQ(q.value("model", ""), "other") << "--model-name";
    EXPECT_FALSE(q.contains("ignore_eos"));
  }
  // Several models (a model's LoRA adapters) in turn; llama-server's adapters by id in turn.
  FakeOpenAiServer spread_server(Behavior::kGood, kModel);
  const testing::CommandResult spread =
      Bench(spread_server.url(), {"--num-prompts=6", "--input-len=2", "--output-len=1",
                                  "--model-name=a,b,c", "--lora-ids=2", "--max-concurrency=1"});
  ASSERT_EQ(spread.exit_code, 0) << spread.err;
  std::vector<std::string> models;
  std::vector<int> lora_ids;
  for (const Json& q : spread_server.requests()) {
    models.push_back(q.value("model", ""));
    ASSERT_TRUE(q["lora"].is_array() && q["lora"].size() == 1u) << q;
    lora_ids.push_back(q["lora"][0].value("id", -1));
    EXPECT_EQ(q["lora"][0].value("scale", 0.0), 1.0);
  }
  EXPECT_EQ(models, std::vector<std::string>({"a", "b", "c", "a", "b", "c"}));
  EXPECT_EQ(lora_ids, std::vector<int>({0, 1, 0, 1, 0, 1}));
  // Two turns: the second resends system (1 + 8) + message (4) + reply (3) + message (4).
  FakeOpenAiServer chat_server(Behavior::kGood, kModel);
  const testing::CommandResult chat =
      Bench(chat_server.url(), {"--dataset=chat", "--num-prompts=2", "--turns=2",
                                "--system-prompt-len=8", "--input-len=4", "--output-len=3"});
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  std::vector<size_t> lengths;
  for (const Json& q : chat_server.requests()) lengths.push_back(q["prompt"].size());
  EXPECT_EQ(lengths, std::vector<size_t>({13, 20}));
  EXPECT_THAT(chat.out, HasSubstr("Successful requests:                    2\n"));
}

TEST(BenchOpenAiTest, RepeatPromptsEndWithTheirPassagesStartAndSampleAtTheTemperature) {
  FakeOpenAiServer server(Behavior::kGood, kModel);
  // 31 tokens: BOS, a passage of 20, then the passage's first 10 again.
  const testing::CommandResult r =
      Bench(server.url(), {"--dataset=repeat", "--num-prompts=3", "--input-len=31",
                           "--output-len=2", "--temperature=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Json> requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);
  for (const Json& q : requests) {
    const std::vector<int> prompt = q["prompt"].get<std::vector<int>>();
    EXPECT_EQ(q.value("temperature", -1.0), 1.0);
    ASSERT_EQ(prompt.size(), 31u);
    EXPECT_EQ(prompt[0], 1) << "BOS";
    EXPECT_EQ(std::vector<int>(prompt.begin() + 21, prompt.end()),
              std::vector<int>(prompt.begin() + 1, prompt.begin() + 11));
  }
  EXPECT_NE(requests[0]["prompt"], requests[1]["prompt"]) << "a passage per prompt";
}

TEST(BenchOpenAiTest, AMisbehavingServerFailsRequestsWithAReason) {
  const std::vector<std::pair<Behavior, std::string>> cases = {
      {Behavior::kBadChunk, "a stream chunk: not valid JSON"},
      {Behavior::kRefuse, "HTTP 401: bad key"},
      {Behavior::kNoDone, "the stream ended before data: [DONE]"},
      {Behavior::kErrorEvent, "error event: worker lost"},
  };
  for (const auto& [behavior, message] : cases) {
    FakeOpenAiServer server(behavior, kModel);
    const testing::CommandResult r =
        Bench(server.url(), {"--num-prompts=2", "--input-len=4", "--output-len=3", "--json"});
    EXPECT_EQ(r.exit_code, 1) << message;
    EXPECT_EQ(Report(r).value("failed", -1), 2) << message;
    EXPECT_THAT(Report(r).value("first_error", ""), HasSubstr(message));
    EXPECT_THAT(r.err, HasSubstr("first failure: " + message.substr(0, 10)));
  }
}

TEST(BenchOpenAiTest, ServersThatCannotBeBenchedAreRefusedAtOnce) {
  FakeOpenAiServer no_vocab(Behavior::kGood, {{"id", "m"}});
  const testing::CommandResult vocab = Bench(no_vocab.url(), {"--num-prompts=1"});
  EXPECT_EQ(vocab.exit_code, 2);
  EXPECT_THAT(vocab.err, HasSubstr("does not give the vocabulary size: pass --vocab-size"));
  EXPECT_EQ(Bench(no_vocab.url(),
                  {"--num-prompts=1", "--vocab-size=64", "--input-len=4", "--output-len=2"})
                .exit_code,
            0);
  FakeOpenAiServer small(Behavior::kGood, kModel);
  const testing::CommandResult too_long = Bench(small.url(), {"--input-len=300"});
  EXPECT_EQ(too_long.exit_code, 2);
  EXPECT_THAT(too_long.err, HasSubstr("model length is 257"));
  const testing::CommandResult nobody = Bench("http://127.0.0.1:1", {});
  EXPECT_EQ(nobody.exit_code, 2);
  EXPECT_THAT(nobody.err, HasSubstr("error: cannot connect to http://127.0.0.1:1"));
  const testing::CommandResult no_url =
      testing::RunCommand({testing::BinaryPath("pagoda"), "bench", "--backend=openai"});
  EXPECT_EQ(no_url.exit_code, 2);
  EXPECT_THAT(no_url.err, HasSubstr("--backend=openai needs --base-url"));
  EXPECT_THAT(Bench("ftp://x", {}).err, HasSubstr("--base-url must be http://HOST:PORT"));
}

// --extra-request-body adds its fields to every request (SGLang's bench flag); it may not
// override what the bench sets, and must be a JSON object.
TEST(BenchOpenAiTest, AnExtraRequestBodyIsAddedToEveryRequest) {
  FakeOpenAiServer server(Behavior::kGood, kModel);
  const testing::CommandResult r =
      Bench(server.url(), {"--num-prompts=2", "--input-len=3", "--output-len=2",
                           R"(--extra-request-body={"logit_bias":{"3":-100},"top_k":4})"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(server.requests().size(), 2u);
  for (const Json& q : server.requests()) {
    EXPECT_EQ(q["logit_bias"], Json({{"3", -100}})) << q;
    EXPECT_EQ(q.value("top_k", 0), 4);
    EXPECT_EQ(q.value("max_tokens", 0), 2);
  }
  const testing::CommandResult own =
      Bench(server.url(), {"--num-prompts=1", R"(--extra-request-body={"max_tokens":9})"});
  EXPECT_EQ(own.exit_code, 2);
  EXPECT_THAT(own.err, HasSubstr("may not set \"max_tokens\": the bench sets it"));
  const testing::CommandResult array =
      Bench(server.url(), {"--num-prompts=1", "--extra-request-body=[1]"});
  EXPECT_EQ(array.exit_code, 2);
  EXPECT_THAT(array.err, HasSubstr("--extra-request-body must be a JSON object"));
  EXPECT_EQ(server.requests().size(), 2u) << "nothing sent for a refused flag";
}

}  // namespace
}  // namespace pagoda
