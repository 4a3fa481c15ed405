// What a client sees does not depend on how many tokens a step delivers: a speculative step
// brings several at once, and the text, the tokens sent, the usage and the finish reason are
// those of one token per step, stop strings and stop tokens included.
#include "router/api/request_output.h"

#include "gtest/gtest.h"
#include "lib/text/llama2c_tokenizer.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

struct Seen {
  std::string text;
  std::vector<int> token_ids;
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
  int completion_tokens = 0;
  bool operator==(const Seen&) const = default;
};

class RequestOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Llama2cTokenizer::Load(testing::Stories260KTokenizer());
    ASSERT_TRUE(t.ok());
    tok_ = *std::move(t);
  }
  // Delivers `ids` in updates of `per_update` tokens; the last update finishes with `reason`
  // (as the scheduler ends a sequence on a stop token or a length limit) unless the output
  // stopped first.
  Seen Run(const std::vector<int>& ids, int per_update, const std::vector<std::string>& stops,
           FinishReason reason) {
    RequestOutput out(tok_.get(), {1}, 1, stops, nullptr);
    Seen seen;
    for (size_t i = 0; i < ids.size() && !seen.finished; i += per_update) {
      RequestUpdate u;
      const size_t end = std::min(ids.size(), i + per_update);
      u.token_ids.assign(ids.begin() + i, ids.begin() + end);
      u.finished = end == ids.size();
      u.finish_reason = u.finished ? reason : FinishReason::kNone;
      u.num_output_tokens = static_cast<int>(end);
      const RequestOutput::Result r = out.Add(u);
      seen.text += r.chunk.text;
      seen.token_ids.insert(seen.token_ids.end(), r.chunk.token_ids.begin(),
                            r.chunk.token_ids.end());
      if (r.chunk.finished) {
        seen.finished = true;
        seen.reason = r.chunk.finish_reason;
        seen.completion_tokens = r.chunk.completion_tokens;
      }
    }
    return seen;
  }
  std::unique_ptr<Llama2cTokenizer> tok_;
};

TEST_F(RequestOutputTest, SeveralTokensPerStepLookLikeOneAtATime) {
  std::vector<int> story = tok_->Encode("Once upon a time, there was a little dog. The dog ran.");
  std::vector<int> with_stop_token = story;
  with_stop_token.push_back(2);  // EOS: finished kStop, the last token is not text
  for (const auto& [stops, ids, reason] :
       std::vector<std::tuple<std::vector<std::string>, std::vector<int>, FinishReason>>{
           {{}, story, FinishReason::kLength},
           {{"little"}, story, FinishReason::kLength},  // a stop string inside a step's tokens
           {{"pon a"}, story, FinishReason::kLength},   // one split across tokens
           {{}, with_stop_token, FinishReason::kStop},
           {{"ran."}, with_stop_token, FinishReason::kStop}}) {
    const Seen one = Run(ids, 1, stops, reason);
    ASSERT_TRUE(one.finished);
    for (int per_update : {2, 3, 6}) {
      EXPECT_EQ(Run(ids, per_update, stops, reason), one)
          << per_update << " a step, stops " << (stops.empty() ? "" : stops[0]);
    }
  }
}

}  // namespace
}  // namespace pagoda
