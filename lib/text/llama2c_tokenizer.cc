#include "lib/text/llama2c_tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <queue>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "lib/text/utf8.h"

namespace pagoda {
namespace {

constexpr int kMaxPieceBytes = 1 << 16;

}  // namespace

absl::StatusOr<std::unique_ptr<Llama2cTokenizer>> Llama2cTokenizer::Load(const std::string& path,
                                                                         int expected_vocab_size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open tokenizer"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string data = buffer.str();
  size_t off = 0;
  auto read_i32 = [&](int32_t& v) {
    if (data.size() - off < 4) return false;
    std::memcpy(&v, data.data() + off, 4);
    off += 4;
    return true;
  };
  int32_t max_token_length;
  if (!read_i32(max_token_length) || max_token_length <= 0 || max_token_length > kMaxPieceBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": bad tokenizer header (max_token_length)"));
  }
  auto tok = std::unique_ptr<Llama2cTokenizer>(new Llama2cTokenizer());
  while (off < data.size()) {
    const size_t entry = tok->pieces_.size();
    float score;
    int32_t len;
    if (data.size() - off < 8) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": truncated tokenizer at entry ", entry, " (byte ", off, ")"));
    }
    std::memcpy(&score, data.data() + off, 4);
    std::memcpy(&len, data.data() + off + 4, 4);
    off += 8;
    if (len < 0 || len > max_token_length || data.size() - off < static_cast<size_t>(len)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": bad tokenizer entry ", entry, ": length ", len, " at byte ", off));
    }
    tok->pieces_.emplace_back(data.data() + off, len);
    tok->scores_.push_back(score);
    tok->ids_.try_emplace(tok->pieces_.back(), static_cast<int>(entry));
    off += len;
  }
  if (tok->pieces_.size() < 3 + 256) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": tokenizer has ", tok->pieces_.size(),
                     " entries; needs <unk>, <s>, </s> and 256 byte tokens"));
  }
  if (expected_vocab_size > 0 && tok->vocab_size() != expected_vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": tokenizer vocab size ", tok->vocab_size(),
                     " does not match the model's ", expected_vocab_size));
  }
  tok->prefix_ids_ = {1};
  tok->byte_ids_.resize(256);
  for (int b = 0; b < 256; ++b) tok->byte_ids_[b] = b + 3;
  return tok;
}

absl::StatusOr<std::unique_ptr<Llama2cTokenizer>> Llama2cTokenizer::FromVocab(Vocab v) {
  const size_t n = v.pieces.size();
  if (v.scores.size() != n || v.matchable.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("vocabulary of ", n, " pieces has ",
                                                   v.scores.size(), " scores and ",
                                                   v.matchable.size(), " token types"));
  }
  for (int id : {v.bos_id, v.eos_id}) {
    if (id < 0 || static_cast<size_t>(id) >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("bos/eos id ", id, " is outside the vocabulary of ", n));
    }
  }
  auto tok = std::unique_ptr<Llama2cTokenizer>(new Llama2cTokenizer());
  tok->pieces_ = std::move(v.pieces);
  tok->scores_ = std::move(v.scores);
  tok->byte_ids_.assign(256, -1);
  for (size_t id = 0; id < n; ++id) {
    const std::string& piece = tok->pieces_[id];
    unsigned int byte;
    char end;
    if (piece.size() == 6 && std::sscanf(piece.c_str(), "<0x%02X%c", &byte, &end) == 2 &&
        end == '>' && tok->byte_ids_[byte] < 0) {
      tok->byte_ids_[byte] = static_cast<int>(id);
    } else if (v.matchable[id]) {
      tok->ids_.try_emplace(piece, static_cast<int>(id));
    }
  }
  for (int b = 0; b < 256; ++b) {
    if (tok->byte_ids_[b] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the vocabulary has no byte token <0x", absl::Hex(b, absl::kZeroPad2), ">"));
    }
  }
  tok->bos_id_ = v.bos_id;
  tok->eos_id_ = v.eos_id;
  if (v.add_bos) tok->prefix_ids_ = {v.bos_id};
  if (v.add_eos) tok->suffix_ids_ = {v.eos_id};
  return tok;
}

int Llama2cTokenizer::Lookup(std::string_view piece) const {
  auto it = ids_.find(absl::string_view(piece.data(), piece.size()));
  return it == ids_.end() ? -1 : it->second;
}

std::vector<int> Llama2cTokenizer::Encode(std::string_view text) const {
  std::vector<int> ids;
  if (text.empty()) return ids;
  // run.c prepends the dummy-prefix space token whenever the text is non-empty.
  if (int space = Lookup(" "); space >= 0) ids.push_back(space);
  for (size_t i = 0; i < text.size();) {
    // As run.c: the length the lead byte announces, unchecked (1 for a byte that starts none).
    const size_t n = std::min<size_t>(std::max(1, Utf8SequenceLength(text[i])), text.size() - i);
    if (int id = Lookup(text.substr(i, n)); id >= 0) {
      ids.push_back(id);
    } else {
      for (size_t j = 0; j < n; ++j) {
        ids.push_back(byte_ids_[static_cast<unsigned char>(text[i + j])]);
      }
    }
    i += n;
  }

  // Merge with a max-heap of candidate pairs over a linked list of symbols. Keyed by
  // (score, -left index): the same order as run.c's scan for the best, leftmost pair.
  const int n = static_cast<int>(ids.size());
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    float score;
    int left, right, merged;
    bool operator<(const Candidate& o) const {
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::priority_queue<Candidate> heap;
  auto push = [&](int left) {
    const int right = next[left];
    if (left < 0 || right < 0) return;
    const int merged = Lookup(pieces_[ids[left]] + pieces_[ids[right]]);
    if (merged >= 0) heap.push({scores_[merged], left, right, merged});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    // Stale when either side was merged away or changed since the pair was queued.
    if (!alive[c.left] || !alive[c.right] || next[c.left] != c.right ||
        Lookup(pieces_[ids[c.left]] + pieces_[ids[c.right]]) != c.merged) {
      continue;
    }
    ids[c.left] = c.merged;
    alive[c.right] = false;
    next[c.left] = next[c.right];
    if (next[c.left] >= 0) prev[next[c.left]] = c.left;
    if (prev[c.left] >= 0) push(prev[c.left]);
    push(c.left);
  }
  std::vector<int> out;
  for (int i = 0; i >= 0 && i < n; i = next[i]) out.push_back(ids[i]);
  return out;
}

std::string Llama2cTokenizer::TokenBytes(int prev_id, int id) const {
  if (id < 0 || id >= vocab_size()) return "";
  std::string_view piece = pieces_[id];
  // After BOS (or at the start), the dummy-prefix space is not part of the text.
  if ((prev_id == bos_id() || prev_id < 0) && !piece.empty() && piece[0] == ' ') {
    piece.remove_prefix(1);
  }
  unsigned int byte;
  if (piece.size() == 6 && std::sscanf(std::string(piece).c_str(), "<0x%02X>", &byte) == 1) {
    return std::string(1, static_cast<char>(byte));
  }
  return std::string(piece);
}

}  // namespace pagoda
