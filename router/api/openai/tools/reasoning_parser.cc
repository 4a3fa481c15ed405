#include "router/api/openai/tools/reasoning_parser.h"

namespace pagoda {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view StripLeading(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}

std::string_view StripTrailing(std::string_view s) {
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// The output as far as it is known: the block's text and the answer's. With `final` false,
// what may still become a marker is held back.
struct Parts {
  bool has_reasoning = false;
  std::string_view reasoning, content;
};

Parts Split(ReasoningFormat format, bool starts_inside, std::string_view text, bool final) {
  Parts parts;
  if (format == ReasoningFormat::kNone) {
    parts.content = text;
    return parts;
  }
  size_t i = 0;
  if (!starts_inside) {
    const std::string_view rest = StripLeading(text);
    if (!final && kOpen.starts_with(rest)) return parts;  // may be the opening tag
    if (!rest.starts_with(kOpen)) {
      parts.content = text;
      return parts;
    }
    i = text.size() - rest.size() + kOpen.size();
  }
  parts.has_reasoning = true;
  const size_t close = text.find(kClose, i);
  if (close == std::string_view::npos) {
    parts.reasoning = text.substr(i);
    if (!final) {
      // Hold back what may be the start of the closing tag.
      for (size_t n = std::min(parts.reasoning.size(), kClose.size() - 1); n > 0; --n) {
        if (parts.reasoning.ends_with(kClose.substr(0, n))) {
          parts.reasoning.remove_suffix(n);
          break;
        }
      }
    }
    return parts;
  }
  parts.reasoning = text.substr(i, close - i);
  parts.content = StripLeading(text.substr(close + kClose.size()));
  return parts;
}

}  // namespace

bool StartsInReasoning(ReasoningFormat format, std::string_view prompt) {
  if (format == ReasoningFormat::kNone) return false;
  const std::string_view end = StripTrailing(prompt);
  if (end.ends_with(kOpen)) return true;
  return format == ReasoningFormat::kDeepSeekR1 && !end.ends_with(kClose);
}

ReasoningSplit SplitReasoning(ReasoningFormat format, bool starts_inside, std::string_view text) {
  const Parts parts = Split(format, starts_inside, text, /*final=*/true);
  ReasoningSplit out;
  if (parts.has_reasoning) out.reasoning = std::string(parts.reasoning);
  out.content = std::string(parts.content);
  return out;
}

ReasoningStream::Delta ReasoningStream::Add(std::string_view text) {
  text_.append(text);
  return Emit(/*final=*/false);
}

ReasoningStream::Delta ReasoningStream::Finish() { return Emit(/*final=*/true); }

ReasoningStream::Delta ReasoningStream::Emit(bool final) {
  const Parts parts = Split(format_, starts_inside_, text_, final);
  Delta out;
  if (parts.reasoning.size() > reasoning_sent_) {
    out.reasoning = std::string(parts.reasoning.substr(reasoning_sent_));
    reasoning_sent_ = parts.reasoning.size();
  }
  if (parts.content.size() > content_sent_) {
    out.content = std::string(parts.content.substr(content_sent_));
    content_sent_ = parts.content.size();
  }
  return out;
}

}  // namespace pagoda
