#include "router/core/stage_group.h"

#include <algorithm>
#include <cmath>
#include <future>

#include "absl/strings/str_cat.h"

namespace pagoda {
namespace {

std::string RangeOf(const WorkerInfo& w) { return absl::StrCat(w.layer_begin, ":", w.layer_end); }

}  // namespace

absl::StatusOr<std::unique_ptr<StageGroup>> StageGroup::Create(
    std::vector<std::shared_ptr<Executor>> stages, int num_layers, RouterMetrics* metrics) {
  if (stages.empty()) return absl::InvalidArgumentError("a stage group needs a stage");
  const WorkerInfo& first = stages.front()->info();
  int next = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    const WorkerInfo& s = stages[i]->info();
    const std::string name = absl::StrCat("stage ", i, " (layers ", RangeOf(s), ")");
    if (s.layer_begin != next || s.layer_end <= s.layer_begin) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " does not start where the stage before ends (layer ", next, ")"));
    }
    next = s.layer_end;
    if (s.model_fingerprint != first.model_fingerprint || s.block_size != first.block_size ||
        s.kv_cache_dtype != first.kv_cache_dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " differs from stage 0 in its model fingerprint, block size or K/V dtype"));
    }
  }
  if (next != num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("the stages end at layer ", next, " of the model's ", num_layers));
  }
  WorkerInfo info = first;
  info.layer_begin = 0;
  info.layer_end = num_layers;
  info.kv_transfer_address.clear();  // a group's blocks do not move (yet)
  for (const std::shared_ptr<Executor>& e : stages) {
    const WorkerInfo& s = e->info();
    info.num_blocks = std::min(info.num_blocks, s.num_blocks);
    info.max_num_batched_tokens = std::min(info.max_num_batched_tokens, s.max_num_batched_tokens);
    info.max_num_seqs = std::min(info.max_num_seqs, s.max_num_seqs);
    info.max_loras = std::min(info.max_loras, s.max_loras);
    info.max_cpu_loras = std::min(info.max_cpu_loras, s.max_cpu_loras);
    // An adapter runs only where every stage holds it, under one digest.
    std::erase_if(info.adapters, [&s](const AdapterInfo& a) {
      return std::none_of(s.adapters.begin(), s.adapters.end(), [&a](const AdapterInfo& b) {
        return b.name == a.name && b.digest == a.digest;
      });
    });
  }
  return std::unique_ptr<StageGroup>(new StageGroup(std::move(stages), std::move(info), metrics));
}

int64_t StageGroup::TakeTicket() {
  absl::MutexLock lock(&mu_);
  return next_ticket_++;
}

template <class Call>
auto StageGroup::InTurn(size_t i, int64_t ticket, Call call) {
  {
    absl::MutexLock lock(&mu_);
    auto my_turn = [this, i, ticket]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return turn_[i] == ticket; };
    mu_.Await(absl::Condition(&my_turn));
  }
  auto result = call(stages_[i].get());
  absl::MutexLock lock(&mu_);
  ++turn_[i];
  return result;
}

absl::StatusOr<StepResult> StageGroup::Execute(const StepCommand& command) {
  // A stage that fails abandons every stage at once: the others, waiting for activations that
  // will not come, fail now instead of at their step timeout.
  const int64_t ticket = TakeTicket();
  auto run = [this, &command, ticket](size_t i) {
    absl::StatusOr<StepResult> r =
        InTurn(i, ticket, [&command](Executor* stage) { return stage->Execute(command); });
    if (!r.ok()) Abandon();
    return r;
  };
  // The last stage runs on this thread; the others on their own, each until its stage answers.
  std::vector<std::future<absl::StatusOr<StepResult>>> others;
  others.reserve(stages_.size() - 1);
  for (size_t i = 0; i + 1 < stages_.size(); ++i) {
    others.push_back(std::async(std::launch::async, run, i));
  }
  absl::StatusOr<StepResult> last = run(stages_.size() - 1);
  absl::Status first_error;
  for (size_t i = 0; i < others.size(); ++i) {
    absl::StatusOr<StepResult> r = others[i].get();
    if (!r.ok() && first_error.ok()) {
      first_error =
          absl::Status(r.status().code(), absl::StrCat("stage ", i, ": ", r.status().message()));
    }
    if (r.ok()) Record(i, *r);
  }
  if (!first_error.ok()) return first_error;
  if (!last.ok()) {
    return absl::Status(last.status().code(),
                        absl::StrCat("stage ", stages_.size() - 1, ": ", last.status().message()));
  }
  Record(stages_.size() - 1, *last);
  return last;
}

std::vector<const RouterMetrics::StageSeries*> StageGroup::SeriesOf(RouterMetrics* metrics,
                                                                    size_t num_stages) {
  std::vector<const RouterMetrics::StageSeries*> series;
  for (size_t i = 0; metrics != nullptr && i < num_stages; ++i) {
    series.push_back(&metrics->Stage(static_cast<int>(i)));
  }
  return series;
}

void StageGroup::Record(size_t i, const StepResult& result) {
  if (series_.empty()) return;
  const StageTiming& t = result.stage;
  const auto sane = [](double s) { return std::isfinite(s) && s >= 0 && s < 1e6; };
  if (!sane(result.forward_seconds) || !sane(t.wait_seconds) || !sane(t.send_seconds) ||
      t.sent_bytes < 0) {
    return;
  }
  const RouterMetrics::StageSeries& series = *series_[i];
  series.compute_seconds->Observe(
      std::max(0.0, result.forward_seconds - t.wait_seconds - t.send_seconds));
  if (i > 0) series.wait_seconds->Observe(t.wait_seconds);
  if (i + 1 < stages_.size()) {
    series.send_seconds->Observe(t.send_seconds);
    series.sent_bytes->Add(static_cast<double>(t.sent_bytes));
  }
}

absl::StatusOr<AdapterInfo> StageGroup::ChangeAdapter(const AdapterChange& change) {
  absl::MutexLock adapters(&adapters_mu_);
  auto held = std::find_if(info_.adapters.begin(), info_.adapters.end(),
                           [&change](const AdapterInfo& a) { return a.name == change.name; });
  if (!change.path.empty() && held != info_.adapters.end()) return *held;
  if (change.path.empty() && held == info_.adapters.end())
    return AdapterInfo{.name = change.name, .rank = 0, .digest = ""};
  // In every stage's order, as a step: one stage's change never overtakes a step in flight.
  const int64_t ticket = TakeTicket();
  absl::StatusOr<AdapterInfo> answer = AdapterInfo{.name = change.name, .rank = 0, .digest = ""};
  for (size_t i = 0; i < stages_.size(); ++i) {
    absl::StatusOr<AdapterInfo> r = InTurn(i, ticket, [&change, &answer](Executor* stage) {
      return answer.ok() ? stage->ChangeAdapter(change) : answer;  // after an error: its turn only
    });
    if (!r.ok() && answer.ok()) {
      answer =
          absl::Status(r.status().code(), absl::StrCat("stage ", i, ": ", r.status().message()));
    } else if (answer.ok()) {
      answer = std::move(r);
    }
  }
  if (!answer.ok()) return answer;
  std::erase_if(info_.adapters, [&change](const AdapterInfo& a) { return a.name == change.name; });
  if (!change.path.empty()) info_.adapters.push_back(*answer);
  return answer;
}

void StageGroup::Abandon() {
  for (const std::shared_ptr<Executor>& stage : stages_) stage->Abandon();
}

}  // namespace pagoda
