// Issue 39 item 1: one router, several models behind its endpoint. A real pagoda-router serves
// two models (`story`: the llama2.c stories260K, copied with its tokenizer beside it; `gguf`:
// llama.cpp's conversion of the same weights, its own file, vocabulary and 128-token context),
// each with its own workers, on loopback: a request's `model` picks one, a worker's file
// decides which it serves, and a request never reaches the other model's worker.
#include <httplib.h>

#include "nlohmann/json.hpp"
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

}  // namespace
}  // namespace pagoda
