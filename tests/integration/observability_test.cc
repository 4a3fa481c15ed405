// What operators see: Prometheus /metrics during and after a load, and `pagoda bench`.
#include <atomic>
#include <cmath>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/process/http_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/serving_fixture.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

// The value of `series` as written without the router's constant model_name label
// ("pagoda_kv_cache_usage{worker=\"0\"}"); NaN if absent.
double Metric(std::string text, const std::string& series) {
  text = absl::StrReplaceAll(
      text, {{"{model_name=\"stories260K\"}", ""}, {"{model_name=\"stories260K\",", "{"}});
  for (size_t at = 0; (at = text.find(series + " ", at)) != std::string::npos; ++at) {
    if (at == 0 || text[at - 1] == '\n') return std::stod(text.substr(at + series.size() + 1));
  }
  return NAN;
}

TEST_F(ServingTest, MetricsMoveDuringALoadAndSettleAfterIt) {
  StartWorker();
  StartWorker();
  WaitForWorkers(2);
  std::atomic<int> finished{0};
  std::vector<testing::StreamOutput> outputs(16);
  std::vector<std::thread> clients;
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      // To the end of the context, so the load lasts ~500 steps.
      v1::GenerateRequest request = Greedy(golden_[i % golden_.size()].prompt);
      request.set_ignore_eos(true);
      outputs[i] = Generate(request);
      ++finished;
    });
  }
  // /metrics is read until a snapshot shows the load in flight, so the test does not depend on
  // which of the clients, the engine or this thread the scheduler runs first.
  std::string during;
  testing::WaitUntil(
      [&] {
        during = HttpGet("127.0.0.1", metrics_port_, "/metrics").body;
        const bool in_flight = Metric(during, "pagoda_num_requests_running") >= 1 &&
                               Metric(during, "pagoda_kv_cache_usage{worker=\"0\"}") +
                                       Metric(during, "pagoda_kv_cache_usage{worker=\"1\"}") >
                                   0;
        return in_flight || finished.load() == 16;  // the checks below tell which
      },
      std::chrono::seconds(120), "a /metrics snapshot shows the load in flight, or the load ends");
  for (auto& t : clients) t.join();
  for (const char* name :
       {"pagoda_num_requests_running", "pagoda_num_requests_waiting", "pagoda_kv_cache_usage",
        "pagoda_prefix_cache_queries_total", "pagoda_prefix_cache_hits_total",
        "pagoda_num_preemptions_total", "pagoda_prompt_tokens_total",
        "pagoda_generation_tokens_total", "pagoda_time_to_first_token_seconds",
        "pagoda_inter_token_latency_seconds", "pagoda_e2e_request_latency_seconds",
        "pagoda_request_queue_time_seconds", "pagoda_worker_step_seconds"}) {
    EXPECT_THAT(during, HasSubstr(absl::StrCat("# TYPE ", name, " "))) << name;
  }
  EXPECT_GE(Metric(during, "pagoda_num_requests_running"), 1);
  EXPECT_GT(Metric(during, "pagoda_generation_tokens_total"), 0);
  EXPECT_GT(Metric(during, "pagoda_kv_cache_usage{worker=\"0\"}") +
                Metric(during, "pagoda_kv_cache_usage{worker=\"1\"}"),
            0);

  int tokens = 0, prompt_tokens = 0;
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(outputs[i].status.ok());
    tokens += static_cast<int>(outputs[i].ids[0].size());
    prompt_tokens += static_cast<int>(golden_[i % golden_.size()].prompt_ids.size());
  }
  WaitForNoUsedBlocks();
  const std::string after = HttpGet("127.0.0.1", metrics_port_, "/metrics").body;
  EXPECT_EQ(Metric(after, "pagoda_generation_tokens_total"), tokens);
  EXPECT_EQ(Metric(after, "pagoda_prompt_tokens_total"), prompt_tokens);
  EXPECT_EQ(Metric(after, "pagoda_time_to_first_token_seconds_count"), 16);
  EXPECT_EQ(Metric(after, "pagoda_e2e_request_latency_seconds_count"), 16);
  EXPECT_EQ(Metric(after, "pagoda_request_queue_time_seconds_count"), 16);
  EXPECT_EQ(Metric(after, "pagoda_inter_token_latency_seconds_count"), tokens - 16);
  EXPECT_EQ(Metric(after, "pagoda_prefix_cache_queries_total"), prompt_tokens);
  EXPECT_EQ(Metric(after, "pagoda_num_requests_running"), 0);
  EXPECT_EQ(Metric(after, "pagoda_kv_cache_usage{worker=\"0\"}"), 0);
  EXPECT_EQ(Metric(after, "pagoda_kv_cache_usage{worker=\"1\"}"), 0);
  EXPECT_GT(Metric(after, "pagoda_worker_step_seconds_count{worker=\"0\"}") +
                Metric(after, "pagoda_worker_step_seconds_count{worker=\"1\"}"),
            0);
}

TEST_F(ServingTest, EverySeriesNamesTheModelAndFinishedRequestsAreCountedByReason) {
  WaitForWorkers(0);
  EXPECT_EQ(HttpGet("127.0.0.1", metrics_port_, "/health").status, 503) << "no worker yet";
  StartWorker();
  WaitForWorkers(1);
  const HttpResult health = HttpGet("127.0.0.1", metrics_port_, "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(Info().model_name(), "stories260K");  // --served-model-name's default

  v1::GenerateRequest length = Greedy(golden_[0].prompt);
  length.set_max_tokens(3);
  ASSERT_TRUE(Generate(length).status.ok());
  v1::GenerateRequest stop = Greedy(golden_[0].prompt);
  stop.add_stop("little girl");
  ASSERT_TRUE(Generate(stop).status.ok());
  WaitForNoUsedBlocks();

  const std::string text = HttpGet("127.0.0.1", metrics_port_, "/metrics").body;
  int series = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    EXPECT_TRUE(absl::StrContains(line, "{model_name=\"stories260K\"")) << line;
    ++series;
  }
  EXPECT_GT(series, 20);
  EXPECT_EQ(Metric(text, "pagoda_request_success_total{finished_reason=\"length\"}"), 1);
  EXPECT_EQ(Metric(text, "pagoda_request_success_total{finished_reason=\"stop\"}"), 1);
  EXPECT_EQ(Metric(text, "pagoda_request_success_total{finished_reason=\"abort\"}"), 0);
  EXPECT_THAT(text, HasSubstr("pagoda_request_success_total{model_name=\"stories260K\","
                              "finished_reason=\"length\"} 1\n"));

  // A call the client cancels before it ends is an abort.
  v1::GenerateRequest slow = Greedy(golden_[0].prompt);
  slow.set_ignore_eos(true);
  Generate(slow, 2, [](grpc::ClientContext& ctx) { ctx.TryCancel(); });
  WaitForNoUsedBlocks();
  testing::WaitUntil(
      [&] {
        return Metric(HttpGet("127.0.0.1", metrics_port_, "/metrics").body,
                      "pagoda_request_success_total{finished_reason=\"abort\"}") >= 1;
      },
      std::chrono::seconds(30), "the cancelled call is counted as an abort",
      std::chrono::milliseconds(20));
  EXPECT_EQ(Metric(HttpGet("127.0.0.1", metrics_port_, "/metrics").body,
                   "pagoda_request_success_total{finished_reason=\"abort\"}"),
            1);
}

TEST_F(ServingTest, ServedModelNameNamesTheModelEverywhere) {
  Kill(router_);
  router_ = Spawn(
      {testing::BinaryPath("pagoda-router"), absl::StrCat("--port=", port_),
       absl::StrCat("--worker-port=", worker_port_), "--host=127.0.0.1",
       "--model=" + testing::Stories260KModel(), "--tokenizer=" + testing::Stories260KTokenizer(),
       "--served-model-name=tiny", absl::StrCat("--metrics-port=", metrics_port_),
       absl::StrCat("--http-port=", http_port_)},
      dir_ + "/router2.log");
  WaitForWorkers(0);
  EXPECT_EQ(Info().model_name(), "tiny");
  EXPECT_THAT(HttpGet("127.0.0.1", metrics_port_, "/metrics").body,
              HasSubstr("pagoda_num_workers{model_name=\"tiny\"} 0\n"));
}

// A number field of a flat JSON object; NaN if absent.
double JsonNumber(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\":");
  return at == std::string::npos ? NAN : std::stod(json.substr(at + key.size() + 3));
}

TEST_F(ServingTest, BenchReportsTheLoadItSent) {
  StartWorker();
  StartWorker();
  WaitForWorkers(2);
  const std::string server = absl::StrCat("--server=127.0.0.1:", port_);
  const std::string metrics = absl::StrCat("--metrics=127.0.0.1:", metrics_port_);
  const testing::CommandResult random =
      testing::RunCommand({testing::BinaryPath("pagoda"), "bench", server, metrics,
                           "--num-prompts=24", "--input-len=40", "--output-len=30",
                           "--range-ratio=0.5", "--request-rate=200", "--ignore-eos", "--json"});
  ASSERT_EQ(random.exit_code, 0) << random.err;
  for (const char* key :
       {"duration", "request_throughput", "input_throughput", "output_throughput",
        "total_token_throughput", "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms",
        "mean_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "p99_itl_ms", "mean_e2el_ms", "p99_e2el_ms",
        "prefix_cache_hit_rate", "peak_running", "mean_kv_cache_utilization"}) {
    EXPECT_FALSE(std::isnan(JsonNumber(random.out, key))) << key << " in " << random.out;
  }
  EXPECT_EQ(JsonNumber(random.out, "completed"), 24);
  EXPECT_EQ(JsonNumber(random.out, "failed"), 0);
  // --ignore-eos: every request ran to its max_tokens, drawn from [15, 45].
  const double output = JsonNumber(random.out, "total_output_tokens");
  EXPECT_GE(output, 24 * 15);
  EXPECT_LE(output, 24 * 45);
  EXPECT_GE(JsonNumber(random.out, "peak_running"), 1);
  EXPECT_LE(JsonNumber(random.out, "p90_ttft_ms"), JsonNumber(random.out, "p99_ttft_ms"));
  // What the router counted agrees with what the client saw.
  const std::string scrape = HttpGet("127.0.0.1", metrics_port_, "/metrics").body;
  EXPECT_EQ(Metric(scrape, "pagoda_generation_tokens_total"), output);

  // max_tokens 4x the output: the client ends each stream at its output length.
  const testing::CommandResult overstated = testing::RunCommand(
      {testing::BinaryPath("pagoda"), "bench", server, "--num-prompts=8", "--input-len=20",
       "--output-len=20", "--max-tokens-ratio=4", "--ignore-eos", "--json"});
  ASSERT_EQ(overstated.exit_code, 0) << overstated.err;
  EXPECT_EQ(JsonNumber(overstated.out, "completed"), 8);
  EXPECT_EQ(JsonNumber(overstated.out, "total_output_tokens"), 8 * 20);
  WaitForNoUsedBlocks();

  // Chat: every turn resends the history, so most prompt tokens are cache hits.
  const testing::CommandResult chat =
      testing::RunCommand({testing::BinaryPath("pagoda"), "bench", server, "--dataset=chat",
                           "--num-prompts=12", "--turns=3", "--system-prompt-len=96",
                           "--input-len=16", "--output-len=16", "--max-concurrency=4", "--json"});
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  EXPECT_EQ(JsonNumber(chat.out, "completed"), 12);
  EXPECT_GT(JsonNumber(chat.out, "prefix_cache_hit_rate"), 0.5) << chat.out;

  // A /metrics that never answers: the router's figures are unknown, not zero.
  const testing::CommandResult unsampled =
      testing::RunCommand({testing::BinaryPath("pagoda"), "bench", server,
                           absl::StrCat("--metrics=127.0.0.1:", FreePort()), "--num-prompts=2",
                           "--input-len=8", "--output-len=4"});
  ASSERT_EQ(unsampled.exit_code, 0) << unsampled.err;
  EXPECT_THAT(unsampled.out, ::testing::ContainsRegex("Peak running sequences: +n/a\n"));
  EXPECT_THAT(unsampled.out, ::testing::ContainsRegex("Mean KV cache usage \\(busy\\): +n/a\n"));
  EXPECT_THAT(unsampled.err, HasSubstr("no metrics could be read"));

  // Bad input: clear errors, exit code 2.
  const testing::CommandResult too_long =
      testing::RunCommand({testing::BinaryPath("pagoda"), "bench", server, "--input-len=300"});
  EXPECT_EQ(too_long.exit_code, 2);
  EXPECT_THAT(too_long.err, HasSubstr("model length is 257"));
  const testing::CommandResult nobody =
      testing::RunCommand({testing::BinaryPath("pagoda"), "bench",
                           absl::StrCat("--server=127.0.0.1:", FreePort()), "--timeout=1"});
  EXPECT_EQ(nobody.exit_code, 2);
  EXPECT_THAT(nobody.err, HasSubstr("error:"));
  WaitForNoUsedBlocks();
}

// The same workload through the router's HTTP port (`--backend=openai`, /v1/completions over
// SSE) and through gRPC: the client sees the same tokens, and the router counts them.
TEST_F(ServingTest, BenchOverTheOpenAiApiSendsWhatGrpcSends) {
  StartWorker();
  WaitForWorkers(1);
  ASSERT_TRUE(
      testing::WaitUntil([&] { return HttpGet("127.0.0.1", http_port_, "/health").status == 200; },
                         std::chrono::seconds(30), "the HTTP port's /health answers 200",
                         std::chrono::milliseconds(25)))
      << dir_;
  const std::vector<std::string> workload = {
      "--num-prompts=8",     "--input-len=20", "--output-len=10", "--ignore-eos",
      "--max-concurrency=4", "--seed=3",       "--json"};
  auto bench = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), {testing::BinaryPath("pagoda"), "bench"});
    argv.insert(argv.end(), workload.begin(), workload.end());
    return testing::RunCommand(argv);
  };
  const std::string base_url = absl::StrCat("--base-url=http://127.0.0.1:", http_port_);
  // No --vocab-size: /v1/models gives it (meta.n_vocab), as GetModelInfo does on gRPC.
  const testing::CommandResult grpc = bench({absl::StrCat("--server=127.0.0.1:", port_)});
  ASSERT_EQ(grpc.exit_code, 0) << grpc.err;
  const double before = Metric(HttpGet("127.0.0.1", metrics_port_, "/metrics").body,
                               "pagoda_generation_tokens_total");
  const testing::CommandResult http = bench({"--backend=openai", base_url});
  ASSERT_EQ(http.exit_code, 0) << http.err;
  EXPECT_THAT(http.out, HasSubstr("\"backend\":\"openai\""));
  for (const char* key : {"completed", "total_input_tokens", "total_output_tokens"}) {
    EXPECT_EQ(JsonNumber(http.out, key), JsonNumber(grpc.out, key)) << key << "\n" << http.out;
  }
  EXPECT_EQ(JsonNumber(http.out, "failed"), 0);
  EXPECT_EQ(JsonNumber(http.out, "total_output_tokens"), 8 * 10);
  EXPECT_EQ(Metric(HttpGet("127.0.0.1", metrics_port_, "/metrics").body,
                   "pagoda_generation_tokens_total") -
                before,
            8 * 10);
  // The same seed sent the same prompts: their full blocks (16 of 20 tokens) were cached, and
  // the hits come back in usage.prompt_tokens_details.cached_tokens.
  EXPECT_EQ(JsonNumber(http.out, "prefix_cache_hit_rate"), 0.8) << http.out;
  for (const char* key : {"median_ttft_ms", "p99_itl_ms", "mean_e2el_ms"}) {
    EXPECT_GT(JsonNumber(http.out, key), 0) << key;
  }
  // Chat through HTTP: the turns share the system prompt, so most of each prompt is cached.
  const testing::CommandResult chat = testing::RunCommand(
      {testing::BinaryPath("pagoda"), "bench", "--backend=openai", base_url, "--vocab-size=512",
       "--dataset=chat", "--num-prompts=6", "--turns=3", "--system-prompt-len=64", "--input-len=8",
       "--output-len=8", "--max-concurrency=2", "--json"});
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  EXPECT_EQ(JsonNumber(chat.out, "completed"), 6);
  EXPECT_GT(JsonNumber(chat.out, "prefix_cache_hit_rate"), 0.5) << chat.out;
  WaitForNoUsedBlocks();
}

}  // namespace
}  // namespace pagoda
