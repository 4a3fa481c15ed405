// Issue 39 item 1: one router, several models behind its endpoint. A real pagoda-router serves
// two models (`story`: the llama2.c stories260K, copied with its tokenizer beside it; `gguf`:
// llama.cpp's conversion of the same weights, its own file, vocabulary and 128-token context),
// each with its own workers, on loopback: a request's `model` picks one, a worker's file
// decides which it serves, and a request never reaches the other model's worker.
#include <httplib.h>

#include <map>

#include "common/model/llama2c_checkpoint.h"
#include "common/model/random_weights.h"
#include "nlohmann/json.hpp"
#include "tests/common/model/lora_files.h"
#include "tests/common/model/model_runs.h"
#include "tests/integration/serving_fixture.h"

namespace pagoda {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

class MultiModelTest : public ServingTest {
 protected:
  std::vector<std::string> ModelFlags(const std::string&) const override {
    return {"--model=story=" + StoryPath(), "--model=gguf=" + GgufPath()};
  }

  // stories260K.bin with its tokenizer as tokenizer.bin beside it: with several models each
  // takes its tokenizer from its own files (--tokenizer names one model's).
  std::string StoryPath() const {
    const std::string dir = dir_ + "/story";
    if (!std::filesystem::exists(dir)) {
      std::filesystem::create_directories(dir);
      std::filesystem::copy_file(testing::Stories260KModel(), dir + "/stories260K.bin");
      std::filesystem::copy_file(testing::Stories260KTokenizer(), dir + "/tokenizer.bin");
    }
    return dir + "/stories260K.bin";
  }
  static std::string GgufPath() {
    return testing::SharedPath("models/stories260K-gguf/stories260K.gguf");
  }

  v1::ModelInfo InfoOf(const std::string& model) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::GetModelInfoRequest request;
    request.set_model(model);
    v1::ModelInfo info;
    EXPECT_TRUE(stub_->GetModelInfo(&ctx, request, &info).ok()) << model;
    return info;
  }
  void WaitForWorkersOf(const std::string& model, int n) {
    testing::WaitUntil([&] { return InfoOf(model).num_workers() == n; }, std::chrono::seconds(60),
                       absl::StrCat(model, " has ", n, " workers; see ", dir_),
                       std::chrono::milliseconds(50));
  }
  testing::StreamOutput GreedyOn(const std::string& model, const testing::GoldenCase& g,
                                 int max_tokens) {
    v1::GenerateRequest r = Greedy(g.prompt);
    r.set_model(model);
    r.set_max_tokens(max_tokens);
    return Generate(r);
  }
  httplib::Result Post(const std::string& path, const Json& body) {
    httplib::Client client("127.0.0.1", http_port_);
    client.set_read_timeout(60, 0);
    return client.Post(path.c_str(), body.dump(), "application/json");
  }
  // The value of `family`'s series labelled model_name="model" (and nothing else); -1 if absent.
  double MetricOf(const std::string& family, const std::string& model) {
    const std::string metrics = Metrics();
    const std::string series = absl::StrCat("\n", family, "{model_name=\"", model, "\"} ");
    const size_t at = metrics.find(series);
    if (at == std::string::npos) return -1;
    const size_t value = at + series.size();
    return std::stod(metrics.substr(value, metrics.find('\n', value) - value));
  }
};

TEST_F(MultiModelTest, EachModelIsServedByItsOwnWorkersAndARequestNamesIt) {
  StartWorker(StoryPath());
  WaitForWorkers(1);  // the default model (the first --model) has its worker: SERVING
  const testing::GoldenCase& g = golden_[0];

  // The other model has no worker: its requests are answered at once, never placed on the
  // first model's worker.
  testing::StreamOutput out = GreedyOn("gguf", g, 8);
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(out.status.error_message(), HasSubstr("`gguf` has no worker"));
  httplib::Result http = Post("/v1/completions", {{"model", "gguf"}, {"prompt", g.prompt}});
  ASSERT_TRUE(http);
  EXPECT_EQ(http->status, 503) << http->body;
  EXPECT_EQ(MetricOf("pagoda_generation_tokens_total", "story"), 0);

  // A name the router does not serve: NOT_FOUND / 404 model_not_found, naming what it serves.
  out = GreedyOn("llama-70b", g, 8);
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(out.status.error_message(), HasSubstr("this router serves `story`, `gguf`"));
  http = Post("/v1/completions", {{"model", "llama-70b"}, {"prompt", g.prompt}});
  ASSERT_TRUE(http);
  EXPECT_EQ(http->status, 404);
  const Json error = Json::parse(http->body, nullptr, false)["error"];
  EXPECT_EQ(error["code"], "model_not_found");
  EXPECT_EQ(error["param"], "model");

  // The second model's worker joins that model (its fingerprint decides), not the first.
  StartWorker(GgufPath());
  WaitForWorkersOf("gguf", 1);
  EXPECT_EQ(InfoOf("story").num_workers(), 1);

  // Each serves the golden tokens (the same weights; the GGUF's context cuts at 128): by gRPC
  // with `model`, the default for none, and by HTTP.
  const int gguf_tokens = 128 - static_cast<int>(g.prompt_ids.size());
  out = GreedyOn("gguf", g, gguf_tokens);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.ids[0], std::vector<int>(g.greedy_ids.begin(), g.greedy_ids.begin() + gguf_tokens));
  out = GreedyOn("", g, static_cast<int>(g.greedy_ids.size()));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.ids[0], g.greedy_ids);
  http = Post("/v1/completions",
              {{"model", "story"}, {"prompt", g.prompt}, {"max_tokens", 16}, {"temperature", 0}});
  ASSERT_TRUE(http);
  ASSERT_EQ(http->status, 200) << http->body;
  EXPECT_EQ(Json::parse(http->body)["model"], "story");

  // Each model's tokens are counted under its own name, and nowhere else.
  EXPECT_EQ(MetricOf("pagoda_generation_tokens_total", "gguf"), gguf_tokens);
  EXPECT_EQ(MetricOf("pagoda_generation_tokens_total", "story"), g.greedy_ids.size() + 16);
  const std::string metrics = Metrics();
  EXPECT_EQ(metrics.find("# TYPE pagoda_generation_tokens_total"),
            metrics.rfind("# TYPE pagoda_generation_tokens_total"))
      << "one family, written once, with a series per model";
}

TEST_F(MultiModelTest, EveryModelIsListedWithItsLength) {
  StartWorker(StoryPath());
  WaitForWorkers(1);
  grpc::ClientContext ctx;
  v1::ListModelsResponse listed;
  ASSERT_TRUE(stub_->ListModels(&ctx, v1::ListModelsRequest(), &listed).ok());
  ASSERT_EQ(listed.models_size(), 2);
  EXPECT_EQ(listed.models(0).model_name(), "story");  // the default first
  EXPECT_EQ(listed.models(0).context_length(), 512);
  EXPECT_EQ(listed.models(0).num_workers(), 1);
  EXPECT_EQ(listed.models(1).model_name(), "gguf");
  EXPECT_EQ(listed.models(1).context_length(), 128);
  EXPECT_EQ(listed.models(1).num_workers(), 0);
  EXPECT_NE(listed.models(0).model_fingerprint(), listed.models(1).model_fingerprint());

  const HttpResult models = HttpGet("127.0.0.1", http_port_, "/v1/models");
  ASSERT_EQ(models.status, 200);
  const Json data = Json::parse(models.body)["data"];
  ASSERT_EQ(data.size(), 2u);
  EXPECT_EQ(data[0]["id"], "story");
  EXPECT_EQ(data[0]["max_model_len"], 512);
  EXPECT_EQ(data[1]["id"], "gguf");
  EXPECT_EQ(data[1]["max_model_len"], 128);

  // Tokenize picks the model's tokenizer too; an unknown model is NOT_FOUND.
  grpc::ClientContext tokenize_ctx;
  v1::TokenizeRequest tokenize;
  tokenize.set_text("Once upon a time");
  tokenize.set_model("nope");
  v1::TokenizeResponse ids;
  EXPECT_EQ(stub_->Tokenize(&tokenize_ctx, tokenize, &ids).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// --spawn-workers=N starts N workers for each model, each dialling in with its own file.
class MultiModelSpawnTest : public MultiModelTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override {
    return {"--spawn-workers=1", "--worker-kv-cache-mb=8", "--worker-threads=1"};
  }
};

TEST_F(MultiModelSpawnTest, SpawnsWorkersForEachModel) {
  WaitForWorkersOf("story", 1);
  WaitForWorkersOf("gguf", 1);
  const testing::GoldenCase& g = golden_[1];
  const testing::StreamOutput out = GreedyOn("gguf", g, 16);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.ids[0], std::vector<int>(g.greedy_ids.begin(), g.greedy_ids.begin() + 16));
}

// Two models of different shapes on one router, one worker each (issue 39): stories260K's real
// weights and a random model of the stories110M shape (768 wide, 12 layers, Llama 2's 32,000
// tokens). Each serves its golden tokens: stories260K's are run.c's, the 110M's those of its
// file run in this process. Neither could come from the other's worker.
class TwoShapesTest : public MultiModelTest {
 protected:
  std::vector<std::string> ModelFlags(const std::string&) const override {
    return {"--model=story=" + StoryPath(), "--model=110m=" + BigPath()};
  }
  // A llama2.c checkpoint of the stories110M shape with Llama 2's tokenizer beside it, written
  // once. Its embedding is scaled down to its layers' outputs, as in lora_test.
  std::string BigPath() const {
    const std::string dir = dir_ + "/110m";
    if (!std::filesystem::exists(dir)) {
      std::filesystem::create_directories(dir);
      ModelConfig c;
      CHECK(NamedModelConfig("stories110M", &c));
      ModelWeights w = RandomModelWeights(c, 11);
      for (float& x : w.token_embedding) x *= 0.1f;
      const absl::Status written = WriteLlama2cCheckpoint(w, dir + "/stories110M.bin");
      CHECK(written.ok()) << written;
      std::filesystem::copy_file(testing::SharedPath("models/llama2-tokenizer/tokenizer.bin"),
                                 dir + "/tokenizer.bin");
    }
    return dir + "/stories110M.bin";
  }
};

TEST_F(TwoShapesTest, EachServesItsGoldenTokensFromItsOwnWorker) {
  StartWorker(StoryPath());
  StartWorker(BigPath(), {"--kv-cache-mb=32"});
  WaitForWorkersOf("story", 1);
  WaitForWorkersOf("110m", 1);
  EXPECT_EQ(InfoOf("110m").context_length(), 1024);

  const testing::GoldenCase& g = golden_[0];
  testing::StreamOutput out = GreedyOn("story", g, static_cast<int>(g.greedy_ids.size()));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.ids[0], g.greedy_ids);

  // "<s> Once upon a time" in Llama 2's vocabulary, as token ids, and its reference run.
  const std::vector<int> prompt = {1, 9038, 2501, 263, 931};
  constexpr int kTokens = 24;
  absl::StatusOr<ModelWeights> big = LoadLlama2cCheckpoint(BigPath());
  ASSERT_TRUE(big.ok()) << big.status();
  const std::vector<int> golden = testing::GreedyRun(*std::move(big), prompt, kTokens);
  ASSERT_EQ(golden.size(), static_cast<size_t>(kTokens));
  v1::GenerateRequest r;
  r.set_model("110m");
  r.mutable_prompt_token_ids()->Add(prompt.begin(), prompt.end());
  r.set_max_tokens(kTokens);
  r.set_ignore_eos(true);
  r.mutable_sampling()->set_temperature(0);
  out = Generate(r);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.ids[0], golden);
  EXPECT_GE(*std::max_element(golden.begin(), golden.end()), 512)
      << "a token stories260K's worker could not have sampled";

  // Each model's tokens are counted under its name only.
  EXPECT_EQ(MetricOf("pagoda_generation_tokens_total", "story"), g.greedy_ids.size());
  EXPECT_EQ(MetricOf("pagoda_generation_tokens_total", "110m"), kTokens);
}

// Issue 39 items 2-4 through the router: --lora-modules gives each model an adapter, spawned
// workers load it, and a request naming the adapter as its model runs it (vLLM's convention).
class LoraServingTest : public MultiModelTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override {
    return {"--spawn-workers=1", "--worker-kv-cache-mb=8", "--worker-threads=1",
            "--lora-modules=story:sql=" + AdapterDir("sql", 1),
            "--lora-modules=gguf:chat=" + AdapterDir("chat", 2)};
  }
  static ModelConfig Config() {
    absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
    CHECK(w.ok()) << w.status();
    return w->config;
  }
  static LoraAdapter Adapter(uint64_t seed) {
    return testing::RandomLoraAdapter(Config(), /*rank=*/8, /*alpha=*/16, seed,
                                      /*strength=*/3.0);
  }
  // A PEFT directory of Adapter(seed) under dir_/loras, written once.
  std::string AdapterDir(const std::string& name, uint64_t seed) const {
    const std::string dir = dir_ + "/loras/" + name;
    if (!std::filesystem::exists(dir)) {
      testing::WritePeftLora(Adapter(seed), Config(), 16, dir);
    }
    return dir;
  }
};

TEST_F(LoraServingTest, ARequestNamingAnAdapterRunsItsModelUnderIt) {
  WaitForWorkersOf("story", 1);
  WaitForWorkersOf("gguf", 1);
  const testing::GoldenCase& g = golden_[0];
  constexpr int kTokens = 24;

  // The adapter's tokens are those of its model's weights merged with it (W + scale·B·A).
  auto weights = LoadLlama2cCheckpoint(testing::Stories260KModel());
  ASSERT_TRUE(weights.ok()) << weights.status();
  std::vector<int> merged =
      testing::GreedyRun(testing::MergeLora(*weights, Adapter(1)), g.prompt_ids);
  merged.resize(kTokens);
  const testing::StreamOutput sql = GreedyOn("sql", g, kTokens);
  ASSERT_TRUE(sql.status.ok()) << sql.status.error_message();
  EXPECT_EQ(sql.ids[0], merged);
  const testing::StreamOutput base = GreedyOn("story", g, kTokens);
  ASSERT_TRUE(base.status.ok()) << base.status.error_message();
  EXPECT_EQ(base.ids[0], std::vector<int>(g.greedy_ids.begin(), g.greedy_ids.begin() + kTokens));
  const testing::StreamOutput chat = GreedyOn("chat", g, kTokens);
  ASSERT_TRUE(chat.status.ok()) << chat.status.error_message();
  EXPECT_NE(chat.ids[0], GreedyOn("gguf", g, kTokens).ids[0]);

  // Over HTTP: the answer names the adapter; an unknown name is 404 listing what is served.
  httplib::Result r =
      Post("/v1/completions",
           {{"model", "sql"}, {"prompt", g.prompt}, {"max_tokens", 4}, {"temperature", 0}});
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Json::parse(r->body)["model"], "sql");
  r = Post("/v1/completions", {{"model", "nope"}, {"prompt", "x"}, {"max_tokens", 1}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_THAT(r->body, HasSubstr("`sql`"));

  // vLLM's LoRA gauge, per model (nothing runs now).
  EXPECT_THAT(Metrics(), HasSubstr("vllm:lora_requests_info{model_name=\"story\",max_lora=\"4\","
                                   "running_lora_adapters=\"\",waiting_lora_adapters=\"\"} "));

  // Listed with their base models as parents, over HTTP and gRPC.
  httplib::Client client("127.0.0.1", http_port_);
  httplib::Result models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  const Json listing = Json::parse(models->body);
  std::map<std::string, Json> by_id;
  for (const Json& m : listing["data"]) by_id[m["id"]] = m;
  ASSERT_EQ(by_id.size(), 4u) << models->body;
  EXPECT_EQ(by_id["sql"]["parent"], "story");
  EXPECT_EQ(by_id["chat"]["parent"], "gguf");
  EXPECT_TRUE(by_id["story"]["parent"].is_null());
  grpc::ClientContext ctx;
  v1::ListModelsResponse listed;
  ASSERT_TRUE(stub_->ListModels(&ctx, v1::ListModelsRequest(), &listed).ok());
  std::map<std::string, std::string> parents;
  for (const v1::ModelInfo& m : listed.models()) parents[m.model_name()] = m.parent();
  EXPECT_EQ(parents, (std::map<std::string, std::string>{
                         {"story", ""}, {"sql", "story"}, {"gguf", ""}, {"chat", "gguf"}}));
}

TEST_F(LoraServingTest, LoadingAtRunTimeIsOffWithoutItsFlag) {
  const httplib::Result r =
      Post("/v1/load_lora_adapter", {{"lora_name", "x"}, {"lora_path", AdapterDir("x", 3)}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_THAT(r->body, HasSubstr("--allow-runtime-lora-updating"));
}

// vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter, with --allow-runtime-lora-updating.
class LoraLoadingTest : public LoraServingTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override {
    std::vector<std::string> flags = LoraServingTest::ExtraRouterFlags();
    flags.push_back("--allow-runtime-lora-updating");
    flags.push_back("--lora-dir=" + dir_ + "/loras");
    return flags;
  }
  int Status(const std::string& path, const Json& body, const std::string& says = "") {
    const httplib::Result r = Post(path, body);
    EXPECT_TRUE(r) << path;
    if (!r) return -1;
    EXPECT_THAT(r->body, HasSubstr(says)) << path << " " << body.dump();
    return r->status;
  }
};

TEST_F(LoraLoadingTest, AnAdapterLoadedAtRunTimeServesUntilItIsUnloaded) {
  WaitForWorkersOf("story", 1);
  WaitForWorkersOf("gguf", 1);
  const testing::GoldenCase& g = golden_[2];
  const std::string path = AdapterDir("fresh", 3);
  const std::string load = "/v1/load_lora_adapter", unload = "/v1/unload_lora_adapter";
  EXPECT_EQ(Status(load, {{"lora_name", "fresh"}, {"lora_path", path}}, "fits story and gguf"),
            400);
  EXPECT_EQ(Status(load, {{"lora_name", "story:fresh"}, {"lora_path", "/etc/passwd"}}), 400);
  EXPECT_EQ(Status(load, {{"lora_name", "fresh"}, {"load_inplace", true}}, "load_inplace"), 400);
  EXPECT_EQ(Status(load, {{"lora_name", "story:fresh"}, {"lora_path", path}}, "Success"), 200);
  EXPECT_NE(Status(load, {{"lora_name", "fresh"}, {"lora_path", path}}, "already"), 200);

  auto weights = LoadLlama2cCheckpoint(testing::Stories260KModel());
  ASSERT_TRUE(weights.ok()) << weights.status();
  std::vector<int> merged =
      testing::GreedyRun(testing::MergeLora(*weights, Adapter(3)), g.prompt_ids);
  merged.resize(16);
  const testing::StreamOutput fresh = GreedyOn("fresh", g, 16);
  ASSERT_TRUE(fresh.status.ok()) << fresh.status.error_message();
  EXPECT_EQ(fresh.ids[0], merged);
  httplib::Client client("127.0.0.1", http_port_);
  httplib::Result models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_THAT(models->body, HasSubstr(R"("id":"fresh","object":"model")"));

  EXPECT_EQ(Status(unload, {{"lora_name", "fresh"}}, "Success"), 200);
  EXPECT_EQ(Status("/v1/completions", {{"model", "fresh"}, {"prompt", "x"}, {"max_tokens", 1}}),
            404);
  EXPECT_EQ(Status(unload, {{"lora_name", "fresh"}}, "cannot be found"), 404);
  // An adapter given at start unloads too.
  EXPECT_EQ(Status(unload, {{"lora_name", "sql"}}, "Success"), 200);
  EXPECT_EQ(GreedyOn("sql", g, 4).status.error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace pagoda
