#include "common/text/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "common/text/unicode.h"
#include "common/text/utf8.h"

namespace pagoda {
namespace {

constexpr char kSpace[] = "\xE2\x96\x81";  // U+2581, SentencePiece's word boundary

uint64_t PairKey(int a, int b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// "<0x41>" -> 0x41; -1 if `piece` is not a byte token.
int ByteTokenValue(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = piece[i];
    v = v * 16 + (c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -100);
  }
  return v >= 0 ? v : -1;
}

// A string value, or "" when `v` is absent or not a string.
const std::string& StringOf(const Json* v) {
  static const std::string* const kEmpty = new std::string();
  return v != nullptr && v->is_string() ? v->get_ref<const std::string&>() : *kEmpty;
}

// The special tokens of a token reference: "<s>" or an AddedToken object {"content": "<s>"}.
absl::StatusOr<int> SpecialTokenId(const Json* v, const std::string& what,
                                   const absl::flat_hash_map<std::string, int>& ids) {
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
absl::Status PostProcessorIds(const Json& p, const std::string& what,
                              const absl::flat_hash_map<std::string, int>& ids,
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

}  // namespace

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  ASSIGN_OR_RETURN(Json j, ParseJson(text, path));
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return FromJson(j, path, dir.empty() ? "." : dir.string());
}

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::FromJson(const Json& j,
                                                                   const std::string& path,
                                                                   const std::string& config_dir,
                                                                   bool fast_paths) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", parts...));
  };
  const Json* model = JsonMember(j, "model");
  if (model == nullptr) return bad("no model");
  ASSIGN_OR_RETURN(std::string type, JsonString(*model, "type", path + ": model"));
  if (type != "BPE") return bad("model type ", type, " is not supported (BPE)");
  auto t = std::unique_ptr<HfTokenizer>(new HfTokenizer());
  const Json* pre = JsonMember(j, "pre_tokenizer");
  if (pre != nullptr && StringOf(JsonMember(*pre, "type")) == "Metaspace") {
    const std::string what = path + ": pre_tokenizer";
    ASSIGN_OR_RETURN(bool split, JsonBoolOr(*pre, "split", true, what));
    ASSIGN_OR_RETURN(const std::string prepend,
                     JsonStringOr(*pre, "prepend_scheme", "always", what));
    ASSIGN_OR_RETURN(t->metaspace_, JsonStringOr(*pre, "replacement", kSpace, what));
    if (split || (prepend != "first" && prepend != "always") || t->metaspace_.empty()) {
      return absl::UnimplementedError(absl::StrCat(
          path, ": Metaspace is supported with split: false and prepend_scheme first or always"));
    }
    t->metaspace_first_only_ = prepend == "first";
    pre = nullptr;
  }
  if (pre != nullptr) {
    // Byte-level: Sequence[Split(regex, Isolated)..., ByteLevel(use_regex: false)], or a lone
    // ByteLevel(use_regex: true, add_prefix_space: false), which splits with GPT-2's regex.
    std::vector<std::string> patterns;
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
               type_of(*pre) == "Sequence" && seq != nullptr && seq->is_array() &&
               seq->size() >= 2) {
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
    // The Llama 3 and Qwen patterns have hand-written splitters (PreTokenize), checked equal
    // to PCRE2 on the golden sets and random texts; any other goes through PCRE2. End to end
    // the two encode at the same speed (BPE dominates): the hand-written one could go.
    const bool fast = fast_paths && patterns.size() == 1 &&
                      (patterns[0] == kLlama3Pattern || patterns[0] == kQwenPattern);
    if (fast) {
      t->max_digits_ = patterns[0] == kLlama3Pattern ? 3 : 1;
    } else {
      for (const std::string& pattern : patterns) {
        absl::StatusOr<std::unique_ptr<SplitRegex>> regex = SplitRegex::Compile(pattern);
        if (!regex.ok()) return bad("pre_tokenizer: ", regex.status().message());
        t->splits_.push_back(*std::move(regex));
      }
    }
    t->byte_level_ = true;
    // GPT-2's bytes_to_unicode: printable bytes stand for themselves, the rest for 256 + n.
    t->byte_chars_.resize(256);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const uint32_t cp = printable ? b : 256 + n++;
      AppendUtf8(cp, &t->byte_chars_[b]);
      t->char_bytes_[cp] = static_cast<uint8_t>(b);
    }
  }
  ASSIGN_OR_RETURN(t->ignore_merges_, JsonBoolOr(*model, "ignore_merges", false, path));
  const Json* vocab = JsonMember(*model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) return bad("model.vocab must be an object");
  auto add_piece = [&](const std::string& piece, int64_t id) -> absl::Status {
    if (id < 0 || id > (1 << 24)) return bad("token id ", id, " of ", piece, " is out of range");
    if (static_cast<size_t>(id) >= t->pieces_.size()) t->pieces_.resize(id + 1);
    t->pieces_[id] = piece;
    auto [it, inserted] = t->ids_.emplace(piece, static_cast<int>(id));
    if (!inserted) it->second = std::min(it->second, static_cast<int>(id));
    return absl::OkStatus();
  };
  for (const auto& [piece, id] : vocab->items()) {
    ASSIGN_OR_RETURN(int64_t i, JsonAsInt(id, path + ": model.vocab"));
    RETURN_IF_ERROR(add_piece(piece, i));
  }
  t->byte_ids_.assign(256, -1);
  for (size_t id = 0; id < t->pieces_.size(); ++id) {
    const int b = ByteTokenValue(t->pieces_[id]);
    if (b >= 0) t->byte_ids_[b] = static_cast<int>(id);
  }
  ASSIGN_OR_RETURN(bool byte_fallback, JsonBoolOr(*model, "byte_fallback", false, path));
  if (!byte_fallback) t->byte_ids_.assign(256, -1);
  if (const Json* unk = JsonMember(*model, "unk_token"); unk && unk->is_string()) {
    auto it = t->ids_.find(StringOf(unk));
    if (it != t->ids_.end()) t->unk_id_ = it->second;
  }
  // Merges: "a b" strings, or [a, b] pairs in newer files. Rank = position in the list.
  const Json* merges = JsonMember(*model, "merges");
  if (merges == nullptr || !merges->is_array()) return bad("model.merges must be a list");
  int rank = 0;
  for (const Json& m : *merges) {
    std::string a, b;
    if (m.is_string()) {
      const std::string& merge = m.get_ref<const std::string&>();
      const size_t sp = merge.find(' ');
      if (sp == std::string::npos) return bad("merge \"", merge, "\" has no space");
      a = merge.substr(0, sp);
      b = merge.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get_ref<const std::string&>();
      b = m[1].get_ref<const std::string&>();
    } else {
      return bad("merge ", rank, " is neither \"a b\" nor [a, b]");
    }
    auto ia = t->ids_.find(a), ib = t->ids_.find(b), im = t->ids_.find(a + b);
    if (ia == t->ids_.end() || ib == t->ids_.end() || im == t->ids_.end()) {
      return bad("merge \"", a, " ", b, "\" uses a token not in the vocabulary");
    }
    t->merges_.emplace(PairKey(ia->second, ib->second), std::make_pair(rank++, im->second));
  }
  // Added tokens: matched in the raw text first.
  if (const Json* added = JsonMember(j, "added_tokens"); added && added->is_array()) {
    for (const Json& a : *added) {
      ASSIGN_OR_RETURN(int64_t id, JsonInt(a, "id", path + ": added_tokens"));
      ASSIGN_OR_RETURN(std::string content, JsonString(a, "content", path + ": added_tokens"));
      if (content.empty()) continue;
      RETURN_IF_ERROR(add_piece(content, id));
      t->added_.push_back({content, static_cast<int>(id)});
    }
  }
  t->is_added_.assign(t->pieces_.size(), false);
  for (const Added& a : t->added_) t->is_added_[a.id] = true;
  std::sort(t->added_.begin(), t->added_.end(),
            [](const Added& x, const Added& y) { return x.content.size() > y.content.size(); });
  for (const char* bos : {"<s>", "<|begin_of_text|>", "<|endoftext|>"}) {
    if (auto it = t->ids_.find(bos); it != t->ids_.end()) {
      t->bos_id_ = it->second;
      break;
    }
  }
  for (const char* eos : {"</s>", "<|end_of_text|>", "<|endoftext|>"}) {
    if (auto it = t->ids_.find(eos); it != t->ids_.end()) {
      t->eos_id_ = it->second;
      break;
    }
  }
  // Special tokens: the post_processor's, unless tokenizer_config.json says otherwise.
  if (const Json* post = JsonMember(j, "post_processor"); post != nullptr) {
    RETURN_IF_ERROR(PostProcessorIds(*post, path + ": post_processor", t->ids_, &t->prefix_ids_,
                                     &t->suffix_ids_));
  }
  const std::string config_path =
      (std::filesystem::path(config_dir) / "tokenizer_config.json").string();
  if (!config_dir.empty() && std::filesystem::exists(config_path)) {
    ASSIGN_OR_RETURN(std::string config_text, ReadTextFile(config_path));
    ASSIGN_OR_RETURN(Json config, ParseJson(config_text, config_path));
    for (const bool bos : {true, false}) {
      const Json* add = JsonMember(config, bos ? "add_bos_token" : "add_eos_token");
      if (add == nullptr) continue;
      if (!add->is_boolean()) {
        return absl::InvalidArgumentError(absl::StrCat(
            config_path, ": ", bos ? "add_bos_token" : "add_eos_token", " is not true or false"));
      }
      std::vector<int>& ids = bos ? t->prefix_ids_ : t->suffix_ids_;
      ids.clear();
      if (!add->get<bool>()) continue;
      const char* key = bos ? "bos_token" : "eos_token";
      ASSIGN_OR_RETURN(int id, SpecialTokenId(JsonMember(config, key),
                                              absl::StrCat(config_path, ": ", key), t->ids_));
      ids.push_back(id);
    }
    if (const Json* chat = JsonMember(config, "chat_template"); chat && chat->is_string()) {
      t->chat_template_ = StringOf(chat);
    }
  }
  for (const std::vector<int>* ids : {&t->prefix_ids_, &t->suffix_ids_}) {
    for (int id : *ids) {
      if (id < 0 || id >= t->vocab_size()) {
        return bad("special token id ", id, " is outside the vocabulary");
      }
    }
  }
  // Normalizer: Prepend and Replace(String), alone or in a Sequence.
  std::vector<const Json*> normalizers;
  if (const Json* n = JsonMember(j, "normalizer"); n != nullptr) {
    const Json* seq = JsonMember(*n, "normalizers");
    if (seq != nullptr && seq->is_array()) {
      for (const Json& e : *seq) normalizers.push_back(&e);
    } else {
      normalizers.push_back(n);
    }
  }
  for (const Json* n : normalizers) {
    ASSIGN_OR_RETURN(std::string kind, JsonString(*n, "type", path + ": normalizer"));
    if (kind == "Prepend") {
      ASSIGN_OR_RETURN(t->prepend_, JsonString(*n, "prepend", path + ": normalizer"));
      if (!t->replacements_.empty()) return bad("a Prepend after a Replace is not supported");
    } else if (kind == "Replace") {
      const Json* pattern = JsonMember(*n, "pattern");
      ASSIGN_OR_RETURN(std::string content, JsonString(*n, "content", path + ": normalizer"));
      const Json* from = pattern != nullptr ? JsonMember(*pattern, "String") : nullptr;
      if (from == nullptr || !from->is_string()) {
        return bad("normalizer Replace needs a String pattern");
      }
      t->replacements_.push_back({StringOf(from), content});
    } else if (kind == "NFC" && t->byte_level_) {
      t->nfc_ = true;
    } else {
      return bad("normalizer ", kind, " is not supported (Prepend, Replace; NFC with byte-level)");
    }
  }
  // Decoder: the SentencePiece sequence; what matters is whether it strips the first space.
  if (const Json* d = JsonMember(j, "decoder"); d != nullptr) {
    if (const Json* seq = JsonMember(*d, "decoders"); seq && seq->is_array()) {
      for (const Json& e : *seq) {
        if (StringOf(JsonMember(e, "type")) == "Strip") {
          ASSIGN_OR_RETURN(int64_t start, JsonIntOr(e, "start", 0, path + ": decoder"));
          t->strip_leading_space_ = start > 0;
        }
      }
    }
  }
  return t;
}

void HfTokenizer::EncodeWord(std::string_view word, std::vector<int>* out) const {
  // Symbols start as characters (or their bytes, or unk).
  std::vector<int> sym;
  for (size_t i = 0; i < word.size();) {
    int n = Utf8CharLength(word.substr(i));
    if (n <= 0) n = 1;
    const std::string ch(word.substr(i, n));
    i += n;
    if (auto it = ids_.find(ch); it != ids_.end()) {
      sym.push_back(it->second);
      continue;
    }
    bool bytes = true;
    for (unsigned char c : ch) bytes = bytes && byte_ids_[c] >= 0;
    if (bytes) {
      for (unsigned char c : ch) sym.push_back(byte_ids_[c]);
    } else if (unk_id_ >= 0 && (sym.empty() || sym.back() != unk_id_)) {
      sym.push_back(unk_id_);  // consecutive unknowns fuse into one
    }
  }
  // Merge the lowest-ranked adjacent pair first (the leftmost among equals), until none is left.
  const int n = static_cast<int>(sym.size());
  std::vector<int> next(n), prev(n);
  for (int i = 0; i < n; ++i) next[i] = i + 1, prev[i] = i - 1;
  using Candidate = std::tuple<int, int, int, int>;  // rank, left position, left id, right id
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push = [&](int left) {
    if (left < 0 || next[left] >= n) return;
    auto it = merges_.find(PairKey(sym[left], sym[next[left]]));
    if (it != merges_.end()) queue.push({it->second.first, left, sym[left], sym[next[left]]});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const auto [rank, left, a, b] = queue.top();
    queue.pop();
    const int right = next[left];
    if (sym[left] != a || right >= n || sym[right] != b) continue;  // stale
    sym[left] = merges_.at(PairKey(a, b)).second;
    sym[right] = -1;
    next[left] = next[right];
    if (next[right] < n) prev[next[right]] = left;
    push(prev[left]);
    push(left);
  }
  for (int i = 0; i < n; i = next[i]) out->push_back(sym[i]);
}

std::vector<std::pair<size_t, size_t>> HfTokenizer::PreTokenize(const std::u32string& cps) const {
  // The split pattern's alternatives in order, at each position; the first that matches wins.
  const size_t n = cps.size();
  auto letter = [&](size_t i) { return i < n && IsUnicodeLetter(cps[i]); };
  auto number = [&](size_t i) { return i < n && IsUnicodeNumber(cps[i]); };
  auto space = [&](size_t i) { return i < n && IsUnicodeWhiteSpace(cps[i]); };
  auto newline = [&](size_t i) { return i < n && (cps[i] == '\r' || cps[i] == '\n'); };
  auto other = [&](size_t i) { return i < n && !space(i) && !letter(i) && !number(i); };
  auto lower = [&](size_t i) { return i < n && cps[i] < 128 ? std::tolower(cps[i]) : -1; };
  std::vector<std::pair<size_t, size_t>> pieces;
  for (size_t i = 0; i < n;) {
    size_t end = i;
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (cps[i] == '\'') {
      const int a = lower(i + 1), b = lower(i + 2);
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        end = i + 2;
      } else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
        end = i + 3;
      }
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (end == i && (letter(i) || (!newline(i) && !letter(i) && !number(i) && letter(i + 1)))) {
      end = i + 1;
      while (letter(end)) ++end;
    }
    // \p{N}{1,max}
    if (end == i && number(i)) {
      while (number(end) && end - i < static_cast<size_t>(max_digits_)) ++end;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    if (end == i && (other(i) || (cps[i] == ' ' && other(i + 1)))) {
      end = cps[i] == ' ' ? i + 1 : i;
      while (other(end)) ++end;
      while (newline(end)) ++end;
    }
    if (end == i && space(i)) {
      size_t run = i;
      while (space(run)) ++run;
      size_t last_newline = n;
      for (size_t k = i; k < run; ++k) {
        if (newline(k)) last_newline = k;
      }
      if (last_newline != n) {
        end = last_newline + 1;  // \s*[\r\n]+
      } else if (run == n || run - i == 1) {
        end = run;  // \s+(?!\S) at the end of the text, or the plain \s+
      } else {
        end = run - 1;  // \s+(?!\S): leave the last space to the next piece
      }
    }
    if (end == i) end = i + 1;
    pieces.push_back({i, end});
    i = end;
  }
  return pieces;
}

void HfTokenizer::EncodeByteLevel(std::string_view text, std::vector<int>* out) const {
  auto encode_piece = [&](std::string_view piece) {
    std::string mapped;
    for (unsigned char c : piece) mapped += byte_chars_[c];
    if (ignore_merges_) {
      if (auto it = ids_.find(mapped); it != ids_.end()) {
        out->push_back(it->second);
        return;
      }
    }
    EncodeWord(mapped, out);
  };
  // Invalid UTF-8 becomes U+FFFD first, in both paths.
  const std::u32string cps = DecodeUtf8(text);
  if (splits_.empty()) {  // the hand-written fast path
    std::string piece;
    for (const auto& [begin, end] : PreTokenize(cps)) {
      piece.clear();
      for (size_t k = begin; k < end; ++k) AppendUtf8(cps[k], &piece);
      encode_piece(piece);
    }
    return;
  }
  std::string valid;
  for (uint32_t cp : cps) AppendUtf8(cp, &valid);
  // Each Split regex splits every piece the previous one left.
  std::vector<std::pair<size_t, size_t>> pieces = {{0, valid.size()}}, next;
  for (const std::unique_ptr<SplitRegex>& split : splits_) {
    next.clear();
    for (const auto& [begin, end] : pieces) {
      for (const auto& [b, e] : split->Split(absl::string_view(valid).substr(begin, end - begin))) {
        next.push_back({begin + b, begin + e});
      }
    }
    pieces.swap(next);
  }
  for (const auto& [begin, end] : pieces) {
    encode_piece(std::string_view(valid).substr(begin, end - begin));
  }
}

std::vector<int> HfTokenizer::Encode(std::string_view text) const {
  std::vector<int> out;
  auto encode_segment = [&](std::string_view segment) {
    if (segment.empty()) return;
    if (byte_level_) {
      EncodeByteLevel(nfc_ ? NormalizeNfc(segment) : std::string(segment), &out);
      return;
    }
    std::string normalized = prepend_ + std::string(segment);
    for (const auto& [from, to] : replacements_) {
      normalized = absl::StrReplaceAll(normalized, {{from, to}});
    }
    if (!metaspace_.empty()) {
      normalized = absl::StrReplaceAll(normalized, {{" ", metaspace_}});
      const bool first = segment.data() == text.data();
      if ((first || !metaspace_first_only_) && !normalized.starts_with(metaspace_)) {
        normalized = metaspace_ + normalized;
      }
    }
    EncodeWord(normalized, &out);
  };
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const Added* hit = nullptr;
    for (const Added& a : added_) {
      if (text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    encode_segment(text.substr(start, i - start));
    out.push_back(hit->id);
    i += hit->content.size();
    start = i;
  }
  encode_segment(text.substr(start));
  return out;
}

std::string HfTokenizer::TokenBytes(int prev_id, int id) const {
  if (id < 0 || id >= vocab_size()) return "";
  const std::string& piece = pieces_[id];
  if (byte_level_) {
    if (is_added_[id]) return piece;
    std::string out;
    for (uint32_t cp : DecodeUtf8(piece)) {
      auto it = char_bytes_.find(cp);
      if (it != char_bytes_.end()) out += static_cast<char>(it->second);
    }
    return out;
  }
  const int byte = ByteTokenValue(piece);
  if (byte >= 0 && byte_ids_[byte] == id) return std::string(1, static_cast<char>(byte));
  std::string out = absl::StrReplaceAll(piece, {{kSpace, " "}});
  if (strip_leading_space_ && (prev_id < 0 || prev_id == bos_id_) && !out.empty() &&
      out[0] == ' ') {
    out.erase(0, 1);
  }
  return out;
}

}  // namespace pagoda
