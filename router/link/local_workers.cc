#include "router/link/local_workers.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/dtype_flags.h"
#include "common/process/secret.h"
#include "glog/logging.h"

namespace pagoda {
namespace {

// Starts `binary` with `env` added to this process's environment. Between fork and exec only
// async-signal-safe calls: the router has threads by now.
pid_t SpawnProcess(const std::string& binary, const std::vector<std::string>& args,
                   const std::vector<std::string>& env) {
  std::vector<char*> argv = {const_cast<char*>(binary.c_str())};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // local workers die with their router, even a killed one
    execve(binary.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

absl::Status CheckLocalWorkersOptions(const LocalWorkersOptions& options) {
  if (auto d = ParseWeightDtypeFlag("worker-weight-dtype", options.weight_dtype); !d.ok()) {
    return d.status();
  }
  if (auto d = ParseKvDtypeFlag("worker-kv-cache-dtype", options.kv_cache_dtype); !d.ok()) {
    return d.status();
  }
  if (auto d = ParseComputeDtypeFlag("worker-compute-dtype", options.compute_dtype); !d.ok()) {
    return d.status();
  }
  return absl::OkStatus();
}

std::vector<std::string> LocalWorkerArgs(const LocalWorkersOptions& options,
                                         const LocalWorkersRouter& router, int index) {
  const int num_workers = std::max(1, options.num_workers);
  // Every model's workers share the machine.
  const int num_on_machine = num_workers * std::max(1, router.num_models);
  const int threads =
      options.threads > 0
          ? options.threads
          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / num_on_machine);
  // With several models, each one's workers are told apart by its name.
  const std::string model_part =
      router.num_models > 1 ? absl::StrCat(router.model_name, "-") : std::string();
  std::vector<std::string> args = {
      absl::StrCat("--router=127.0.0.1:", router.worker_port),
      "--model=" + router.model,
      "--kv_cache_mb=" + options.kv_cache_mb,
      absl::StrCat("--kv_cache_memory_fraction=", 0.5 / num_on_machine),
      "--kv_cache_dtype=" + options.kv_cache_dtype,
      absl::StrCat("--threads=", threads),
      "--weight_dtype=" + options.weight_dtype,
      "--compute_dtype=" + options.compute_dtype,
      absl::StrCat("--max_num_batched_tokens=", router.max_num_batched_tokens),
      absl::StrCat("--max_num_seqs=", router.max_num_seqs),
      absl::StrCat("--name=local-", model_part, index)};
  // Workers of one machine move K/V over loopback (issue 28), behind the worker token.
  if (num_workers > 1) args.push_back("--kv_transfer_port=-1");
  if (!router.rope_scaling.empty()) args.push_back("--rope_scaling=" + router.rope_scaling);
  for (const std::string& module : router.lora_modules) args.push_back("--lora_modules=" + module);
  if (options.max_loras > 0) args.push_back(absl::StrCat("--max_loras=", options.max_loras));
  if (options.max_cpu_loras > 0) {
    args.push_back(absl::StrCat("--max_cpu_loras=", options.max_cpu_loras));
  }
  if (!options.lora_dir.empty()) args.push_back("--lora_dir=" + options.lora_dir);
  if (options.lora_dtype != "auto") args.push_back("--lora_dtype=" + options.lora_dtype);
  if (!options.kv_cache_dir.empty()) {
    const std::string model_dir =
        router.num_models > 1 ? absl::StrCat("/", router.model_name) : std::string();
    args.push_back(
        absl::StrCat("--kv_cache_dir=", options.kv_cache_dir, model_dir, "/worker-", index));
  }
  return args;
}

absl::StatusOr<std::unique_ptr<LocalWorkers>> LocalWorkers::Start(
    const LocalWorkersOptions& options, const LocalWorkersRouter& router) {
  if (absl::Status s = CheckLocalWorkersOptions(options); !s.ok()) return s;
  std::unique_ptr<LocalWorkers> workers(new LocalWorkers);
  const std::vector<std::string> env = {absl::StrCat(kWorkerTokenEnv, "=", router.worker_token)};
  workers->save_on_stop_ = !options.kv_cache_dir.empty();
  for (int i = 0; i < options.num_workers; ++i) {
    const pid_t pid = SpawnProcess(options.binary, LocalWorkerArgs(options, router, i), env);
    if (pid < 0) return absl::InternalError(absl::StrCat("cannot start local worker ", i));
    workers->pids_.push_back(pid);
    LOG(INFO) << "spawned worker " << i << " (pid " << pid << ")"
              << (router.num_models > 1 ? absl::StrCat(" for ", router.model_name) : "");
  }
  return workers;
}

LocalWorkers::~LocalWorkers() {
  if (save_on_stop_) {
    // A worker's drain saves its blocks to its directory within 10 s (KvDiskCache::SaveAll);
    // the router is going, so it has no sequences to wait for.
    constexpr absl::Duration kSaveGrace = absl::Seconds(12);
    for (const pid_t pid : pids_) {
      if (pid > 0) kill(pid, SIGTERM);
    }
    const absl::Time give_up = absl::Now() + kSaveGrace;
    for (pid_t& pid : pids_) {
      while (pid > 0 && absl::Now() < give_up) {
        if (waitpid(pid, nullptr, WNOHANG) == pid)
          pid = -1;
        else
          absl::SleepFor(absl::Milliseconds(20));
      }
    }
  }
  for (const pid_t pid : pids_) {
    if (pid <= 0) continue;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
}

void LocalWorkers::Reap() {
  for (size_t i = 0; i < pids_.size(); ++i) {
    int status = 0;
    if (pids_[i] <= 0 || waitpid(pids_[i], &status, WNOHANG) != pids_[i]) continue;
    LOG(WARNING) << "local worker " << i << " (pid " << pids_[i] << ") "
                 << (WIFEXITED(status) ? absl::StrCat("exited with code ", WEXITSTATUS(status))
                                       : absl::StrCat("was killed by signal ", WTERMSIG(status)));
    pids_[i] = -1;
  }
}

}  // namespace pagoda
