// Where a sequence is in its grammar: the set of parse stacks that the bytes so far leave
// alive (llama.cpp's stacks), as a graph-structured stack whose frames are shared between
// stacks. Not thread-safe: one per sequence; the Grammar it reads is shared.
//
// A frame is (position, parent): the element the frame reads next and the frame to return
// to. A stack is named by its top frame; the top always sits on a terminal (kBytes, kToken,
// kNotToken), or is kComplete (the whole grammar has been read) or kContext (token_masker.h's
// stand-in for frames it does not look at). A frame whose rule ends after a call is not kept (a
// tail call), so `x*` runs in constant stack depth.
//
//   top -> (pos of [0-9], parent) -> (pos after `digits` in `number`, parent) -> kComplete
#ifndef PAGODA_LIB_GRAMMAR_GRAMMAR_MATCHER_H_
#define PAGODA_LIB_GRAMMAR_GRAMMAR_MATCHER_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "lib/grammar/grammar.h"

namespace pagoda {

// Bounds on one sequence's state; a grammar that passes them fails the sequence
// (RESOURCE_EXHAUSTED) instead of eating memory.
struct MatcherLimits {
  int max_stacks = 512;      // live stacks after one byte (ambiguity)
  int max_frames = 1 << 16;  // frames kept between bytes (nesting times stacks)
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar, MatcherLimits limits = {});

  // Consumes `bytes` if the grammar allows them all next; otherwise leaves the state as it was
  // and returns false. Also false once status() is not OK. Token terminals take no bytes.
  bool Accept(std::string_view bytes);
  // Consumes token `token`, whose text is `bytes` ("" for a special token, which only a token
  // terminal takes): the stacks its bytes lead to and those a token terminal naming it (or
  // negating another) leads to. As Accept otherwise.
  bool AcceptToken(int token, std::string_view bytes);
  // Whether the bytes so far are a whole sentence of the grammar (EOS may come now).
  bool IsComplete() const;
  // Whether any byte may come next.
  bool CanContinue() const;
  // RESOURCE_EXHAUSTED once a limit was passed; the sequence cannot go on.
  const absl::Status& status() const { return status_; }

  const Grammar& grammar() const { return *grammar_; }

  // The two sentinel frames at the bottom of stacks.
  static constexpr int32_t kComplete = 0;  // the empty stack
  static constexpr int32_t kContext = 1;   // frames below were not looked at

 private:
  friend class TokenMasker;
  struct Frame {
    int32_t pos;     // an element index; -1 for the two sentinels
    int32_t parent;  // a frame index
  };

  // The frame (pos, parent), shared when it exists.
  int32_t Intern(int32_t pos, int32_t parent);
  // Adds to `tops` every stack that reading from `pos` with `parent` below reaches before its
  // next byte (through calls, returns and empty alternatives).
  void Expand(int32_t pos, int32_t parent, std::vector<int32_t>* tops);
  // The stacks after `byte` from `from` (kContext stays out: it reads nothing itself).
  // False when a limit was passed.
  bool Advance(const std::vector<int32_t>& from, uint8_t byte, std::vector<int32_t>* to);
  // False (status_ set, `tops` cleared) when `tops` or the frames pass the limits.
  bool WithinLimits(std::vector<int32_t>* tops);
  // Frames beyond `size` were made for a look-ahead and are dropped.
  void Truncate(size_t size);
  // Keeps only the frames the current stacks use.
  void Compact();

  std::shared_ptr<const Grammar> grammar_;
  const Grammar::Element* elements_;
  MatcherLimits limits_;
  std::vector<Frame> frames_;
  absl::flat_hash_map<uint64_t, int32_t> index_;  // (pos, parent) -> frame
  std::vector<int32_t> tops_;                     // the live stacks
  std::vector<int32_t> scratch_, work_;
  absl::Status status_;
};

}  // namespace pagoda

#endif  // PAGODA_LIB_GRAMMAR_GRAMMAR_MATCHER_H_
