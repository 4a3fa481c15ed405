// /v1/completions bodies read into GenerationRequests: every field where it lands, null as
// absent, and each bad field refused by name with OpenAI's code (chat's own: chat_request_test).
#include "router/api/openai/openai_request.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/api/openai/request_json.h"
#include "tests/router/api/openai/openai_context_fixture.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CompletionRequestTest : public testing::OpenAiContextTest {
 protected:
  absl::StatusOr<OpenAiCall> Parse(const OrderedJson& body) {
    return ParseCompletionRequest(body, context_);
  }
  // A prompt and `extra`.
  absl::StatusOr<OpenAiCall> ParseWith(const OrderedJson& extra) {
    return Parse(With({{"prompt", "Once upon a time"}}, extra));
  }
};

TEST_F(CompletionRequestTest, EveryFieldIsReadWhereTheCoreUsesIt) {
  const absl::StatusOr<OpenAiCall> call = Parse(Body(R"({
      "model": "stories", "user": "u1", "prompt": "Once upon a time",
      "temperature": 0.5, "top_p": 0.9, "top_k": 5, "min_p": 0.25,
      "presence_penalty": 1, "frequency_penalty": -1.5, "repetition_penalty": 1.25,
      "seed": 42, "n": 3, "max_tokens": 10, "min_tokens": 2,
      "stop": ["The", "end"], "stop_token_ids": [1, 2], "ignore_eos": true,
      "stream": true, "stream_options": {"include_usage": true},
      "logprobs": 3, "echo": true, "logit_bias": {"7": 5, "3": -1.5},
      "skip_special_tokens": false, "cache_salt": "tenant-7"})"));
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_FALSE(call->chat);
  EXPECT_EQ(call->requests.at(0).cache_salt, "tenant-7");
  EXPECT_EQ(call->model, "stories");
  ASSERT_EQ(call->requests.size(), 1u);
  const GenerationRequest& r = call->requests[0];
  EXPECT_EQ(r.prompt_ids, Encode("Once upon a time", /*add_special_tokens=*/true));
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 5);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.25f);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -1.5f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.25f);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(call->seed, 42u);
  EXPECT_EQ(r.sampling.min_tokens, 2);
  // Sorted by token id, as the sampler requires.
  ASSERT_EQ(r.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(r.sampling.logit_bias[0].token_id, 3);
  EXPECT_FLOAT_EQ(r.sampling.logit_bias[0].bias, -1.5f);
  EXPECT_EQ(r.sampling.logit_bias[1].token_id, 7);
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.max_tokens, 10);
  EXPECT_THAT(r.stop_token_ids, ElementsAre(1, 2));
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_THAT(call->stops, ElementsAre("The", "end"));
  EXPECT_TRUE(call->stream);
  EXPECT_TRUE(call->include_usage);
  EXPECT_TRUE(call->echo);
  EXPECT_THAT(call->prompt_texts, ElementsAre("Once upon a time"));
  // logprobs 3 with echo: three alternatives per output token and per prompt token.
  EXPECT_EQ(call->top_logprobs, 3);
  EXPECT_TRUE(call->echo_logprobs);
  EXPECT_EQ(r.sampling.logprobs, 3);
  EXPECT_EQ(r.sampling.prompt_logprobs, 3);
  EXPECT_EQ(r.constraint, nullptr);
  // The core takes what the reader built.
  EXPECT_TRUE(cluster_->Validate(r).ok()) << cluster_->Validate(r);
}

TEST_F(CompletionRequestTest, FieldsLeftOutTakeOpenAisDefaults) {
  const absl::StatusOr<OpenAiCall> call = Parse({{"prompt", "Once"}});
  ASSERT_TRUE(call.ok()) << call.status();
  const GenerationRequest& r = call->requests[0];
  EXPECT_EQ(r.max_tokens, 16);  // OpenAI's default for completions
  EXPECT_EQ(r.n, 1);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_EQ(r.sampling.logprobs, 0);
  EXPECT_EQ(r.sampling.prompt_logprobs, -1);
  EXPECT_TRUE(r.sampling.logit_bias.empty());
  EXPECT_TRUE(r.stop_token_ids.empty());
  EXPECT_FALSE(r.ignore_eos);
  EXPECT_EQ(call->model, "");
  EXPECT_TRUE(call->stops.empty());
  EXPECT_FALSE(call->stream);
  EXPECT_FALSE(call->include_usage);
  EXPECT_FALSE(call->echo);
  EXPECT_EQ(call->top_logprobs, -1);
  EXPECT_EQ(call->prompt_logprobs, -1);
  // An unset seed is drawn, and the call reports the one its request samples with.
  EXPECT_EQ(call->seed, r.sampling.seed);
}

TEST_F(CompletionRequestTest, NullIsAbsentForEveryOptionalField) {
  OrderedJson body = {{"prompt", "Once"}, {"seed", 9}};
  for (const char* field :
       {"model", "user", "temperature", "top_p", "top_k", "min_p", "presence_penalty",
        "frequency_penalty", "repetition_penalty", "n", "max_tokens", "min_tokens", "stop",
        "stop_token_ids", "ignore_eos", "stream", "stream_options", "logprobs", "echo",
        "logit_bias", "prompt_logprobs", "suffix", "response_format", "grammar", "guided_json",
        "guided_regex", "guided_choice", "guided_grammar", "guided_decoding_backend",
        "structural_tag", "json_schema", "skip_special_tokens",
        // Refused or unknown fields are absent too when null.
        "store", "best_of", "audio", "frobnicate"}) {
    body[field] = nullptr;
  }
  const absl::StatusOr<OpenAiCall> with_nulls = Parse(body);
  ASSERT_TRUE(with_nulls.ok()) << with_nulls.status();
  const absl::StatusOr<OpenAiCall> without = Parse({{"prompt", "Once"}, {"seed", 9}});
  ASSERT_TRUE(without.ok()) << without.status();
  const GenerationRequest& a = with_nulls->requests[0];
  const GenerationRequest& b = without->requests[0];
  EXPECT_EQ(a.prompt_ids, b.prompt_ids);
  EXPECT_EQ(a.max_tokens, b.max_tokens);
  EXPECT_EQ(a.n, b.n);
  EXPECT_EQ(a.sampling.temperature, b.sampling.temperature);
  EXPECT_EQ(a.sampling.seed, 9u);
  EXPECT_EQ(a.sampling.logprobs, b.sampling.logprobs);
  EXPECT_EQ(a.constraint, nullptr);
  EXPECT_EQ(with_nulls->stream, false);
  EXPECT_EQ(with_nulls->top_logprobs, -1);
}

TEST_F(CompletionRequestTest, EachPromptFormBecomesItsRequests) {
  const std::vector<int> ids = Encode("Once upon a time", true);
  // A list of ids is one prompt; a list of prompts (text or ids) is one request each.
  absl::StatusOr<OpenAiCall> call = Parse({{"prompt", ids}});
  ASSERT_TRUE(call.ok()) << call.status();
  ASSERT_EQ(call->requests.size(), 1u);
  EXPECT_EQ(call->requests[0].prompt_ids, ids);
  call = Parse({{"prompt", {OrderedJson("Once"), OrderedJson(ids)}}, {"n", 2}});
  ASSERT_TRUE(call.ok()) << call.status();
  ASSERT_EQ(call->requests.size(), 2u);
  EXPECT_EQ(call->requests[0].prompt_ids, Encode("Once", true));
  EXPECT_EQ(call->requests[1].prompt_ids, ids);
  EXPECT_EQ(call->requests[1].n, 2);
  // Compact id lists (the server's parse) read as the plain arrays do.
  RequestJsonLimits limits;
  limits.id_fields = {"prompt"};
  for (const std::string text : {R"({"prompt": [1, 2, 3]})", R"({"prompt": [[1, 2], [3]]})"}) {
    const absl::StatusOr<OrderedJson> compact = ParseRequestJson(text, limits);
    ASSERT_TRUE(compact.ok()) << compact.status();
    const absl::StatusOr<OpenAiCall> a = Parse(*compact);
    const absl::StatusOr<OpenAiCall> b = Parse(OrderedJson::parse(text));
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_EQ(a->requests.size(), b->requests.size()) << text;
    for (size_t i = 0; i < a->requests.size(); ++i) {
      EXPECT_EQ(a->requests[i].prompt_ids, b->requests[i].prompt_ids) << text;
    }
  }
  // echo with ids: the prompt's text is their decoding.
  call = Parse({{"prompt", ids}, {"echo", true}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_THAT(call->prompt_texts, ElementsAre(tokenizer_->Decode(ids)));
}

TEST_F(CompletionRequestTest, ABadPromptIsRefusedByName) {
  const OrderedJson too_long = std::vector<int>(kMaxModelLen, 1);
  const OrderedJson longest = std::vector<int>(kMaxModelLen - 1, 1);
  EXPECT_TRUE(Parse({{"prompt", longest}, {"max_tokens", 0}, {"prompt_logprobs", 0}}).ok());
  EXPECT_TRUE(Refused(Parse({{"max_tokens", 5}}).status(), "prompt", kMissingRequired));
  EXPECT_TRUE(Refused(Parse({{"prompt", nullptr}}).status(), "prompt", kMissingRequired));
  EXPECT_TRUE(Refused(Parse({{"prompt", too_long}}).status(), "prompt", kContextLengthExceeded));
  EXPECT_TRUE(Refused(Parse({{"prompt", std::string(kMaxModelLen * 64 + 1, 'a')}}).status(),
                      "prompt", kContextLengthExceeded));
  const std::vector<OrderedJson> bad = {
      "",                                          // empty text
      OrderedJson::array(),                        // no prompt at all
      5,                                           // not text
      {{"text", "x"}},                             // an object
      {1, -1},                                     // a negative id
      {1, 2147483648LL},                           // past int
      {1, 1.5},                                    // not an integer
      OrderedJson::array({OrderedJson::array()}),  // an empty prompt in a list
      {OrderedJson("a"), OrderedJson(5)},          // a list with a number after text
      std::vector<std::string>(kMaxPromptsPerCall + 1, "x"),
  };
  for (const OrderedJson& prompt : bad) {
    EXPECT_TRUE(Refused(Parse({{"prompt", prompt}}).status(), "prompt", kInvalidValue)) << prompt;
  }
  EXPECT_TRUE(Parse({{"prompt", std::vector<std::string>(kMaxPromptsPerCall, "x")}}).ok());
}

// Fields of the wrong type: invalid_type, or invalid_value where OpenAI says so.
TEST_F(CompletionRequestTest, AFieldOfTheWrongTypeIsRefusedByName) {
  struct Case {
    const char* field;
    OrderedJson value;
    const char* code;
  };
  const std::vector<Case> cases = {
      {"model", 5, kInvalidType},
      {"user", true, kInvalidType},
      {"cache_salt", 7, kInvalidType},
      {"cache_salt", "", kInvalidValue},
      {"cache_salt", std::string(kMaxCacheSaltBytes + 1, 's'), kInvalidValue},
      {"temperature", "hot", kInvalidType},
      {"top_p", OrderedJson::array(), kInvalidType},
      {"top_k", 2.5, kInvalidType},
      {"min_p", "0", kInvalidType},
      {"presence_penalty", false, kInvalidType},
      {"frequency_penalty", "1", kInvalidType},
      {"repetition_penalty", OrderedJson::object(), kInvalidType},
      {"seed", "42", kInvalidType},
      {"n", "2", kInvalidType},
      {"n", 1.5, kInvalidType},
      {"max_tokens", "10", kInvalidType},
      {"min_tokens", 1.5, kInvalidType},
      {"logprobs", true, kInvalidType},
      {"prompt_logprobs", "1", kInvalidType},
      {"echo", 1, kInvalidType},
      {"stream", "yes", kInvalidType},
      {"ignore_eos", "true", kInvalidType},
      {"skip_special_tokens", 0, kInvalidType},
      {"stream_options", 1, kInvalidType},
      {"logit_bias", "no", kInvalidType},
      {"logit_bias", {{"5", "up"}}, kInvalidType},
      {"logit_bias", {{"x", 1}}, kInvalidValue},
      {"logit_bias", {{"-3", 1}}, kInvalidValue},
      {"stop", 5, kInvalidValue},
      {"stop", {1, 2}, kInvalidValue},
      {"stop_token_ids", 3, kInvalidValue},
      {"stop_token_ids", {-1}, kInvalidValue},
      {"stop_token_ids", {"1"}, kInvalidValue},
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(Refused(ParseWith({{c.field, c.value}}).status(), c.field, c.code))
        << c.field << " = " << c.value;
  }
}

TEST_F(CompletionRequestTest, ANumberOutOfItsRangeIsRefusedByName) {
  struct Case {
    const char* field;
    OrderedJson value;
  };
  const std::vector<Case> cases = {
      {"temperature", -1},
      {"temperature", 1e7},
      {"top_p", 0},
      {"top_p", 1.5},
      {"top_p", -0.1},
      {"min_p", 2},
      {"min_p", -1},
      {"presence_penalty", 2.5},
      {"presence_penalty", -3},
      {"frequency_penalty", 3},
      {"repetition_penalty", 0},
      {"repetition_penalty", -1},
      {"top_k", -2},
      {"n", 0},
      {"n", -1},
      {"n", kMaxN + 1},
      {"n", 2147483647},
      {"n", 10'000'000},
      {"max_tokens", -1},
      {"logprobs", -1},
      {"logprobs", kMaxLogprobs + 1},
      {"logprobs", 2147483647},
      {"prompt_logprobs", -1},
      {"prompt_logprobs", 21},
      {"min_tokens", -1},
      {"min_tokens", 2147483648},
      {"max_tokens", 2147483648},
      {"n", 18446744073709551615ULL},
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(Refused(ParseWith({{c.field, c.value}}).status(), c.field, kInvalidValue))
        << c.field << " = " << c.value;
  }
  // The bounds themselves are served.
  for (const Case& c : std::vector<Case>{{"temperature", 0},
                                         {"top_p", 1},
                                         {"min_p", 1},
                                         {"presence_penalty", -2},
                                         {"frequency_penalty", 2},
                                         {"top_k", -1},
                                         {"top_k", 0},
                                         {"n", kMaxN},
                                         {"logprobs", kMaxLogprobs},
                                         {"logprobs", 0},
                                         {"prompt_logprobs", kMaxLogprobs},
                                         {"seed", -1}}) {
    EXPECT_TRUE(ParseWith({{c.field, c.value}}).ok()) << c.field << " = " << c.value;
  }
  // vLLM's top_k -1 turns it off.
  EXPECT_EQ(ParseWith({{"top_k", -1}})->requests[0].sampling.top_k, 0);
}

TEST_F(CompletionRequestTest, MaxTokensIsBoundedByTheModelLength) {
  EXPECT_EQ(ParseWith({{"max_tokens", kMaxModelLen - 1}})->requests[0].max_tokens,
            kMaxModelLen - 1);
  EXPECT_TRUE(Refused(ParseWith({{"max_tokens", kMaxModelLen}}).status(), "max_tokens",
                      kContextLengthExceeded));
  EXPECT_TRUE(
      Refused(ParseWith({{"max_tokens", 100000}}).status(), "max_tokens", kContextLengthExceeded));
  // 0 only asks for the prompt's log probabilities: with echo and logprobs, or prompt_logprobs.
  EXPECT_TRUE(Refused(ParseWith({{"max_tokens", 0}}).status(), "max_tokens", kInvalidValue));
  EXPECT_TRUE(Refused(ParseWith({{"max_tokens", 0}, {"echo", true}}).status(), "max_tokens",
                      kInvalidValue));
  absl::StatusOr<OpenAiCall> call = ParseWith({{"max_tokens", 0}, {"echo", true}, {"logprobs", 2}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->requests[0].max_tokens, 0);
  EXPECT_EQ(call->requests[0].sampling.prompt_logprobs, 2);
  call = ParseWith({{"max_tokens", 0}, {"prompt_logprobs", 1}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->requests[0].sampling.prompt_logprobs, 1);
  EXPECT_EQ(call->prompt_logprobs, 1);
  EXPECT_EQ(call->requests[0].sampling.logprobs, 0);
}

TEST_F(CompletionRequestTest, LogprobsAskForTheChosenTokenAtLeast) {
  absl::StatusOr<OpenAiCall> call = ParseWith({{"logprobs", 0}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->top_logprobs, 0);
  EXPECT_EQ(call->requests[0].sampling.logprobs, 1);
  EXPECT_FALSE(call->echo_logprobs);
  EXPECT_EQ(call->requests[0].sampling.prompt_logprobs, -1);
  call = ParseWith({{"logprobs", 5}, {"prompt_logprobs", 2}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->requests[0].sampling.logprobs, 5);
  EXPECT_EQ(call->requests[0].sampling.prompt_logprobs, 2);
}

TEST_F(CompletionRequestTest, StopIsAStringOrABoundedListOfStrings) {
  absl::StatusOr<OpenAiCall> call = ParseWith({{"stop", "\n"}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_THAT(call->stops, ElementsAre("\n"));
  const std::vector<std::string> most(kMaxStopStrings, "x");
  call = ParseWith({{"stop", most}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->stops, most);
  call = ParseWith({{"stop", std::string(kMaxStopStringBytes, 'x')}});
  EXPECT_TRUE(call.ok()) << call.status();
  for (const OrderedJson& stop :
       {OrderedJson(std::vector<std::string>(kMaxStopStrings + 1, "x")), OrderedJson(""),
        OrderedJson({"a", ""}), OrderedJson(std::string(kMaxStopStringBytes + 1, 'x')),
        OrderedJson({OrderedJson("a"), OrderedJson(nullptr)}), OrderedJson::object()}) {
    EXPECT_TRUE(Refused(ParseWith({{"stop", stop}}).status(), "stop", kInvalidValue)) << stop;
  }
  // Stop token ids: at most kMaxStopTokenIds.
  EXPECT_TRUE(ParseWith({{"stop_token_ids", std::vector<int>(kMaxStopTokenIds, 1)}}).ok());
  EXPECT_TRUE(
      Refused(ParseWith({{"stop_token_ids", std::vector<int>(kMaxStopTokenIds + 1, 1)}}).status(),
              "stop_token_ids", kInvalidValue));
}

TEST_F(CompletionRequestTest, StreamOptionsNeedAStreamAndTakeIncludeUsageOnly) {
  EXPECT_TRUE(Refused(ParseWith({{"stream_options", {{"include_usage", true}}}}).status(),
                      "stream_options", kInvalidValue));
  EXPECT_TRUE(
      Refused(ParseWith({{"stream", true}, {"stream_options", {{"continuous_usage_stats", true}}}})
                  .status(),
              "stream_options", kUnsupportedParameter));
  EXPECT_TRUE(Refused(
      ParseWith({{"stream", true}, {"stream_options", {{"include_usage", "yes"}}}}).status(),
      "include_usage", kInvalidType));
  const absl::StatusOr<OpenAiCall> call =
      ParseWith({{"stream", true}, {"stream_options", {{"other", nullptr}}}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_FALSE(call->include_usage);
}

TEST_F(CompletionRequestTest, AFieldItDoesNotServeIsRefusedByName) {
  for (const char* field :
       {"frobnicate", "messages", "tools", "max_completion_tokens", "top_logprobs", "store",
        "best_of", "functions", "audio", "service_tier", "chat_template", "metadata"}) {
    EXPECT_TRUE(Refused(ParseWith({{field, 1}}).status(), field, kUnsupportedParameter)) << field;
  }
  EXPECT_TRUE(Refused(ParseWith({{"suffix", "y"}}).status(), "suffix", kUnsupportedParameter));
  // A client's field name is quoted at most 64 printable bytes long.
  const std::string long_name(100, 'k');
  EXPECT_TRUE(
      Refused(ParseWith({{long_name, 1}}).status(), std::string(64, 'k'), kUnsupportedParameter));
  EXPECT_THAT(std::string(ParseWith({{"a\nb", 1}}).status().message()),
              ::testing::StartsWith("a?b: "));
  // The reason of a known field is in the message.
  EXPECT_THAT(std::string(ParseWith({{"best_of", 2}}).status().message()),
              HasSubstr("ask for n samples"));
}

TEST(InOpenAiFieldNamesTest, TheCoresNamesBecomeTheApis) {
  EXPECT_EQ(
      ErrorOf(InOpenAiFieldNames(absl::InvalidArgumentError("prompt_token_ids: empty"))).param,
      "prompt");
  EXPECT_EQ(ErrorOf(InOpenAiFieldNames(absl::InvalidArgumentError(
                        "prompt (200 tokens) + max_tokens (100) exceeds the model length")))
                .param,
            "max_tokens");
  // The tag of OpenAI's code survives the renaming; other statuses pass through.
  EXPECT_EQ(ErrorOf(InOpenAiFieldNames(BadField("n", "too many", kUnsupportedParameter))).code,
            kUnsupportedParameter);
  EXPECT_EQ(InOpenAiFieldNames(absl::UnavailableError("x")).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace pagoda
