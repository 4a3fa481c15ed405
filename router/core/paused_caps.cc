#include "router/core/paused_caps.h"

#include <algorithm>
#include <string_view>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pagoda {
namespace {

// Adds `n` to `key`'s count unless that passes `cap`; whether it fit. An empty key (a peer the
// transport did not name) and a cap of 0 always fit.
bool Fits(absl::flat_hash_map<std::string_view, int64_t>& counts, std::string_view key, int n,
          int cap) {
  if (cap <= 0 || key.empty()) return true;
  return counts[key] + n <= cap;
}

}  // namespace

std::vector<PausedCancel> OverPausedCaps(std::vector<PausedRequest> paused,
                                         const PausedCaps& caps) {
  std::vector<PausedCancel> cancel;
  if (caps.max_per_connection <= 0 && caps.max_per_client <= 0 && caps.max_total <= 0) {
    return cancel;
  }
  std::sort(paused.begin(), paused.end(), [](const PausedRequest& a, const PausedRequest& b) {
    return std::tie(a.paused_since, a.request_id) > std::tie(b.paused_since, b.request_id);
  });
  absl::flat_hash_map<std::string_view, int64_t> per_connection, per_client;
  int64_t total = 0;
  for (const PausedRequest& r : paused) {
    const std::string_view connection = r.peer ? r.peer->connection : std::string_view();
    const std::string_view client = r.peer ? r.peer->client : std::string_view();
    if (!Fits(per_connection, connection, r.num_sequences, caps.max_per_connection)) {
      cancel.push_back({r.request_id, PausedCap::kConnection});
    } else if (!Fits(per_client, client, r.num_sequences, caps.max_per_client)) {
      cancel.push_back({r.request_id, PausedCap::kClient});
    } else if (caps.max_total > 0 && total + r.num_sequences > caps.max_total) {
      cancel.push_back({r.request_id, PausedCap::kRouter});
    } else {
      total += r.num_sequences;
      if (!connection.empty()) per_connection[connection] += r.num_sequences;
      if (!client.empty()) per_client[client] += r.num_sequences;
    }
  }
  return cancel;
}

PauseReview ReviewPaused(const std::vector<PauseState>& requests, absl::Time now,
                         absl::Duration stall_timeout, const PausedCaps& caps) {
  PauseReview review;
  std::vector<PausedRequest> paused;
  for (const PauseState& r : requests) {
    absl::Time& since = *r.paused_since;
    if (!r.paused) {
      since = absl::InfiniteFuture();
      continue;
    }
    if (since == absl::InfiniteFuture()) {
      since = now;
    } else if (now - since >= stall_timeout) {
      ++review.num_stalled;
      review.end.emplace_back(
          r.request_id, absl::DeadlineExceededError(absl::StrCat(
                            "the client read nothing for ", absl::FormatDuration(stall_timeout),
                            " (--stall-timeout-s): cancelled")));
      continue;
    }
    paused.push_back({.request_id = r.request_id,
                      .paused_since = since,
                      .num_sequences = r.num_sequences,
                      .peer = r.peer});
    review.num_paused += r.num_sequences;
  }
  absl::flat_hash_map<int64_t, int> sequences;
  for (const PausedRequest& p : paused) sequences[p.request_id] = p.num_sequences;
  for (const PausedCancel& c : OverPausedCaps(std::move(paused), caps)) {
    review.num_paused -= sequences[c.request_id];
    const char* holder = "connection";
    const char* flag = "--max-paused-per-connection";
    int cap = caps.max_per_connection;
    if (c.cap == PausedCap::kConnection) {
      ++review.num_over_connection_cap;
    } else if (c.cap == PausedCap::kClient) {
      ++review.num_over_client_cap;
      holder = "client";
      flag = "--max-paused-per-client";
      cap = caps.max_per_client;
    } else {
      ++review.num_over_router_cap;
      holder = "router";
      flag = "--max-paused-sequences";
      cap = caps.max_total;
    }
    review.end.emplace_back(
        c.request_id,
        absl::ResourceExhaustedError(absl::StrCat(
            "the ", holder, " holds more paused sequences (calls whose output is not read) than ",
            cap, " (", flag, "): its oldest paused call is cancelled")));
  }
  return review;
}

void ReportPauseReview(const PauseReview& review, RouterMetrics* metrics) {
  if (!review.end.empty()) {
    LOG_EVERY_N(WARNING, 100) << "cancelled " << review.num_stalled << " requests whose clients "
                              << "read nothing and " << review.end.size() - review.num_stalled
                              << " paused past a cap on paused sequences";
  }
  if (metrics == nullptr) return;
  metrics->stalled_clients->Add(review.num_stalled);
  metrics->paused_cap_connection->Add(review.num_over_connection_cap);
  metrics->paused_cap_client->Add(review.num_over_client_cap);
  metrics->paused_cap_router->Add(review.num_over_router_cap);
}

}  // namespace pagoda
