#include "router/api/openai/tools/tool_call_parser.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "nlohmann/json.hpp"
#include "router/api/openai/tools/json_scan.h"

namespace pagoda {
namespace {

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";

// One piece of an output, as far as the text goes: content, or a call (whole or cut off).
struct Item {
  bool call = false;
  std::string_view content;
  std::optional<std::string> name;  // decoded, once its string is whole
  bool has_arguments = false;       // the arguments object has begun
  std::string_view arguments;       // as much of it as is in
  bool complete = false;
};

// The length of the longest end of `text` that begins `marker` (and is shorter than it): text
// that may still become the marker.
size_t MarkerStartAtEnd(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

// What a stream's scans keep between its tokens, so that each reads only the new text (the
// stream's text only grows, so what a scan found in it stays true): each JSON value's scanner,
// by where the value starts, and how far each marker search got, by marker and start.
struct ToolCallStream::ScanMemo {
  struct Search {
    size_t from;                            // no match starts before this
    size_t found = std::string_view::npos;  // the first match, once there is one
  };
  absl::flat_hash_map<size_t, JsonScanner> values;
  absl::flat_hash_map<std::pair<const char*, size_t>, Search> searches;
};

namespace {

using ScanMemo = ToolCallStream::ScanMemo;

// ScanJsonValue, resumed where the memo's last scan of the same value stopped.
ScanResult ScanValue(ScanMemo* memo, std::string_view text, size_t* pos) {
  if (memo == nullptr) return ScanJsonValue(text, pos);
  JsonScanner& scanner = memo->values.try_emplace(*pos, *pos).first->second;
  return scanner.Scan(text, pos);
}

// text.find(marker, pos), reading only what the memo's last search of it did not.
size_t Find(ScanMemo* memo, std::string_view text, std::string_view marker, size_t pos) {
  if (memo == nullptr) return text.find(marker, pos);
  ScanMemo::Search& s =
      memo->searches.try_emplace(std::make_pair(marker.data(), pos), ScanMemo::Search{pos})
          .first->second;
  if (s.found != std::string_view::npos) return s.found;
  const size_t at = text.find(marker, s.from);
  if (at != std::string_view::npos) {
    s.found = at;
  } else if (text.size() >= marker.size()) {
    s.from = std::max(pos, text.size() - marker.size() + 1);
  }
  return at;
}

// A JSON string's value; nullopt when it is not one (the scanner checked its syntax only).
std::optional<std::string> DecodeString(std::string_view quoted) {
  nlohmann::json j = nlohmann::json::parse(quoted, nullptr, /*allow_exceptions=*/false);
  if (!j.is_string()) return std::nullopt;
  return j.get<std::string>();
}

// {"name": "f", "arguments": {...}} at text[pos] (keys in any order, others ignored; with
// `name_first`, "name" must come first, so that other JSON is told apart at its first key).
// Returns the scan's state; `item` gets what is in so far, `*end` the position past a whole
// object. Whole but without a name or an arguments object is invalid.
ScanResult ScanCall(ScanMemo* memo, std::string_view text, size_t pos, bool name_first,
                    std::string_view arguments_key, Item* item, size_t* end) {
  item->call = true;
  size_t i = pos;
  if (i >= text.size()) return ScanResult::kIncomplete;
  if (text[i] != '{') return ScanResult::kInvalid;
  ++i;
  for (bool first = true;; first = false) {
    SkipJsonSpace(text, &i);
    if (i >= text.size()) return ScanResult::kIncomplete;
    if (text[i] != '"') return ScanResult::kInvalid;
    const size_t key_begin = i;
    if (ScanResult r = ScanValue(memo, text, &i); r != ScanResult::kComplete) return r;
    const std::string_view key = text.substr(key_begin + 1, i - key_begin - 2);
    if (name_first && first && key != "name") return ScanResult::kInvalid;
    SkipJsonSpace(text, &i);
    if (i >= text.size()) return ScanResult::kIncomplete;
    if (text[i] != ':') return ScanResult::kInvalid;
    ++i;
    SkipJsonSpace(text, &i);
    if (i >= text.size()) return ScanResult::kIncomplete;
    const size_t value_begin = i;
    const bool is_name = key == "name";
    const bool is_arguments = key == arguments_key;
    if ((is_name && text[i] != '"') || (is_arguments && text[i] != '{')) {
      return ScanResult::kInvalid;
    }
    const ScanResult r = ScanValue(memo, text, &i);
    if (r == ScanResult::kInvalid) return r;
    const size_t value_end = r == ScanResult::kComplete ? i : text.size();
    if (is_arguments) {
      item->has_arguments = true;
      item->arguments = text.substr(value_begin, value_end - value_begin);
    }
    if (r == ScanResult::kIncomplete) return r;
    if (is_name) {
      item->name = DecodeString(text.substr(value_begin, value_end - value_begin));
      if (!item->name.has_value() || item->name->empty()) return ScanResult::kInvalid;
    }
    SkipJsonSpace(text, &i);
    if (i >= text.size()) return ScanResult::kIncomplete;
    if (text[i] == '}') break;
    if (text[i] != ',') return ScanResult::kInvalid;
    ++i;
  }
  if (!item->name.has_value() || !item->has_arguments) return ScanResult::kInvalid;
  item->complete = true;
  *end = i + 1;
  return ScanResult::kComplete;
}

void AddContent(std::string_view text, std::vector<Item>* items) {
  if (text.empty()) return;
  Item item;
  item.content = text;
  items->push_back(item);
}

// Text up to the next `marker` is content; held back at its end, unless `final`, what may
// still become the marker. Returns the marker's position, or npos.
size_t ContentUntil(ScanMemo* memo, std::string_view text, size_t pos, std::string_view marker,
                    bool final, std::vector<Item>* items) {
  const size_t at = Find(memo, text, marker, pos);
  std::string_view content = text.substr(pos, at == std::string_view::npos ? at : at - pos);
  if (at == std::string_view::npos && !final) {
    content.remove_suffix(MarkerStartAtEnd(content, marker));
  }
  AddContent(content, items);
  return at;
}

void ScanHermes(ScanMemo* memo, std::string_view text, bool final, std::vector<Item>* items) {
  for (size_t pos = 0;;) {
    const size_t at = ContentUntil(memo, text, pos, kHermesOpen, final, items);
    if (at == std::string_view::npos) return;
    size_t i = at + kHermesOpen.size(), end = 0;
    SkipJsonSpace(text, &i);
    Item call;
    const ScanResult r = ScanCall(memo, text, i, /*name_first=*/false, "arguments", &call, &end);
    if (r == ScanResult::kIncomplete && !final) {
      items->push_back(std::move(call));
      return;
    }
    if (r != ScanResult::kComplete) {
      // Not a call: the text through its closing tag (or to the end) stays content.
      const size_t close = Find(memo, text, kHermesClose, at);
      if (close == std::string_view::npos) return AddContent(text.substr(at), items);
      pos = close + kHermesClose.size();
      AddContent(text.substr(at, pos - at), items);
      continue;
    }
    items->push_back(std::move(call));
    SkipJsonSpace(text, &end);
    const std::string_view rest = text.substr(end);
    if (rest.starts_with(kHermesClose)) {
      pos = end + kHermesClose.size();
    } else if (kHermesClose.starts_with(rest)) {
      return;  // the text ends in the closing tag, or without it (cut by a stop)
    } else {
      pos = end;  // no closing tag: what follows is content
    }
  }
}

void ScanLlama3(ScanMemo* memo, std::string_view text, bool final, std::vector<Item>* items) {
  size_t i = 0;
  SkipJsonSpace(text, &i);
  if (!final && kPythonTag.starts_with(text.substr(i))) return;  // may be the tag
  if (text.substr(i).starts_with(kPythonTag)) {
    i += kPythonTag.size();
    SkipJsonSpace(text, &i);
  }
  if (i >= text.size()) {
    if (final) AddContent(text, items);
    return;
  }
  std::vector<Item> calls;
  for (;;) {
    Item call;
    size_t end = 0;
    const ScanResult r = ScanCall(memo, text, i, /*name_first=*/true, "parameters", &call, &end);
    if (r == ScanResult::kIncomplete && !final) {
      calls.push_back(std::move(call));
      break;
    }
    if (r != ScanResult::kComplete) {
      // Plain text, or JSON that is not a call: content from where the calls stopped.
      AddContent(calls.empty() ? text : text.substr(i), items);
      break;
    }
    calls.push_back(std::move(call));
    i = end;
    SkipJsonSpace(text, &i);
    if (i < text.size() && text[i] == ';') {
      ++i;
      SkipJsonSpace(text, &i);
      if (i < text.size()) continue;
    }
    if (i < text.size()) AddContent(text.substr(i), items);
    break;
  }
  items->insert(items->begin(), calls.begin(), calls.end());
}

bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == '-' || c == '.'; }

void ScanMistral(ScanMemo* memo, std::string_view text, bool final, std::vector<Item>* items) {
  for (size_t pos = 0;;) {
    const size_t at = ContentUntil(memo, text, pos, kMistralCalls, final, items);
    if (at == std::string_view::npos) return;
    size_t i = at + kMistralCalls.size();
    SkipJsonSpace(text, &i);
    if (i >= text.size()) {
      if (final) AddContent(text.substr(at), items);
      return;
    }
    if (text[i] == '[') {  // [{"name": .., "arguments": {..}}, ...]
      ++i;
      for (bool first = true;; first = false) {
        SkipJsonSpace(text, &i);
        Item call;
        size_t end = 0;
        const ScanResult r =
            ScanCall(memo, text, i, /*name_first=*/false, "arguments", &call, &end);
        if (r == ScanResult::kIncomplete && !final) return items->push_back(std::move(call));
        if (r != ScanResult::kComplete) {
          return AddContent(text.substr(first ? at : i), items);
        }
        items->push_back(std::move(call));
        i = end;
        SkipJsonSpace(text, &i);
        if (i >= text.size()) return;  // cut off after a whole call
        if (text[i] == ',') {
          ++i;
          continue;
        }
        if (text[i] == ']') ++i;
        break;
      }
      pos = i;
      continue;
    }
    // Mistral Small 3.2: [TOOL_CALLS]name[ARGS]{...}
    size_t name_end = i;
    while (name_end < text.size() && IsNameChar(text[name_end])) ++name_end;
    const std::string_view after = text.substr(name_end);
    if (name_end == text.size() || (!final && kMistralArgs.starts_with(after))) {
      if (final) AddContent(text.substr(at), items);
      return;  // the name, or [ARGS], is still coming
    }
    if (name_end == i || !after.starts_with(kMistralArgs)) {
      return AddContent(text.substr(at), items);
    }
    Item call;
    call.call = true;
    call.name = std::string(text.substr(i, name_end - i));
    size_t j = name_end + kMistralArgs.size();
    SkipJsonSpace(text, &j);
    const size_t args_begin = j;
    const ScanResult r =
        j < text.size() && text[j] != '{' ? ScanResult::kInvalid : ScanValue(memo, text, &j);
    if (r == ScanResult::kInvalid || (r == ScanResult::kIncomplete && final)) {
      return AddContent(text.substr(at), items);
    }
    call.has_arguments = true;
    call.arguments =
        text.substr(args_begin, (r == ScanResult::kComplete ? j : text.size()) - args_begin);
    call.complete = r == ScanResult::kComplete;
    items->push_back(std::move(call));
    if (r != ScanResult::kComplete) return;
    pos = j;
  }
}

std::vector<Item> Scan(ToolCallFormat format, std::string_view text, bool final,
                       ScanMemo* memo = nullptr) {
  std::vector<Item> items;
  switch (format) {
    case ToolCallFormat::kNone:
      AddContent(text, &items);
      break;
    case ToolCallFormat::kHermes:
      ScanHermes(memo, text, final, &items);
      break;
    case ToolCallFormat::kLlama3Json:
      ScanLlama3(memo, text, final, &items);
      break;
    case ToolCallFormat::kMistral:
      ScanMistral(memo, text, final, &items);
      break;
  }
  return items;
}

bool IsBlank(std::string_view s) {
  return absl::c_all_of(s, [](char c) { return absl::ascii_isspace(c); });
}

}  // namespace

ParsedToolCalls ParseToolCalls(ToolCallFormat format, std::string_view text, int max_calls) {
  ParsedToolCalls out;
  std::string content;
  for (const Item& item : Scan(format, text, /*final=*/true)) {
    if (!item.call) {
      content.append(item.content);
    } else if (static_cast<int>(out.calls.size()) < max_calls) {
      out.calls.push_back({NewToolCallId(format), *item.name, std::string(item.arguments)});
    }
  }
  if (out.calls.empty() || !IsBlank(content)) out.content = std::move(content);
  return out;
}

ToolCallStream::ToolCallStream(ToolCallFormat format, int max_calls)
    : format_(format), max_calls_(max_calls), memo_(std::make_unique<ScanMemo>()) {}

ToolCallStream::~ToolCallStream() = default;

ToolCallStreamDelta ToolCallStream::Add(std::string_view text) {
  text_.append(text);
  return Emit(/*final=*/false);
}

ToolCallStreamDelta ToolCallStream::Finish() { return Emit(/*final=*/true); }

ToolCallStreamDelta ToolCallStream::Emit(bool final) {
  ToolCallStreamDelta out;
  const std::vector<Item> items = Scan(format_, text_, final, memo_.get());
  // The content is the items' pieces in order, and grows only at its end (what may change is
  // held back), so only its bytes past the last Emit's are read.
  size_t length = 0;
  for (const Item& item : items) {
    if (!item.call) length += item.content.size();
  }
  auto for_each_byte_from = [&](size_t from, auto&& f) {
    size_t at = 0;
    for (const Item& item : items) {
      if (item.call) continue;
      const size_t n = item.content.size();
      if (at + n > from) {
        for (size_t k = from > at ? from - at : 0; k < n; ++k) f(at + k, item.content[k]);
      }
      at += n;
    }
  };
  if (length > content_seen_) {
    for_each_byte_from(content_seen_, [&](size_t at, char c) {
      if (!absl::ascii_isspace(c)) content_solid_ = at + 1;
    });
    content_seen_ = length;
  }
  int num_calls = 0;
  for (const Item& item : items) {
    if (!item.call) continue;
    // A call is announced once its name and its arguments' start are in: calls come in order.
    if (num_calls >= max_calls_ || !item.name.has_value() || !item.has_arguments) continue;
    const int index = num_calls++;
    if (index >= static_cast<int>(calls_.size())) calls_.push_back({NewToolCallId(format_)});
    Sent& sent = calls_[index];
    ToolCallDelta delta;
    delta.index = index;
    if (!sent.announced) {
      delta.id = sent.id;
      delta.name = *item.name;
      sent.announced = true;
    }
    if (item.arguments.size() > sent.arguments) {
      delta.arguments = std::string(item.arguments.substr(sent.arguments));
      sent.arguments = item.arguments.size();
    }
    if (!delta.name.empty() || !delta.arguments.empty()) out.calls.push_back(std::move(delta));
  }
  // Trailing whitespace waits: it is dropped when only calls follow.
  size_t ready = content_solid_;
  if (final) ready = !calls_.empty() && content_solid_ == 0 ? 0 : length;
  if (ready > content_sent_) {
    out.content.reserve(ready - content_sent_);
    for_each_byte_from(content_sent_, [&](size_t at, char c) {
      if (at < ready) out.content.push_back(c);
    });
    content_sent_ = ready;
  }
  return out;
}

}  // namespace pagoda
