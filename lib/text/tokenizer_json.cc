#include "lib/text/tokenizer_json.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

constexpr char kSpace[] = "\xE2\x96\x81";  // U+2581, SentencePiece's word boundary

using TokenIds = absl::flat_hash_map<std::string, int>;

// A string value, or "" when `v` is absent or not a string.
const std::string& StringOf(const Json* v) {
  static const std::string* const kEmpty = new std::string();
  return v != nullptr && v->is_string() ? v->get_ref<const std::string&>() : *kEmpty;
}

// The special tokens of a token reference: "<s>" or an AddedToken object {"content": "<s>"}.
absl::StatusOr<int> SpecialTokenId(const Json* v, const std::string& what, const TokenIds& ids) {
  const Json* content = v;
  if (v != nullptr && v->is_object()) content = JsonMember(*v, "content");
  if (content == nullptr || !content->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not set"));
  }
  auto it = ids.find(StringOf(content));
  if (it == ids.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", StringOf(content), "\" is not in the vocabulary"));
  }
  return it->second;
}

// The ids a post_processor puts before and after a single sequence.
absl::Status PostProcessorIds(const Json& p, const std::string& what, const TokenIds& ids,
                              std::vector<int>* prefix, std::vector<int>* suffix) {
  ASSIGN_OR_RETURN(std::string type, JsonString(p, "type", what));
  if (type == "ByteLevel") return absl::OkStatus();  // only adjusts offsets
  if (type == "Sequence") {
    const Json* list = JsonMember(p, "processors");
    if (list == nullptr || !list->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": Sequence needs processors"));
    }
    for (const Json& e : *list) {
      RETURN_IF_ERROR(PostProcessorIds(e, what, ids, prefix, suffix));
    }
    return absl::OkStatus();
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    for (const char* key : {"cls", "sep"}) {
      const Json* pair = JsonMember(p, key);
      if (pair == nullptr || !pair->is_array() || pair->size() != 2) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": ", key, " must be [token, id]"));
      }
      ASSIGN_OR_RETURN(int64_t id, JsonAsInt((*pair)[1], what));
      (std::string(key) == "cls" ? prefix : suffix)->push_back(static_cast<int>(id));
    }
    return absl::OkStatus();
  }
  if (type != "TemplateProcessing") {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": type ", type,
        " is not supported (TemplateProcessing, ByteLevel, Bert/RobertaProcessing, Sequence)"));
  }
  const Json* single = JsonMember(p, "single");
  const Json* specials = JsonMember(p, "special_tokens");
  if (single == nullptr || !single->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": TemplateProcessing needs single"));
  }
  bool seen_sequence = false;
  for (const Json& item : *single) {
    if (JsonMember(item, "Sequence") != nullptr) {
      seen_sequence = true;
      continue;
    }
    const Json* special = JsonMember(item, "SpecialToken");
    if (special == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": a template piece is neither Sequence nor SpecialToken"));
    }
    ASSIGN_OR_RETURN(std::string name, JsonString(*special, "id", what));
    const Json* entry = specials ? JsonMember(*specials, name) : nullptr;
    const Json* entry_ids = entry ? JsonMember(*entry, "ids") : nullptr;
    std::vector<int>* out = seen_sequence ? suffix : prefix;
    if (entry_ids != nullptr && entry_ids->is_array()) {
      for (const Json& id : *entry_ids) {
        ASSIGN_OR_RETURN(int64_t i, JsonAsInt(id, absl::StrCat(what, ": ", name)));
        out->push_back(static_cast<int>(i));
      }
    } else {
      const Json token = name;
      ASSIGN_OR_RETURN(int id, SpecialTokenId(&token, absl::StrCat(what, ": token"), ids));
      out->push_back(id);
    }
  }
  return absl::OkStatus();
}

// Metaspace(split: false), or byte-level: Sequence[Split(regex, Isolated)...,
// ByteLevel(use_regex: false)], or a lone ByteLevel(use_regex: true, add_prefix_space: false),
// which splits with GPT-2's regex. No pre_tokenizer: SentencePiece style.
absl::Status ReadPreTokenizer(const Json* pre, const std::string& path, BpeSpec* spec) {
  if (pre == nullptr) return absl::OkStatus();
  if (StringOf(JsonMember(*pre, "type")) == "Metaspace") {
    const std::string what = path + ": pre_tokenizer";
    ASSIGN_OR_RETURN(bool split, JsonBoolOr(*pre, "split", true, what));
    ASSIGN_OR_RETURN(const std::string prepend,
                     JsonStringOr(*pre, "prepend_scheme", "always", what));
    ASSIGN_OR_RETURN(spec->metaspace, JsonStringOr(*pre, "replacement", kSpace, what));
    if (split || (prepend != "first" && prepend != "always") || spec->metaspace.empty()) {
      return absl::UnimplementedError(absl::StrCat(
          path, ": Metaspace is supported with split: false and prepend_scheme first or always"));
    }
    spec->pre_tokenizer = BpeSpec::PreTokenizer::kMetaspace;
    spec->metaspace_first_only = prepend == "first";
    return absl::OkStatus();
  }
  std::vector<std::string>& patterns = spec->split_patterns;
  std::string error;
  auto type_of = [](const Json& v) { return StringOf(JsonMember(v, "type")); };
  auto flag = [](const Json& v, const char* key, bool fallback) {
    const Json* f = JsonMember(v, key);
    return f != nullptr && f->is_boolean() ? f->get<bool>() : fallback;
  };
  if (type_of(*pre) == "ByteLevel") {
    if (!flag(*pre, "use_regex", true) || flag(*pre, "add_prefix_space", true)) {
      error = "ByteLevel alone needs use_regex: true and add_prefix_space: false";
    }
    patterns.push_back(kGpt2Pattern);
  } else if (const Json* seq = JsonMember(*pre, "pretokenizers");
             type_of(*pre) == "Sequence" && seq != nullptr && seq->is_array() && seq->size() >= 2) {
    const size_t n = seq->size();
    for (size_t i = 0; i + 1 < n; ++i) {
      const Json& split = (*seq)[i];
      const Json* p = JsonMember(split, "pattern");
      const Json* regex = p != nullptr ? JsonMember(*p, "Regex") : nullptr;
      if (type_of(split) != "Split" || regex == nullptr || !regex->is_string() ||
          StringOf(JsonMember(split, "behavior")) != "Isolated" || flag(split, "invert", false)) {
        error = "a Split with a Regex pattern, behavior Isolated and invert false";
      } else {
        patterns.push_back(StringOf(regex));
      }
    }
    const Json& last = (*seq)[n - 1];
    if (type_of(last) != "ByteLevel" || flag(last, "use_regex", true)) {
      error = "the Sequence to end with ByteLevel(use_regex: false)";
    }
  } else {
    error = "Sequence[Split..., ByteLevel] or ByteLevel";
  }
  if (!error.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        path, ": this pre_tokenizer is not supported (byte-level BPE needs ", error, ")"));
  }
  spec->pre_tokenizer = BpeSpec::PreTokenizer::kByteLevel;
  return absl::OkStatus();
}

// The model's vocabulary, merges and flags.
absl::Status ReadModel(const Json& model, const std::string& path, BpeSpec* spec) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", parts...));
  };
  ASSIGN_OR_RETURN(spec->ignore_merges, JsonBoolOr(model, "ignore_merges", false, path));
  const Json* vocab = JsonMember(model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) return bad("model.vocab must be an object");
  for (const auto& [piece, id] : vocab->items()) {
    ASSIGN_OR_RETURN(int64_t i, JsonAsInt(id, path + ": model.vocab"));
    spec->vocab.push_back({piece, i});
  }
  ASSIGN_OR_RETURN(spec->byte_fallback, JsonBoolOr(model, "byte_fallback", false, path));
  if (const Json* unk = JsonMember(model, "unk_token"); unk && unk->is_string()) {
    spec->unk_token = StringOf(unk);
  }
  // "a b" strings, or [a, b] pairs in newer files.
  const Json* merges = JsonMember(model, "merges");
  if (merges == nullptr || !merges->is_array()) return bad("model.merges must be a list");
  for (const Json& m : *merges) {
    std::pair<std::string, std::string> pieces;
    if (m.is_string()) {
      if (!SplitMerge(m.get_ref<const std::string&>(), &pieces)) {
        return bad("merge \"", m.get_ref<const std::string&>(), "\" has no space");
      }
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      pieces = {m[0].get_ref<const std::string&>(), m[1].get_ref<const std::string&>()};
    } else {
      return bad("merge ", spec->merges.size(), " is neither \"a b\" nor [a, b]");
    }
    spec->merges.push_back(std::move(pieces));
  }
  return absl::OkStatus();
}

absl::Status ReadAddedTokens(const Json& j, const std::string& path, BpeSpec* spec) {
  const Json* added = JsonMember(j, "added_tokens");
  if (added == nullptr || !added->is_array()) return absl::OkStatus();
  for (const Json& a : *added) {
    ASSIGN_OR_RETURN(int64_t id, JsonInt(a, "id", path + ": added_tokens"));
    ASSIGN_OR_RETURN(std::string content, JsonString(a, "content", path + ": added_tokens"));
    spec->added_tokens.push_back({std::move(content), id});
  }
  return absl::OkStatus();
}

// The post_processor's special tokens, unless tokenizer_config.json says otherwise; its chat
// template.
absl::Status ReadSpecialTokens(const Json& j, const std::string& path,
                               const std::string& config_dir, BpeSpec* spec) {
  const TokenIds ids = spec->TokenIds();
  if (const Json* post = JsonMember(j, "post_processor"); post != nullptr) {
    RETURN_IF_ERROR(PostProcessorIds(*post, path + ": post_processor", ids, &spec->prefix_ids,
                                     &spec->suffix_ids));
  }
  const std::string config_path =
      (std::filesystem::path(config_dir) / "tokenizer_config.json").string();
  if (config_dir.empty() || !std::filesystem::exists(config_path)) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::string config_text, ReadTextFile(config_path));
  ASSIGN_OR_RETURN(Json config, ParseJson(config_text, config_path));
  for (const bool bos : {true, false}) {
    const Json* add = JsonMember(config, bos ? "add_bos_token" : "add_eos_token");
    if (add == nullptr) continue;
    if (!add->is_boolean()) {
      return absl::InvalidArgumentError(absl::StrCat(
          config_path, ": ", bos ? "add_bos_token" : "add_eos_token", " is not true or false"));
    }
    std::vector<int>& out = bos ? spec->prefix_ids : spec->suffix_ids;
    out.clear();
    if (!add->get<bool>()) continue;
    const char* key = bos ? "bos_token" : "eos_token";
    ASSIGN_OR_RETURN(
        int id, SpecialTokenId(JsonMember(config, key), absl::StrCat(config_path, ": ", key), ids));
    out.push_back(id);
  }
  if (const Json* chat = JsonMember(config, "chat_template"); chat && chat->is_string()) {
    spec->chat_template = StringOf(chat);
  }
  return absl::OkStatus();
}

// Prepend and Replace(String), alone or in a Sequence; NFC with byte-level.
absl::Status ReadNormalizer(const Json* n, const std::string& path, BpeSpec* spec) {
  std::vector<const Json*> normalizers;
  if (n != nullptr) {
    const Json* seq = JsonMember(*n, "normalizers");
    if (seq != nullptr && seq->is_array()) {
      for (const Json& e : *seq) normalizers.push_back(&e);
    } else {
      normalizers.push_back(n);
    }
  }
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", parts...));
  };
  const std::string what = path + ": normalizer";
  for (const Json* e : normalizers) {
    ASSIGN_OR_RETURN(std::string kind, JsonString(*e, "type", what));
    if (kind == "Prepend") {
      ASSIGN_OR_RETURN(spec->prepend, JsonString(*e, "prepend", what));
      if (!spec->replacements.empty()) return bad("a Prepend after a Replace is not supported");
    } else if (kind == "Replace") {
      const Json* pattern = JsonMember(*e, "pattern");
      ASSIGN_OR_RETURN(std::string content, JsonString(*e, "content", what));
      const Json* from = pattern != nullptr ? JsonMember(*pattern, "String") : nullptr;
      if (from == nullptr || !from->is_string()) {
        return bad("normalizer Replace needs a String pattern");
      }
      spec->replacements.push_back({StringOf(from), content});
    } else if (kind == "NFC" && spec->pre_tokenizer == BpeSpec::PreTokenizer::kByteLevel) {
      spec->nfc = true;
    } else {
      return bad("normalizer ", kind, " is not supported (Prepend, Replace; NFC with byte-level)");
    }
  }
  return absl::OkStatus();
}

// The SentencePiece decoder sequence: what matters is whether it strips the first space.
absl::Status ReadDecoder(const Json* d, const std::string& path, BpeSpec* spec) {
  if (d == nullptr) return absl::OkStatus();
  const Json* seq = JsonMember(*d, "decoders");
  if (seq == nullptr || !seq->is_array()) return absl::OkStatus();
  for (const Json& e : *seq) {
    if (StringOf(JsonMember(e, "type")) == "Strip") {
      ASSIGN_OR_RETURN(int64_t start, JsonIntOr(e, "start", 0, path + ": decoder"));
      spec->strip_leading_space = start > 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BpeSpec> ReadTokenizerJson(const Json& j, const std::string& path,
                                          const std::string& config_dir) {
  const Json* model = JsonMember(j, "model");
  if (model == nullptr) return absl::InvalidArgumentError(absl::StrCat(path, ": no model"));
  ASSIGN_OR_RETURN(std::string type, JsonString(*model, "type", path + ": model"));
  if (type != "BPE") {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": model type ", type, " is not supported (BPE)"));
  }
  BpeSpec spec;
  RETURN_IF_ERROR(ReadPreTokenizer(JsonMember(j, "pre_tokenizer"), path, &spec));
  RETURN_IF_ERROR(ReadModel(*model, path, &spec));
  RETURN_IF_ERROR(ReadAddedTokens(j, path, &spec));
  RETURN_IF_ERROR(ReadSpecialTokens(j, path, config_dir, &spec));
  RETURN_IF_ERROR(ReadNormalizer(JsonMember(j, "normalizer"), path, &spec));
  RETURN_IF_ERROR(ReadDecoder(JsonMember(j, "decoder"), path, &spec));
  return spec;
}

}  // namespace pagoda
