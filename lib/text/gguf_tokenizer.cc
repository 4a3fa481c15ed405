#include "lib/text/gguf_tokenizer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "lib/text/bpe_spec.h"
#include "lib/text/hf_tokenizer.h"
#include "lib/text/llama2c_tokenizer.h"

namespace pagoda {
namespace {

enum TokenType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5 };

// llama.cpp's pre-tokenizer names and the Hugging Face split regex each stands for.
struct PreTokenizer {
  const char* name;
  const char* pattern;
  bool ignore_merges;
  bool add_bos;  // llama.cpp's default when the file does not say
};
constexpr PreTokenizer kPreTokenizers[] = {
    {"llama3", kLlama3Pattern, true, true},    {"llama-v3", kLlama3Pattern, true, true},
    {"llama-bpe", kLlama3Pattern, true, true}, {"qwen2", kQwenPattern, false, false},
    {"gpt-2", kGpt2Pattern, false, false},
};

// A GGUF "gpt2" vocabulary as a BpeSpec: control and user-defined tokens are added tokens.
absl::StatusOr<BpeSpec> ByteLevelSpec(const GgufFile& f,
                                      const std::vector<absl::string_view>& tokens,
                                      const std::vector<int32_t>& types, const PreTokenizer& pre) {
  ASSIGN_OR_RETURN(std::vector<absl::string_view> merges, f.StringArray("tokenizer.ggml.merges"));
  BpeSpec spec;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const int type = types.empty() ? kNormal : types[id];
    if (type == kControl || type == kUserDefined) {
      spec.added_tokens.push_back({std::string(tokens[id]), static_cast<int64_t>(id)});
    } else {
      spec.vocab.push_back({std::string(tokens[id]), static_cast<int64_t>(id)});
    }
  }
  for (absl::string_view m : merges) {
    std::pair<std::string, std::string> pieces;
    if (!SplitMerge(std::string_view(m.data(), m.size()), &pieces)) {
      return absl::InvalidArgumentError(absl::StrCat(f.path(), ": merge \"", m, "\" has no space"));
    }
    spec.merges.push_back(std::move(pieces));
  }
  spec.ignore_merges = pre.ignore_merges;
  spec.pre_tokenizer = BpeSpec::PreTokenizer::kByteLevel;
  spec.split_patterns = {pre.pattern};
  return spec;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const GgufFile& f) {
  const std::string& path = f.path();
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", parts...));
  };
  ASSIGN_OR_RETURN(std::string model, f.StringOr("tokenizer.ggml.model", ""));
  if (model.empty()) return bad("no tokenizer.ggml.model (a vocabulary-less GGUF)");
  ASSIGN_OR_RETURN(std::vector<absl::string_view> tokens, f.StringArray("tokenizer.ggml.tokens"));
  if (tokens.empty() || tokens.size() > (1 << 24)) {
    return bad("tokenizer.ggml.tokens has ", tokens.size(), " entries");
  }
  std::vector<int32_t> types;
  if (f.metadata().contains("tokenizer.ggml.token_type")) {
    ASSIGN_OR_RETURN(types, f.Int32Array("tokenizer.ggml.token_type"));
    if (types.size() != tokens.size()) {
      return bad("tokenizer.ggml.token_type has ", types.size(), " entries for ", tokens.size(),
                 " tokens");
    }
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  ASSIGN_OR_RETURN(int64_t bos, f.IntOr("tokenizer.ggml.bos_token_id", model == "llama" ? 1 : -1));
  ASSIGN_OR_RETURN(int64_t eos, f.IntOr("tokenizer.ggml.eos_token_id", model == "llama" ? 2 : -1));
  for (auto [id, key] : {std::pair{bos, "bos_token_id"}, std::pair{eos, "eos_token_id"}}) {
    if (id < -1 || id >= n)
      return bad("tokenizer.ggml.", key, " ", id, " is outside the vocabulary");
  }
  ASSIGN_OR_RETURN(std::string chat_template, f.StringOr("tokenizer.chat_template", ""));
  std::unique_ptr<Tokenizer> tokenizer;
  if (model == "llama") {
    Llama2cTokenizer::Vocab v;
    if (f.metadata().contains("tokenizer.ggml.scores")) {
      ASSIGN_OR_RETURN(v.scores, f.FloatArray("tokenizer.ggml.scores"));
      if (v.scores.size() != tokens.size()) {
        return bad("tokenizer.ggml.scores has ", v.scores.size(), " entries for ", n, " tokens");
      }
    } else {
      v.scores.assign(tokens.size(), 0.0f);
    }
    for (size_t id = 0; id < tokens.size(); ++id) {
      v.pieces.push_back(absl::StrReplaceAll(tokens[id], {{"\xE2\x96\x81", " "}}));
      const int type = types.empty() ? kNormal : types[id];
      v.matchable.push_back(type != kUnknown && type != kControl && type != kUnused);
    }
    v.bos_id = bos >= 0 ? static_cast<int>(bos) : 1;
    v.eos_id = eos >= 0 ? static_cast<int>(eos) : 2;
    ASSIGN_OR_RETURN(v.add_bos, f.BoolOr("tokenizer.ggml.add_bos_token", true));
    ASSIGN_OR_RETURN(v.add_eos, f.BoolOr("tokenizer.ggml.add_eos_token", false));
    absl::StatusOr<std::unique_ptr<Llama2cTokenizer>> t = Llama2cTokenizer::FromVocab(std::move(v));
    if (!t.ok()) return bad(t.status().message());
    tokenizer = *std::move(t);
  } else if (model == "gpt2") {
    ASSIGN_OR_RETURN(std::string pre_name, f.StringOr("tokenizer.ggml.pre", "default"));
    const PreTokenizer* pre = nullptr;
    for (const PreTokenizer& p : kPreTokenizers) {
      if (pre_name == p.name) pre = &p;
    }
    if (pre == nullptr) {
      return bad("tokenizer.ggml.pre \"", pre_name,
                 "\" is not supported (llama3, llama-v3, llama-bpe, qwen2, gpt-2)");
    }
    ASSIGN_OR_RETURN(BpeSpec spec, ByteLevelSpec(f, tokens, types, *pre));
    ASSIGN_OR_RETURN(bool add_bos, f.BoolOr("tokenizer.ggml.add_bos_token", pre->add_bos));
    ASSIGN_OR_RETURN(bool add_eos, f.BoolOr("tokenizer.ggml.add_eos_token", false));
    if ((add_bos && bos < 0) || (add_eos && eos < 0)) {
      return bad("add_bos_token / add_eos_token without bos_token_id / eos_token_id");
    }
    spec.bos_id = static_cast<int>(bos);  // -1: HfTokenizer guesses from the names
    spec.eos_id = static_cast<int>(eos);
    if (add_bos) spec.prefix_ids = {static_cast<int>(bos)};
    if (add_eos) spec.suffix_ids = {static_cast<int>(eos)};
    ASSIGN_OR_RETURN(std::unique_ptr<HfTokenizer> t, HfTokenizer::Create(spec, path));
    tokenizer = std::move(t);
  } else {
    return bad("tokenizer.ggml.model \"", model, "\" is not supported (llama, gpt2)");
  }
  tokenizer->set_chat_template(std::move(chat_template));
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, GgufFile::Open(path));
  return LoadGgufTokenizer(*f);
}

}  // namespace pagoda
