#include "router/core/paused_caps.h"

#include <algorithm>
#include <string_view>
#include <tuple>

#include "absl/container/flat_hash_map.h"

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
  if (caps.max_per_connection <= 0 && caps.max_per_client <= 0) return cancel;
  std::sort(paused.begin(), paused.end(), [](const PausedRequest& a, const PausedRequest& b) {
    return std::tie(a.paused_since, a.request_id) > std::tie(b.paused_since, b.request_id);
  });
  absl::flat_hash_map<std::string_view, int64_t> per_connection, per_client;
  for (const PausedRequest& r : paused) {
    const std::string_view connection = r.peer ? r.peer->connection : std::string_view();
    const std::string_view client = r.peer ? r.peer->client : std::string_view();
    if (!Fits(per_connection, connection, r.num_sequences, caps.max_per_connection)) {
      cancel.push_back({r.request_id, PausedCap::kConnection});
    } else if (!Fits(per_client, client, r.num_sequences, caps.max_per_client)) {
      cancel.push_back({r.request_id, PausedCap::kClient});
    } else {
      if (!connection.empty()) per_connection[connection] += r.num_sequences;
      if (!client.empty()) per_client[client] += r.num_sequences;
    }
  }
  return cancel;
}

}  // namespace pagoda
