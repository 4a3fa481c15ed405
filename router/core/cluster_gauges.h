// The router's gauges of the current state (running, waiting and paused sequences, workers, the
// worker loops' totals, KV use per worker), read from the Cluster at each scrape.
#ifndef PAGODA_ROUTER_CORE_CLUSTER_GAUGES_H_
#define PAGODA_ROUTER_CORE_CLUSTER_GAUGES_H_

#include "common/process/metrics.h"
#include "router/core/cluster.h"

namespace pagoda {

// Registers the gauge families; `cluster` must outlive `registry`'s scrapes.
void AddClusterGauges(MetricsRegistry* registry, const Cluster* cluster);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_CLUSTER_GAUGES_H_
