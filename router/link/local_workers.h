// --spawn-workers: pagoda-worker processes on this machine, started by the router and gone
// with it (the one-command deployment). They dial the worker port on 127.0.0.1 with the
// cluster's token, which they get in their environment: a command line is visible to any local
// user. They share the machine: the cores, and (kv_cache_mb auto) the worker's default half of
// the memory available, each its part.
//
// Thread-compatible: one thread calls Reap; the destructor kills the workers.
#ifndef PAGODA_ROUTER_LINK_LOCAL_WORKERS_H_
#define PAGODA_ROUTER_LINK_LOCAL_WORKERS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pagoda {

struct LocalWorkersOptions {
  int num_workers = 0;
  std::string binary = "pagoda-worker";  // the worker executable's path
  std::string kv_cache_mb = "auto";      // each one's --kv-cache-mb
  std::string weight_dtype = "auto";     // each one's --weight-dtype
  std::string kv_cache_dtype = "auto";   // each one's --kv-cache-dtype
  std::string compute_dtype = "auto";    // each one's --compute-dtype
  int threads = 0;                       // each one's --threads; 0 = the cores split between them
  // --worker-kv-cache-dir: worker i keeps its blocks in kv_cache_dir/worker-i (its own: a
  // directory takes one live worker; kv_cache_dir/<model>/worker-i with several models);
  // "" = off.
  std::string kv_cache_dir = {};
  // LoRA adapters (issue 39): each one's --max-loras and --max-cpu-loras (0: the worker's
  // default) and --lora-dir ("": the directories of the adapters' paths).
  int max_loras = 0;
  int max_cpu_loras = 0;
  std::string lora_dir = {};
  std::string lora_dtype = "auto";  // --lora-dtype
};

// What every local worker is told about the router it serves.
struct LocalWorkersRouter {
  std::string model;         // its path
  std::string rope_scaling;  // --rope-scaling, "" for none
  // With several models served, each one's workers are named local-<model_name>-i and keep
  // their blocks under kv_cache_dir/<model_name>/, and all share the machine.
  std::string model_name;
  int num_models = 1;
  int worker_port = 0;
  std::string worker_token;  // "": none (an insecure worker port)
  int max_num_batched_tokens = 0;
  int max_num_seqs = 0;
  // The model's LoRA adapters, NAME=PATH each: every worker's --lora-modules.
  std::vector<std::string> lora_modules = {};
};

// INVALID_ARGUMENT naming the router's flag (--worker-weight-dtype, --worker-kv-cache-dtype)
// when a worker would refuse its value, so a typo stops the router rather than every worker.
absl::Status CheckLocalWorkersOptions(const LocalWorkersOptions& options);

// The command line of local worker `index` (without the binary).
std::vector<std::string> LocalWorkerArgs(const LocalWorkersOptions& options,
                                         const LocalWorkersRouter& router, int index);

class LocalWorkers {
 public:
  // Starts options.num_workers workers (none: an empty set). INVALID_ARGUMENT as
  // CheckLocalWorkersOptions; INTERNAL when a process cannot be forked (those started are
  // killed). Call it on a thread that outlives them: the kernel kills them when the thread
  // that forked them ends (PR_SET_PDEATHSIG), so they die with a router that was killed.
  static absl::StatusOr<std::unique_ptr<LocalWorkers>> Start(const LocalWorkersOptions& options,
                                                             const LocalWorkersRouter& router);
  // Kills the workers still running and waits for them. With a KV cache directory they are
  // stopped first (SIGTERM: each writes its cached blocks there, at most 10 s) and killed only
  // if still running after kSaveGrace.
  ~LocalWorkers();

  // Collects the workers that exited (no zombies), logging how. Call it periodically.
  void Reap();

 private:
  LocalWorkers() = default;

  std::vector<pid_t> pids_;    // -1 once reaped
  bool save_on_stop_ = false;  // --worker-kv-cache-dir was given
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_LINK_LOCAL_WORKERS_H_
