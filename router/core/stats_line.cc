#include "router/core/stats_line.h"

#include "absl/strings/str_format.h"

namespace pagoda {

StatsLine::StatsLine(const RouterMetrics* metrics, absl::Time start, absl::Duration every)
    : metrics_(metrics), every_(every) {
  last_ = Take(ClusterStats{}, start);
}

StatsLine::Mark StatsLine::Take(const ClusterStats& stats, absl::Time now) const {
  const RouterMetrics& m = *metrics_;
  return {stats,
          now,
          m.prompt_tokens->value(),
          m.generation_tokens->value(),
          m.prefix_cache_queries->value(),
          m.prefix_cache_hits->value(),
          m.spec_drafts->value(),
          m.spec_draft_tokens->value(),
          m.spec_accepted_tokens->value(),
          m.kv_transfer_blocks->value(),
          m.kv_transfer_bytes->value(),
          m.kv_transfer_saved_tokens->value(),
          m.kv_transfer_failures->value()};
}

std::optional<std::string> StatsLine::Next(const ClusterStats& stats, absl::Time now) {
  const Mark& last = last_;
  if (now - last.time <= every_ || stats.num_steps <= last.stats.num_steps) return std::nullopt;
  const Mark mark = Take(stats, now);
  const double steps = static_cast<double>(stats.num_steps - last.stats.num_steps);
  const double step_ms = (stats.step_seconds - last.stats.step_seconds) / steps * 1e3;
  const double forward_ms = (stats.forward_seconds - last.stats.forward_seconds) / steps * 1e3;
  const double seconds = absl::ToDoubleSeconds(now - last.time);
  // With drafts in the interval: how many of their tokens were kept, and tokens per verify.
  std::string details;  // drafts and transfers, when there were some
  if (mark.draft_tokens > last.draft_tokens) {
    details = absl::StrFormat(
        "; drafts: %.1f%% of %.0f tokens accepted, %.2f tokens per draft step",
        100.0 * (mark.accepted - last.accepted) / (mark.draft_tokens - last.draft_tokens),
        mark.draft_tokens - last.draft_tokens,
        1.0 + (mark.accepted - last.accepted) / (mark.drafts - last.drafts));
  }
  // With KV pulled between workers in the interval: how much, and the prefill it spared.
  if (mark.pulled_blocks > last.pulled_blocks || mark.failed > last.failed) {
    absl::StrAppendFormat(
        &details, "; KV pulled: %.0f blocks (%.1f MB), %.0f tokens spared, %.0f failed",
        mark.pulled_blocks - last.pulled_blocks, (mark.pulled_bytes - last.pulled_bytes) / 1e6,
        mark.spared - last.spared, mark.failed - last.failed);
  }
  std::string line = absl::StrFormat(
      "prompt %.1f tok/s, generation %.1f tok/s, running %d, waiting %d, KV usage %.1f%%, "
      "prefix hit rate %.1f%%; steps %.0f, step %.2f ms (forward %.2f, outside %.2f)%s",
      (mark.prompt - last.prompt) / seconds, (mark.generated - last.generated) / seconds,
      stats.num_running, stats.num_waiting,
      stats.num_blocks ? 100.0 * stats.num_used_blocks / stats.num_blocks : 0.0,
      mark.queries > last.queries ? 100.0 * (mark.hits - last.hits) / (mark.queries - last.queries)
                                  : 0.0,
      steps, step_ms, forward_ms, step_ms - forward_ms, details);
  last_ = mark;
  return line;
}

}  // namespace pagoda
