#include "lib/jinja/template.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "lib/jinja/builtins.h"
#include "lib/jinja/lexer.h"
#include "lib/jinja/parser.h"

namespace pagoda::jinja {

absl::StatusOr<Template> Template::Parse(std::string_view source, const TemplateOptions& options) {
  LexerOptions lexer_options;
  lexer_options.trim_blocks = options.trim_blocks;
  lexer_options.lstrip_blocks = options.lstrip_blocks;
  ASSIGN_OR_RETURN(const std::vector<Token> tokens, Tokenize(source, lexer_options));
  ASSIGN_OR_RETURN(Body body, jinja::Parse(tokens));
  return Template(std::make_shared<const Body>(std::move(body)));
}

absl::StatusOr<std::string> Template::Render(const ValueDict& context,
                                             const RenderOptions& options) const {
  std::tm now{};
  if (options.now) {
    now = *options.now;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }
  Interpreter interp(options.limits, now);
  auto globals = std::make_shared<Scope>(nullptr);
  AddGlobals(interp, *globals);
  for (const auto& [key, value] : context.entries()) {
    if (key.is_string()) globals->Set(key.as_string(), value);
  }
  std::string out;
  RETURN_IF_ERROR(interp.Render(*body_, globals, &out));
  return out;
}

absl::StatusOr<std::tm> ParseDateTime(std::string_view text) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  const std::string s(text);
  char sep = 'T';
  const int n = std::sscanf(s.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d", &year, &month, &day, &sep, &hour,
                            &minute, &second);
  if (!(n == 3 || (n == 7 && (sep == 'T' || sep == ' '))) || month < 1 || month > 12 || day < 1 ||
      day > 31 || hour > 23 || minute > 59 || second > 60) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a date-time like 2026-11-22T00:00:00: '", s, "'"));
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  // timegm normalizes and fills the weekday and day of the year, with no time zone involved.
  const std::time_t t = timegm(&tm);
  std::tm out{};
  gmtime_r(&t, &out);
  return out;
}

}  // namespace pagoda::jinja
