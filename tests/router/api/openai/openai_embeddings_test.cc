// /v1/embeddings bodies read into embedding requests (one per input), each bad field refused by
// name; the response body in both encodings.
#include "router/api/openai/openai_embeddings.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/api/openai/request_json.h"
#include "tests/router/api/openai/openai_context_fixture.h"

namespace pagoda {
namespace {

class OpenAiEmbeddingsTest : public testing::OpenAiContextTest {
 protected:
  absl::StatusOr<EmbeddingCall> Parse(const OrderedJson& body, Pooling pooling = Pooling::kLast) {
    return ParseEmbeddingRequest(body, context_, pooling);
  }
};

TEST_F(OpenAiEmbeddingsTest, EachInputIsOneEmbeddingRequest) {
  absl::StatusOr<EmbeddingCall> call =
      Parse({{"model", "stories"}, {"input", "Once upon a time"}, {"user", "u"}}, Pooling::kMean);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->model, "stories");
  EXPECT_FALSE(call->base64);
  ASSERT_EQ(call->requests.size(), 1u);
  const GenerationRequest& r = call->requests[0];
  EXPECT_EQ(r.prompt_ids, Encode("Once upon a time", /*add_special_tokens=*/true));
  EXPECT_EQ(r.pooling, Pooling::kMean);
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_TRUE(cluster_->Validate(r).ok()) << cluster_->Validate(r);
  // A list of texts, token ids, a list of id lists: in order.
  const std::vector<int> ids = Encode("upon", true);
  call = Parse({{"input", {OrderedJson("Once"), OrderedJson(ids)}}});
  ASSERT_TRUE(call.ok()) << call.status();
  ASSERT_EQ(call->requests.size(), 2u);
  EXPECT_EQ(call->requests[0].prompt_ids, Encode("Once", true));
  EXPECT_EQ(call->requests[1].prompt_ids, ids);
  EXPECT_EQ(call->requests[1].pooling, Pooling::kLast);
  call = Parse({{"input", ids}});
  ASSERT_TRUE(call.ok()) << call.status();
  ASSERT_EQ(call->requests.size(), 1u);
  EXPECT_EQ(call->requests[0].prompt_ids, ids);
  // Compact id lists (the server's parse) read as plain arrays do.
  RequestJsonLimits limits;
  limits.id_fields = {"input"};
  const absl::StatusOr<OrderedJson> compact =
      ParseRequestJson(R"({"input": [[1, 2, 3], [4, 5]]})", limits);
  ASSERT_TRUE(compact.ok()) << compact.status();
  call = Parse(*compact);
  ASSERT_TRUE(call.ok()) << call.status();
  ASSERT_EQ(call->requests.size(), 2u);
  EXPECT_THAT(call->requests[0].prompt_ids, ::testing::ElementsAre(1, 2, 3));
  EXPECT_THAT(call->requests[1].prompt_ids, ::testing::ElementsAre(4, 5));
}

TEST_F(OpenAiEmbeddingsTest, OptionsAreReadAndNullIsAbsent) {
  absl::StatusOr<EmbeddingCall> call = Parse({{"input", "Once"},
                                              {"encoding_format", "base64"},
                                              {"dimensions", config_.dim},
                                              {"add_special_tokens", false}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_TRUE(call->base64);
  EXPECT_EQ(call->requests[0].prompt_ids, Encode("Once", /*add_special_tokens=*/false));
  EXPECT_FALSE(Parse({{"input", "Once"}, {"encoding_format", "float"}})->base64);
  call = Parse({{"input", "Once"},
                {"model", nullptr},
                {"user", nullptr},
                {"encoding_format", nullptr},
                {"dimensions", nullptr},
                {"add_special_tokens", nullptr}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->model, "");
  EXPECT_FALSE(call->base64);
  EXPECT_EQ(call->requests[0].prompt_ids, Encode("Once", true));
}

// As completions, chat and responses read it (openai_fields.h): a client that sends every
// field it knows, null for those it leaves to the server, is not refused for the ones this
// endpoint does not read.
TEST_F(OpenAiEmbeddingsTest, AnUnknownFieldSetToNullIsAbsent) {
  absl::StatusOr<EmbeddingCall> call =
      Parse({{"input", "Once"}, {"frobnicate", nullptr}, {"prompt", nullptr}});
  ASSERT_TRUE(call.ok()) << call.status();
  ASSERT_EQ(call->requests.size(), 1u);
  EXPECT_EQ(call->requests[0].prompt_ids, Encode("Once", /*add_special_tokens=*/true));
  EXPECT_TRUE(Refused(Parse({{"input", "Once"}, {"frobnicate", OrderedJson::array()}}).status(),
                      "frobnicate", kUnsupportedParameter));
}

TEST_F(OpenAiEmbeddingsTest, ABadFieldIsRefusedByName) {
  struct Case {
    const char* field;
    OrderedJson value;
    const char* code;
  };
  const std::vector<Case> cases = {
      {"model", 5, kInvalidType},
      {"user", 5, kInvalidType},
      {"encoding_format", "bits", kInvalidValue},
      {"encoding_format", 1, kInvalidValue},
      {"dimensions", config_.dim - 1, kUnsupportedParameter},
      {"dimensions", 2147483647, kUnsupportedParameter},
      {"dimensions", "64", kUnsupportedParameter},
      {"add_special_tokens", "no", kInvalidType},
      {"frobnicate", 1, kUnsupportedParameter},
      {"prompt", "Once", kUnsupportedParameter},
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(Refused(Parse({{"input", "Once"}, {c.field, c.value}}).status(), c.field, c.code))
        << c.field << " = " << c.value;
  }
}

TEST_F(OpenAiEmbeddingsTest, ABadInputIsRefusedAsInput) {
  EXPECT_TRUE(Refused(Parse(OrderedJson::object()).status(), "input", kMissingRequired));
  EXPECT_TRUE(Refused(Parse({{"input", nullptr}}).status(), "input", kMissingRequired));
  const int vocab = config_.vocab_size;
  const std::vector<OrderedJson> bad = {
      "",
      5,
      OrderedJson::array(),
      OrderedJson::object(),
      {1, -1},
      {1, vocab},
      {1, 2147483648LL},
      {1, 1.5},
      {OrderedJson("a"), OrderedJson("")},
      {OrderedJson("a"), OrderedJson(5)},
      OrderedJson::array({OrderedJson::array({1}), OrderedJson::array({vocab})}),
      std::vector<std::string>(kMaxEmbeddingInputs + 1, "x"),
  };
  for (const OrderedJson& input : bad) {
    EXPECT_TRUE(Refused(Parse({{"input", input}}).status(), "input", kInvalidValue))
        << input.dump().substr(0, 80);
  }
  EXPECT_TRUE(Parse({{"input", std::vector<std::string>(kMaxEmbeddingInputs, "x")}}).ok());
  EXPECT_TRUE(Parse({{"input", {0, vocab - 1}}}).ok());
  // Each input below the model length.
  EXPECT_TRUE(Parse({{"input", std::vector<int>(kMaxModelLen - 1, 1)}}).ok());
  EXPECT_TRUE(Refused(Parse({{"input", std::vector<int>(kMaxModelLen, 1)}}).status(), "input",
                      kContextLengthExceeded));
}

TEST_F(OpenAiEmbeddingsTest, TheResponseCarriesEachVectorAsFloatsOrBase64) {
  const std::vector<std::vector<float>> vectors = {{0.5f, -1.0f}, {0.25f, 2.0f}};
  EmbeddingCall call;
  OrderedJson body = OrderedJson::parse(EmbeddingResponseBody(call, vectors, 7, "stories"));
  EXPECT_EQ(body["object"], "list");
  EXPECT_EQ(body["model"], "stories");
  EXPECT_EQ(body["usage"], OrderedJson({{"prompt_tokens", 7}, {"total_tokens", 7}}));
  ASSERT_EQ(body["data"].size(), 2u);
  EXPECT_EQ(body["data"][1]["object"], "embedding");
  EXPECT_EQ(body["data"][1]["index"], 1);
  EXPECT_EQ(body["data"][1]["embedding"], OrderedJson({0.25, 2.0}));
  call.base64 = true;
  body = OrderedJson::parse(EmbeddingResponseBody(call, vectors, 7, "stories"));
  std::string bytes;
  ASSERT_TRUE(absl::Base64Unescape(body["data"][0]["embedding"].get<std::string>(), &bytes));
  ASSERT_EQ(bytes.size(), 2 * sizeof(float));
  float decoded[2];
  std::memcpy(decoded, bytes.data(), bytes.size());
  EXPECT_EQ(decoded[0], 0.5f);
  EXPECT_EQ(decoded[1], -1.0f);
}

TEST(ParsePoolingTest, LastOrMean) {
  EXPECT_EQ(*ParsePooling("last"), Pooling::kLast);
  EXPECT_EQ(*ParsePooling("mean"), Pooling::kMean);
  EXPECT_EQ(ParsePooling("max").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagoda
