// Whether pulling K/V from a peer pays against computing it here (issue 28): pure arithmetic
// over measured rates, so it can be tested without workers.
//
//   pull:      latency + bytes / link rate     (both measured from the pulls so far)
//   recompute: tokens × forward seconds per prompt token on the receiving worker
//              (measured from its steps of 64+ tokens; unknown until it ran some: then pull)
//
// Thread-compatible: the Cluster calls it under its lock.
#ifndef PAGODA_ROUTER_TRANSFER_TRANSFER_COST_H_
#define PAGODA_ROUTER_TRANSFER_TRANSFER_COST_H_

#include <cstdint>

namespace pagoda {

class TransferCost {
 public:
  // A pull of `bytes` that took `seconds`, start to end.
  void ObservePull(int64_t bytes, double seconds);
  // The expected time to pull `bytes`.
  double PullSeconds(int64_t bytes) const;
  // Whether pulling `bytes` beats computing `num_tokens` at `seconds_per_token` (<= 0: not
  // measured yet, and a pull is assumed to pay: K/V moves at GB/s, a CPU computes it at
  // thousands of tokens per second at best).
  bool Pays(int64_t bytes, int num_tokens, double seconds_per_token) const;

  double latency_seconds() const { return latency_seconds_; }
  double bytes_per_second() const { return bytes_per_second_; }

 private:
  // Until measured: a gRPC stream on loopback or a LAN (BENCHMARKS §23: 45 MB in ~50 ms).
  double latency_seconds_ = 2e-3;
  double bytes_per_second_ = 5e8;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_TRANSFER_TRANSFER_COST_H_
