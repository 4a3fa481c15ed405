// What the OpenAI request readers are unit-tested against: stories260K's config and tokenizer,
// a Cluster without workers (it only gives the limits: model length 257, n at most 16), a
// constraint compiler and a small chat template. No server, no sockets: each test calls a
// reader on a body and checks what it read, or the 400 it answers (ErrorOf's param and code).
#ifndef PAGODA_TESTS_ROUTER_API_OPENAI_OPENAI_CONTEXT_FIXTURE_H_
#define PAGODA_TESTS_ROUTER_API_OPENAI_OPENAI_CONTEXT_FIXTURE_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/model/llama2c_checkpoint.h"
#include "gtest/gtest.h"
#include "lib/grammar/grammar_matcher.h"
#include "lib/jinja/chat_template.h"
#include "lib/text/llama2c_tokenizer.h"
#include "router/api/constraint_compiler.h"
#include "router/api/openai/openai_error.h"
#include "router/api/openai/openai_request.h"
#include "router/core/cluster.h"
#include "router/core/constraint.h"
#include "tests/test_util.h"

namespace pagoda::testing {

// Each message as "<|role|>content<|end|>" (an assistant's tool calls as "call name(arguments)"),
// then the tools' names, the `greeting` variable when set, and the generation prompt.
inline constexpr char kChatTemplate[] =
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}call {{ c.function.name }}"
    "({{ c.function.arguments.city }}){% endfor %}{% endif %}<|end|>{% endfor %}"
    "{% if tools %}[tools:{% for t in tools %}{{ t.function.name }};{% endfor %}]{% endif %}"
    "{% if greeting is defined %}[{{ greeting }}]{% endif %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}";

class OpenAiContextTest : public ::testing::Test {
 protected:
  static constexpr int kMaxModelLen = 257;
  static constexpr int kMaxN = 16;

  void SetUp() override {
    auto weights = LoadLlama2cCheckpoint(Stories260KModel());
    ASSERT_TRUE(weights.ok()) << weights.status();
    config_ = weights->config;
    auto tokenizer = Llama2cTokenizer::Load(Stories260KTokenizer());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
    ClusterOptions options;
    options.engine.max_model_len = kMaxModelLen;
    options.engine.max_n = kMaxN;
    cluster_ = std::make_unique<Cluster>(config_, options);
    constraints_ = std::make_unique<ConstraintCompiler>(tokenizer_.get(), config_);
    auto chat_template = jinja::ChatTemplate::Create(kChatTemplate);
    ASSERT_TRUE(chat_template.ok()) << chat_template.status();
    chat_template_.emplace(*std::move(chat_template));
    context_.cluster = cluster_.get();
    context_.tokenizer = tokenizer_.get();
    context_.chat_template = &*chat_template_;
    context_.constraints = constraints_.get();
    context_.tool_format = ToolCallFormat::kHermes;
  }

  static OrderedJson Body(std::string_view text) { return OrderedJson::parse(text); }

  // `base` with the members of `extra` set over it.
  static OrderedJson With(OrderedJson base, const OrderedJson& extra) {
    for (const auto& [key, value] : extra.items()) base[key] = value;
    return base;
  }

  std::vector<int> Encode(std::string_view text, bool add_special_tokens) const {
    return tokenizer_->Encode(text, add_special_tokens);
  }

  // Whether `constraint`'s grammar takes the whole of `text`.
  static bool Accepts(const Constraint& constraint, std::string_view text) {
    GrammarMatcher matcher(constraint.grammar);
    return matcher.Accept(text) && matcher.IsComplete();
  }

  // Whether `status` is the 400 whose `param` and `code` are these (as the server reports it).
  static ::testing::AssertionResult Refused(const absl::Status& status, std::string_view param,
                                            std::string_view code) {
    if (status.ok()) return ::testing::AssertionFailure() << "accepted, not refused";
    const OpenAiError error = ErrorOf(status);
    if (error.http_status != 400 || error.param != param || error.code != code) {
      return ::testing::AssertionFailure()
             << "got " << error.http_status << " param \"" << error.param << "\" code \""
             << error.code << "\" (" << status << "); want 400 param \"" << param << "\" code \""
             << code << "\"";
    }
    return ::testing::AssertionSuccess();
  }

  ModelConfig config_;
  std::unique_ptr<Llama2cTokenizer> tokenizer_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<ConstraintCompiler> constraints_;
  std::optional<jinja::ChatTemplate> chat_template_;
  OpenAiContext context_;
};

}  // namespace pagoda::testing

#endif  // PAGODA_TESTS_ROUTER_API_OPENAI_OPENAI_CONTEXT_FIXTURE_H_
