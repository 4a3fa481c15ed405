// The LoRA adapters one step may hold (issue 39): a worker runs at most max_loras distinct
// adapters in a step (its --max-loras, WorkerInfo::max_loras) and refuses a step over it. Every
// running sequence may be in every step, so the scheduler admits a waiting sequence only while
// the running sequences' distinct adapters, its own with them, stay within the bound; the
// others wait until an adapter's last running sequence ends or is preempted (vLLM's scheduler
// keeps the same rule). The base model (no adapter) takes no slot. Built for one step's
// admissions; not thread-safe.
//
//   AdapterSlots slots(max_loras, running_);
//   if (!slots.Admits(*seq)) continue;  // waits
//   slots.Admit(*seq);
#ifndef PAGODA_ROUTER_CORE_ADAPTER_SLOTS_H_
#define PAGODA_ROUTER_CORE_ADAPTER_SLOTS_H_

#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "router/core/sequence.h"

namespace pagoda {

class AdapterSlots {
 public:
  AdapterSlots(int max_loras, std::span<Sequence* const> running) : max_loras_(max_loras) {
    for (const Sequence* s : running) Admit(*s);
  }

  bool Admits(const Sequence& seq) const {
    return seq.adapter.empty() || InUse(seq.adapter) ||
           static_cast<int>(in_use_.size()) < max_loras_;
  }
  void Admit(const Sequence& seq) {
    if (!seq.adapter.empty() && !InUse(seq.adapter)) in_use_.push_back(seq.adapter);
  }

 private:
  bool InUse(std::string_view adapter) const {
    return std::find(in_use_.begin(), in_use_.end(), adapter) != in_use_.end();
  }

  const int max_loras_;
  std::vector<std::string_view> in_use_;  // views of the sequences' names; a handful at most
};

// The distinct LoRA adapters of `seqs`, sorted (vllm:lora_requests_info's running and waiting
// adapters).
template <typename Sequences>
std::vector<std::string> AdapterNames(const Sequences& seqs) {
  std::vector<std::string> names;
  for (const Sequence* s : seqs) {
    if (!s->adapter.empty()) names.push_back(s->adapter);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_ADAPTER_SLOTS_H_
