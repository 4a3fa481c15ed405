#include "lib/text/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "lib/text/tokenizer_json.h"
#include "lib/text/unicode.h"
#include "lib/text/utf8.h"

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

}  // namespace

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  ASSIGN_OR_RETURN(Json j, ParseJson(text, path));
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return FromJson(j, path, dir.empty() ? "." : dir.string());
}

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::FromJson(const Json& j,
                                                                   const std::string& what,
                                                                   const std::string& config_dir,
                                                                   bool fast_paths) {
  ASSIGN_OR_RETURN(BpeSpec spec, ReadTokenizerJson(j, what, config_dir));
  return Create(spec, what, fast_paths);
}

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::Create(const BpeSpec& spec,
                                                                 const std::string& what,
                                                                 bool fast_paths) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", parts...));
  };
  auto t = std::unique_ptr<HfTokenizer>(new HfTokenizer());
  if (spec.pre_tokenizer == BpeSpec::PreTokenizer::kByteLevel) {
    RETURN_IF_ERROR(t->SetUpByteLevel(spec.split_patterns, fast_paths, what));
  }
  RETURN_IF_ERROR(t->SetUpVocabulary(spec, what));
  t->bos_id_ =
      spec.bos_id >= 0 ? spec.bos_id : t->FirstId({"<s>", "<|begin_of_text|>", "<|endoftext|>"}, 1);
  t->eos_id_ =
      spec.eos_id >= 0 ? spec.eos_id : t->FirstId({"</s>", "<|end_of_text|>", "<|endoftext|>"}, 2);
  t->prefix_ids_ = spec.prefix_ids;
  t->suffix_ids_ = spec.suffix_ids;
  for (const std::vector<int>* ids : {&t->prefix_ids_, &t->suffix_ids_}) {
    for (int id : *ids) {
      if (id < 0 || id >= t->vocab_size()) {
        return bad("special token id ", id, " is outside the vocabulary");
      }
    }
  }
  t->chat_template_ = spec.chat_template;
  t->ignore_merges_ = spec.ignore_merges;
  t->nfc_ = spec.nfc;
  t->prepend_ = spec.prepend;
  t->replacements_ = spec.replacements;
  if (spec.pre_tokenizer == BpeSpec::PreTokenizer::kMetaspace) {
    t->metaspace_ = spec.metaspace;
    t->metaspace_first_only_ = spec.metaspace_first_only;
  }
  t->strip_leading_space_ = spec.strip_leading_space;
  return t;
}

absl::Status HfTokenizer::SetUpVocabulary(const BpeSpec& spec, const std::string& what) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", parts...));
  };
  auto add_piece = [&](const std::string& piece, int64_t id) -> absl::Status {
    if (id < 0 || id > (1 << 24)) return bad("token id ", id, " of ", piece, " is out of range");
    if (static_cast<size_t>(id) >= pieces_.size()) pieces_.resize(id + 1);
    pieces_[id] = piece;
    auto [it, inserted] = ids_.emplace(piece, static_cast<int>(id));
    if (!inserted) it->second = std::min(it->second, static_cast<int>(id));
    return absl::OkStatus();
  };
  for (const auto& [piece, id] : spec.vocab) RETURN_IF_ERROR(add_piece(piece, id));
  byte_ids_.assign(256, -1);
  for (size_t id = 0; spec.byte_fallback && id < pieces_.size(); ++id) {
    const int b = ByteTokenValue(pieces_[id]);
    if (b >= 0) byte_ids_[b] = static_cast<int>(id);
  }
  if (auto it = ids_.find(spec.unk_token); !spec.unk_token.empty() && it != ids_.end()) {
    unk_id_ = it->second;
  }
  // Merges resolve against the vocabulary alone (added tokens do not merge). Rank = position.
  int rank = 0;
  for (const auto& [a, b] : spec.merges) {
    auto ia = ids_.find(a), ib = ids_.find(b), im = ids_.find(a + b);
    if (ia == ids_.end() || ib == ids_.end() || im == ids_.end()) {
      return bad("merge \"", a, " ", b, "\" uses a token not in the vocabulary");
    }
    merges_.emplace(PairKey(ia->second, ib->second), std::make_pair(rank++, im->second));
  }
  for (const BpeSpec::AddedToken& a : spec.added_tokens) {
    if (a.content.empty()) continue;
    RETURN_IF_ERROR(add_piece(a.content, a.id));
    added_.push_back({a.content, static_cast<int>(a.id)});
  }
  is_added_.assign(pieces_.size(), false);
  for (const Added& a : added_) is_added_[a.id] = true;
  std::sort(added_.begin(), added_.end(),
            [](const Added& x, const Added& y) { return x.content.size() > y.content.size(); });
  return absl::OkStatus();
}

absl::Status HfTokenizer::SetUpByteLevel(const std::vector<std::string>& patterns, bool fast_paths,
                                         const std::string& what) {
  // The Llama 3 and Qwen patterns have hand-written splitters (PreTokenize), checked equal
  // to PCRE2 on the golden sets and random texts; any other goes through PCRE2. End to end
  // the two encode at the same speed (BPE dominates): the hand-written one could go.
  const bool fast = fast_paths && patterns.size() == 1 &&
                    (patterns[0] == kLlama3Pattern || patterns[0] == kQwenPattern);
  if (fast) {
    max_digits_ = patterns[0] == kLlama3Pattern ? 3 : 1;
  } else {
    for (const std::string& pattern : patterns) {
      absl::StatusOr<std::unique_ptr<SplitRegex>> regex = SplitRegex::Compile(pattern);
      if (!regex.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": pre_tokenizer: ", regex.status().message()));
      }
      splits_.push_back(*std::move(regex));
    }
  }
  byte_level_ = true;
  // GPT-2's bytes_to_unicode: printable bytes stand for themselves, the rest for 256 + n.
  byte_chars_.resize(256);
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const char32_t cp = printable ? b : 256 + n++;
    AppendUtf8(cp, &byte_chars_[b]);
    char_bytes_[cp] = static_cast<uint8_t>(b);
  }
  return absl::OkStatus();
}

int HfTokenizer::FirstId(std::initializer_list<const char*> pieces, int fallback) const {
  for (const char* piece : pieces) {
    if (auto it = ids_.find(piece); it != ids_.end()) return it->second;
  }
  return fallback;
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
