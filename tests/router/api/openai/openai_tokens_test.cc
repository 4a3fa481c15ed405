// /tokenize and /detokenize bodies answered without a server: a prompt or chat messages to
// token ids, ids back to text, each bad field refused by name.
#include "router/api/openai/openai_tokens.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "router/api/openai/request_json.h"
#include "tests/router/api/openai/openai_context_fixture.h"

namespace pagoda {
namespace {

class OpenAiTokensTest : public testing::OpenAiContextTest {};

TEST_F(OpenAiTokensTest, APromptIsTokenizedWithSpecialTokensUnlessAskedNot) {
  absl::StatusOr<OrderedJson> reply = TokenizeReply({{"prompt", "Once upon"}}, context_);
  ASSERT_TRUE(reply.ok()) << reply.status();
  const std::vector<int> ids = Encode("Once upon", /*add_special_tokens=*/true);
  EXPECT_EQ(*reply,
            (OrderedJson{{"count", ids.size()}, {"max_model_len", kMaxModelLen}, {"tokens", ids}}));
  reply = TokenizeReply({{"prompt", "Once upon"}, {"add_special_tokens", false}}, context_);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ((*reply)["tokens"], OrderedJson(Encode("Once upon", false)));
}

TEST_F(OpenAiTokensTest, MessagesAreRenderedAsChatRendersThem) {
  const absl::StatusOr<OrderedJson> reply =
      TokenizeReply({{"messages", {{{"role", "user"}, {"content", "Hi"}}}}}, context_);
  ASSERT_TRUE(reply.ok()) << reply.status();
  // The template wrote its own special tokens: none are added.
  EXPECT_EQ((*reply)["tokens"],
            OrderedJson(Encode("<|user|>Hi<|end|><|assistant|>", /*add_special_tokens=*/false)));
}

TEST_F(OpenAiTokensTest, NullFieldsReadAsAbsent) {
  absl::StatusOr<OrderedJson> plain = TokenizeReply({{"prompt", "Once upon"}}, context_);
  ASSERT_TRUE(plain.ok()) << plain.status();
  absl::StatusOr<OrderedJson> nulls = TokenizeReply(
      {{"prompt", "Once upon"}, {"messages", nullptr}, {"add_special_tokens", nullptr}}, context_);
  ASSERT_TRUE(nulls.ok()) << nulls.status();
  EXPECT_EQ(*nulls, *plain);
  EXPECT_TRUE(
      Refused(TokenizeReply({{"prompt", nullptr}}, context_).status(), "prompt", kInvalidValue));
}

TEST_F(OpenAiTokensTest, ABadTokenizeBodyIsRefusedByName) {
  EXPECT_TRUE(
      Refused(TokenizeReply(OrderedJson::object(), context_).status(), "prompt", kInvalidValue));
  EXPECT_TRUE(Refused(TokenizeReply({{"prompt", 5}}, context_).status(), "prompt", kInvalidValue));
  EXPECT_TRUE(
      Refused(TokenizeReply({{"prompt", "x"}, {"add_special_tokens", "no"}}, context_).status(),
              "add_special_tokens", kInvalidType));
  EXPECT_TRUE(
      Refused(TokenizeReply({{"messages", "Hi"}}, context_).status(), "messages", kInvalidValue));
  // More bytes than the model length could ever cover: refused before it is tokenized.
  EXPECT_TRUE(Refused(TokenizeReply({{"prompt", std::string(64 << 10, 'a')}}, context_).status(),
                      "prompt", kContextLengthExceeded));
}

TEST_F(OpenAiTokensTest, TokensAreDetokenizedFromEitherListForm) {
  const std::vector<int> ids = Encode("Once upon a time", /*add_special_tokens=*/false);
  absl::StatusOr<OrderedJson> reply = DetokenizeReply({{"tokens", ids}}, context_);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(*reply, (OrderedJson{{"prompt", tokenizer_->Decode(ids)}}));
  RequestJsonLimits limits;
  limits.id_fields = {"tokens"};
  const absl::StatusOr<OrderedJson> compact =
      ParseRequestJson(OrderedJson{{"tokens", ids}}.dump(), limits);
  ASSERT_TRUE(compact.ok()) << compact.status();
  ASSERT_TRUE(IsIdList((*compact)["tokens"]));
  reply = DetokenizeReply(*compact, context_);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(*reply, (OrderedJson{{"prompt", tokenizer_->Decode(ids)}}));
  EXPECT_TRUE(DetokenizeReply({{"tokens", OrderedJson::array()}}, context_).ok());
}

TEST_F(OpenAiTokensTest, TokensOutsideTheVocabularyOrModelLengthAreRefused) {
  const int vocab = tokenizer_->vocab_size();
  const std::vector<OrderedJson> bad = {
      OrderedJson(nullptr),  // what "absent" reads as
      "1 2 3",
      {1, -1},
      {1, vocab},
      {1, 2.5},
      {1, "2"},
      OrderedJson(std::vector<int>(kMaxModelLen + 1, 1)),
  };
  for (const OrderedJson& tokens : bad) {
    EXPECT_TRUE(
        Refused(DetokenizeReply({{"tokens", tokens}}, context_).status(), "tokens", kInvalidValue))
        << tokens;
  }
  EXPECT_TRUE(
      Refused(DetokenizeReply(OrderedJson::object(), context_).status(), "tokens", kInvalidValue));
  // Compact lists are bounded the same way.
  RequestJsonLimits limits;
  limits.id_fields = {"tokens"};
  for (const std::string& body :
       {absl::StrCat(R"({"tokens": [1, )", vocab, "]}"),
        OrderedJson{{"tokens", std::vector<int>(kMaxModelLen + 1, 1)}}.dump()}) {
    const absl::StatusOr<OrderedJson> compact = ParseRequestJson(body, limits);
    ASSERT_TRUE(compact.ok()) << compact.status();
    EXPECT_TRUE(Refused(DetokenizeReply(*compact, context_).status(), "tokens", kInvalidValue));
  }
}

}  // namespace
}  // namespace pagoda
