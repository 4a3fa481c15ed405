#include "lib/grammar/integer_range.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pagoda {
namespace {

constexpr int kMaxDigits = 16;

std::string Digits(char lo, char hi) {
  return lo == hi ? absl::StrCat("\"", std::string(1, lo), "\"")
                  : absl::StrCat("[", std::string(1, lo), "-", std::string(1, hi), "]");
}

// Digit strings of one length from a to b (a <= b).
std::string SameLength(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  const size_t n = a.size() - 1;
  const std::string ra = a.substr(1), rb = b.substr(1);
  if (a[0] == b[0]) {
    return n == 0 ? Digits(a[0], a[0]) : absl::StrCat(Digits(a[0], a[0]), " ", SameLength(ra, rb));
  }
  std::vector<std::string> alts;
  const auto any = [n] { return n == 0 ? std::string() : absl::StrCat(" [0-9]{", n, "}"); };
  char start = a[0], end = b[0];
  if (ra.find_first_not_of('0') != std::string::npos) {
    alts.push_back(absl::StrCat(Digits(a[0], a[0]), " ", SameLength(ra, std::string(n, '9'))));
    ++start;
  }
  const bool split_end = rb.find_first_not_of('9') != std::string::npos;
  if (split_end) --end;
  if (start <= end) alts.push_back(absl::StrCat(Digits(start, end), any()));
  if (split_end) {
    alts.push_back(absl::StrCat(Digits(b[0], b[0]), " ", SameLength(std::string(n, '0'), rb)));
  }
  return alts.size() == 1 ? alts[0] : absl::StrCat("(", absl::StrJoin(alts, " | "), ")");
}

int64_t Pow10(int n) {
  int64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}

// Non-negative integers from lo to hi (hi absent: any number of digits up to the cap).
std::string Natural(int64_t lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  const int lo_len = absl::StrCat(lo).size();
  const int hi_len = hi ? absl::StrCat(*hi).size() : kMaxDigits;
  for (int len = lo_len; len <= hi_len; ++len) {
    const int64_t a = std::max(lo, len == 1 ? 0 : Pow10(len - 1));
    const int64_t b = hi ? std::min(*hi, Pow10(len) - 1) : Pow10(len) - 1;
    if (!hi && len > lo_len) {  // every longer length whole, in one piece
      alts.push_back(absl::StrCat("[1-9] [0-9]{", len - 1, ",", kMaxDigits - 1, "}"));
      break;
    }
    if (a <= b) alts.push_back(SameLength(absl::StrCat(a), absl::StrCat(b)));
  }
  return alts.size() == 1 ? alts[0] : absl::StrCat("(", absl::StrJoin(alts, " | "), ")");
}

}  // namespace

std::string IntegerRangeGbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  if (!lo || *lo < 0) {  // negatives: "-" and a magnitude from max(1, -hi) to -lo
    const int64_t min_mag = hi && *hi < 0 ? -*hi : 1;
    std::optional<int64_t> max_mag;
    if (lo) max_mag = -*lo;
    alts.push_back(absl::StrCat("\"-\" ", Natural(min_mag, max_mag)));
  }
  if (!hi || *hi >= 0) alts.push_back(Natural(lo && *lo > 0 ? *lo : 0, hi));
  return absl::StrJoin(alts, " | ");
}

}  // namespace pagoda
