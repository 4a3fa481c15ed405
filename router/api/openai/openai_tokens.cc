#include "router/api/openai/openai_tokens.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "router/api/openai/chat_prompt.h"
#include "router/api/openai/openai_error.h"
#include "router/api/openai/request_json.h"
#include "router/api/request_policy.h"

namespace pagoda {

absl::StatusOr<OrderedJson> TokenizeReply(const OrderedJson& body, const OpenAiContext& context) {
  // Fields are read through JsonMember: a null one is absent (openai_fields.h).
  const int max_model_len = context.cluster->max_model_len();
  std::string text;
  bool add_special_tokens = true;
  if (JsonMember(body, "messages") != nullptr) {
    ASSIGN_OR_RETURN(text, RenderChat(body, context));
    add_special_tokens = false;
  } else if (const OrderedJson* prompt = JsonMember(body, "prompt");
             prompt != nullptr && prompt->is_string()) {
    text = prompt->get<std::string>();
  } else {
    return BadField("prompt", "must be a string (or send messages)");
  }
  if (const OrderedJson* add = JsonMember(body, "add_special_tokens")) {
    if (!add->is_boolean()) {
      return BadField("add_special_tokens", "must be true or false", kInvalidType);
    }
    add_special_tokens = add->get<bool>();
  }
  ASSIGN_OR_RETURN(std::vector<int> ids, EncodePrompt(*context.tokenizer, text, max_model_len,
                                                      "prompt", add_special_tokens));
  return OrderedJson{{"count", ids.size()}, {"max_model_len", max_model_len}, {"tokens", ids}};
}

absl::StatusOr<OrderedJson> DetokenizeReply(const OrderedJson& body, const OpenAiContext& context) {
  const int max_model_len = context.cluster->max_model_len();
  const int vocab_size = context.tokenizer->vocab_size();
  const auto it = body.find("tokens");
  std::vector<int> ids;
  bool ok = it != body.end() && (it->is_array() || IsIdList(*it));
  if (ok && IsIdList(*it)) {
    ok = IdListSize(*it) <= max_model_len;
    if (ok) AppendIdList(*it, &ids);
  } else if (ok) {
    ok = it->size() <= static_cast<size_t>(max_model_len);
    for (size_t i = 0; ok && i < it->size(); ++i) {
      const OrderedJson& id = (*it)[i];
      ok = id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < vocab_size;
      if (ok) ids.push_back(id.get<int>());
    }
  }
  // A compact list's ids are in [0, 2^31) already.
  ok = ok && std::all_of(ids.begin(), ids.end(), [&](int id) { return id < vocab_size; });
  if (!ok) {
    return BadField("tokens", absl::StrCat("must be a list of at most ", max_model_len,
                                           " ids in [0, ", vocab_size, ")"));
  }
  return OrderedJson{{"prompt", context.tokenizer->Decode(ids)}};
}

}  // namespace pagoda
