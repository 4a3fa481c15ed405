// WorkerEngine's part in KV block transfers (issue 28): pulls are checked against the step
// that carries them and against the blocks already in flight, so no step reads or writes a
// block a transfer thread is writing.
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "worker/worker_engine.h"

namespace pagoda {

void WorkerEngine::EnableTransfers(std::unique_ptr<KvPuller> puller,
                                   const std::string& advertise_address) {
  CHECK(!advertise_address.empty()) << "an advertise address is needed";
  transfers_.SetPuller(std::move(puller));
  info_.kv_transfer_address = advertise_address;
}

absl::Status WorkerEngine::ValidateTransfers(const StepCommand& cmd) const {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("step ", cmd.step_id, ": ", parts...));
  };
  if (!cmd.pulls.empty()) {
    // The blocks of the sequences that outlive this step's finished_ids.
    const absl::flat_hash_set<int64_t> finished(cmd.finished_ids.begin(), cmd.finished_ids.end());
    absl::flat_hash_set<int> held;
    for (const auto& [id, s] : seqs_) {
      if (!finished.contains(id)) held.insert(s.block_table.begin(), s.block_table.end());
    }
    const absl::Status status =
        transfers_.Validate(cmd.pulls, [&](int block) { return held.contains(block); });
    if (!status.ok()) return bad(status.message());
  }
  // This step's pulls count as in flight for the rest of it.
  absl::flat_hash_map<int, int64_t> in_flight = transfers_.InFlight();
  for (const BlockPull& p : cmd.pulls) {
    for (int b : p.dst_block_ids) in_flight[b] = p.transfer_id;
  }
  if (in_flight.empty()) return absl::OkStatus();
  auto receiving = [&](int block) -> std::string {
    auto it = in_flight.find(block);
    return it == in_flight.end()
               ? ""
               : absl::StrCat("block ", block, " is still being received (transfer ", it->second,
                              ")");
  };
  for (const BlockCopy& copy : cmd.block_copies) {
    for (int b : {copy.src, copy.dst}) {
      if (std::string why = receiving(b); !why.empty())
        return bad("block copy ", copy.src, " -> ", copy.dst, ": ", why);
    }
  }
  absl::flat_hash_set<int64_t> fresh;
  for (const NewSequence& n : cmd.new_sequences) fresh.insert(n.seq_id);
  for (const ScheduledSequence& s : cmd.scheduled) {
    // Validate checked the kept blocks against the table this step leaves it.
    auto it = seqs_.find(s.seq_id);
    if (!fresh.contains(s.seq_id) && it != seqs_.end()) {
      for (int i = 0; i < s.num_kept_blocks; ++i) {
        if (std::string why = receiving(it->second.block_table[i]); !why.empty())
          return bad("sequence ", s.seq_id, ": ", why);
      }
    }
    for (int b : s.new_block_ids) {
      if (std::string why = receiving(b); !why.empty())
        return bad("sequence ", s.seq_id, ": ", why);
    }
  }
  return absl::OkStatus();
}

}  // namespace pagoda
