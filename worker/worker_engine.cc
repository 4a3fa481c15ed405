#include "worker/worker_engine.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pagoda {

absl::StatusOr<std::unique_ptr<WorkerEngine>> WorkerEngine::Create(ModelWeights weights,
                                                                   const WorkerOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> source,
                   WeightSource::FromWeights(std::move(weights)));
  return Create(*source, options);
}

absl::StatusOr<std::unique_ptr<WorkerEngine>> WorkerEngine::Create(const WeightSource& source,
                                                                   const WorkerOptions& options) {
  if (options.block_size <= 0 || options.max_num_batched_tokens <= 0 || options.max_num_seqs <= 0) {
    return absl::InvalidArgumentError(
        "block_size, max_num_batched_tokens and max_num_seqs must be > 0");
  }
  if (options.threads > 0) omp_set_num_threads(options.threads);
  const ModelConfig& config = source.config();
  const std::optional<WeightDtype> all = options.weight_dtype;
  ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model,
                   LlamaModel::Create(
                       source, options.max_num_batched_tokens, options.max_num_seqs,
                       [all](GgmlType stored) { return all.value_or(AutoWeightDtype(stored)); },
                       options.compute_dtype));
  LOG(INFO) << "weights: " << model->DescribeWeightDtypes()
            << (options.weight_dtype ? "" : " (--weight-dtype=auto, by each tensor's type)") << ", "
            << model->weight_bytes() / (1 << 20) << " MiB from " << source.num_bytes() / (1 << 20)
            << " MiB in the file; peak resident so far " << PeakResidentBytes() / (1 << 20)
            << " MiB";
  // Sized after the weights are packed (and their load buffers freed), as vLLM sizes its pool.
  const KvDtype dtype = options.kv_cache_dtype;
  const int64_t block_bytes = KvPool::BytesPerBlock(config, options.block_size, dtype);
  int64_t kv_bytes = options.kv_cache_bytes;
  std::string how = "--kv-cache-mb";
  if (options.num_blocks <= 0 && kv_bytes <= 0) {
    const int64_t available = MemAvailableBytes();
    kv_bytes = AutoKvCacheBytes(available, options.kv_cache_memory_fraction,
                                block_bytes / options.block_size,
                                static_cast<int64_t>(options.max_num_seqs) * config.max_seq_len);
    how = absl::StrCat("auto: ", static_cast<int>(options.kv_cache_memory_fraction * 100), "% of ",
                       available >> 20, " MiB available after the weights, at most ",
                       options.max_num_seqs, " sequences of ", config.max_seq_len, " tokens");
  }
  const int num_blocks = options.num_blocks > 0
                             ? options.num_blocks
                             : KvPool::BlocksForBytes(config, options.block_size, kv_bytes, dtype);
  if (num_blocks <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV cache of ", kv_bytes, " bytes holds no block of ", block_bytes, " bytes (", how, ")"));
  }
  const int64_t tokens = static_cast<int64_t>(num_blocks) * options.block_size;
  LOG(INFO) << "KV pool: " << KvDtypeName(dtype) << ", " << num_blocks << " blocks of "
            << options.block_size << " tokens = " << tokens << " tokens, "
            << tokens / config.max_seq_len << " sequences of " << config.max_seq_len << " ("
            << block_bytes * num_blocks / (1 << 20) << " MiB; "
            << (options.num_blocks > 0 ? "--num-kv-blocks" : how) << ")";
  return std::unique_ptr<WorkerEngine>(new WorkerEngine(std::move(model), options, num_blocks));
}

WorkerEngine::WorkerEngine(std::unique_ptr<LlamaModel> model, const WorkerOptions& options,
                           int num_blocks)
    : model_(std::move(model)),
      kv_(model_->config(), num_blocks, options.block_size, options.kv_cache_dtype),
      sampler_(model_->config().vocab_size) {
  info_.model_fingerprint = model_->config().Fingerprint();
  info_.num_blocks = num_blocks;
  info_.block_size = options.block_size;
  info_.max_num_batched_tokens = options.max_num_batched_tokens;
  info_.max_num_seqs = options.max_num_seqs;
  info_.kv_cache_dtype = KvDtypeName(options.kv_cache_dtype);
}

namespace {

// A constrained sequence's allowed tokens: one form, of the right size, not empty.
absl::Status ValidateAllowed(const ScheduledSequence& s, int vocab, int64_t step_id) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("step ", step_id, ": sequence ", s.seq_id, ": ", parts...));
  };
  if (!s.sample) return bad("a constraint without a sample");
  if (s.allowed_ids.empty() == s.allowed_mask.empty())
    return bad("a constraint needs allowed ids or a mask, not both");
  if (!s.allowed_mask.empty()) {
    const size_t words = (static_cast<size_t>(vocab) + 63) / 64;
    if (s.allowed_mask.size() != words)
      return bad("allowed mask of ", s.allowed_mask.size(), " words; the vocabulary needs ", words);
    const int tail = vocab % 64;
    if (tail != 0 && (s.allowed_mask.back() >> tail) != 0)
      return bad("mask bits past the vocabulary");
    if (std::all_of(s.allowed_mask.begin(), s.allowed_mask.end(),
                    [](uint64_t w) { return w == 0; }))
      return bad("the mask allows no token");
    return absl::OkStatus();
  }
  int last = -1;
  for (int t : s.allowed_ids) {
    if (t <= last || t >= vocab) return bad("allowed ids must increase within [0, ", vocab, ")");
    last = t;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WorkerEngine::Validate(const StepCommand& cmd) const {
  const ModelConfig& c = model_->config();
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("step ", cmd.step_id, ": ", parts...));
  };
  for (const BlockCopy& copy : cmd.block_copies) {
    if (copy.src < 0 || copy.src >= kv_.num_blocks() || copy.dst < 0 ||
        copy.dst >= kv_.num_blocks()) {
      return bad("block copy ", copy.src, " -> ", copy.dst, " outside the pool of ",
                 kv_.num_blocks());
    }
  }
  absl::flat_hash_map<int64_t, int> known_blocks;  // seq -> block table size after this step
  for (const auto& [id, s] : seqs_) known_blocks[id] = static_cast<int>(s.block_table.size());
  for (int64_t id : cmd.finished_ids) known_blocks.erase(id);
  for (const NewSequence& n : cmd.new_sequences) {
    if (!known_blocks.emplace(n.seq_id, 0).second)
      return bad("sequence ", n.seq_id, " already exists");
    for (auto ids : {&n.prompt_ids, &n.output_ids}) {
      for (int t : *ids) {
        if (t < 0 || t >= c.vocab_size)
          return bad("sequence ", n.seq_id, ": token id ", t, " out of range");
      }
    }
    RETURN_IF_ERROR(n.sampling.Validate());
    RETURN_IF_ERROR(n.sampling.ValidateTokenIds(c.vocab_size));
    // Fewer than the vocabulary: min_tokens always leaves a token to sample.
    if (n.stop_ids.size() > static_cast<size_t>(kMaxStopIdsPerSequence) ||
        n.stop_ids.size() >= static_cast<size_t>(c.vocab_size)) {
      return bad("sequence ", n.seq_id, ": ", n.stop_ids.size(), " stop ids");
    }
    for (int t : n.stop_ids) {
      if (t < 0 || t >= c.vocab_size)
        return bad("sequence ", n.seq_id, ": stop id ", t, " out of range");
    }
  }
  int64_t total = 0;
  int num_sample = 0;
  absl::flat_hash_set<int64_t> scheduled;
  for (const ScheduledSequence& s : cmd.scheduled) {
    auto it = known_blocks.find(s.seq_id);
    if (it == known_blocks.end()) return bad("unknown sequence ", s.seq_id);
    if (!scheduled.insert(s.seq_id).second) return bad("sequence ", s.seq_id, " scheduled twice");
    if (s.token_ids.empty()) return bad("sequence ", s.seq_id, " has no tokens");
    for (int b : s.new_block_ids) {
      if (b < 0 || b >= kv_.num_blocks()) return bad("block ", b, " outside the pool");
    }
    if (s.num_kept_blocks < 0 || s.num_kept_blocks > it->second) {
      return bad("sequence ", s.seq_id, " keeps ", s.num_kept_blocks, " of its ", it->second,
                 " blocks");
    }
    const int64_t end = static_cast<int64_t>(s.num_computed_tokens) + s.token_ids.size();
    const int64_t blocks = s.num_kept_blocks + static_cast<int64_t>(s.new_block_ids.size());
    if (s.num_computed_tokens < 0 || end > c.max_seq_len || end > blocks * kv_.block_size()) {
      return bad("sequence ", s.seq_id, ": positions [", s.num_computed_tokens, ", ", end,
                 ") do not fit ", blocks, " blocks or the context of ", c.max_seq_len);
    }
    for (int t : s.token_ids) {
      if (t < 0 || t >= c.vocab_size)
        return bad("sequence ", s.seq_id, ": token id ", t, " out of range");
    }
    if (s.constrained) RETURN_IF_ERROR(ValidateAllowed(s, c.vocab_size, cmd.step_id));
    total += s.token_ids.size();
    num_sample += s.sample;
  }
  if (total > model_->max_tokens())
    return bad(total, " tokens exceed the step limit ", model_->max_tokens());
  if (num_sample > model_->max_logit_rows())
    return bad(num_sample, " samples exceed ", model_->max_logit_rows());
  return absl::OkStatus();
}

absl::StatusOr<StepResult> WorkerEngine::Execute(const StepCommand& cmd) {
  RETURN_IF_ERROR(Validate(cmd));
  const auto start = std::chrono::steady_clock::now();
  for (int64_t id : cmd.finished_ids) seqs_.erase(id);
  for (const NewSequence& n : cmd.new_sequences) {
    SequenceState& s = seqs_[n.seq_id];
    s.sampling = n.sampling;
    s.seq_index = n.seq_index;
    s.stop_ids = n.stop_ids;
    s.num_prompt_tokens = static_cast<int>(n.prompt_ids.size());
    s.tokens = n.prompt_ids;
    s.tokens.insert(s.tokens.end(), n.output_ids.begin(), n.output_ids.end());
  }
  for (const BlockCopy& copy : cmd.block_copies) kv_.CopyBlock(copy.src, copy.dst);

  token_ids_.clear();
  positions_.clear();
  slots_.clear();
  logit_rows_.clear();
  attention_.clear();
  const int bs = kv_.block_size();
  for (const ScheduledSequence& sched : cmd.scheduled) {
    SequenceState& s = seqs_[sched.seq_id];
    s.block_table.resize(sched.num_kept_blocks);
    s.block_table.insert(s.block_table.end(), sched.new_block_ids.begin(),
                         sched.new_block_ids.end());
    const int first_row = static_cast<int>(token_ids_.size());
    for (size_t i = 0; i < sched.token_ids.size(); ++i) {
      const int pos = sched.num_computed_tokens + static_cast<int>(i);
      token_ids_.push_back(sched.token_ids[i]);
      positions_.push_back(pos);
      slots_.push_back(static_cast<int64_t>(s.block_table[pos / bs]) * bs + pos % bs);
    }
    attention_.push_back({first_row, static_cast<int>(sched.token_ids.size()),
                          sched.num_computed_tokens, s.block_table.data()});
    if (sched.sample) logit_rows_.push_back(static_cast<int>(token_ids_.size()) - 1);
  }

  StepResult result;
  result.step_id = cmd.step_id;
  if (!token_ids_.empty()) {
    const ForwardBatch batch{token_ids_, positions_, slots_, attention_, logit_rows_};
    float* logits = model_->Forward(batch, kv_);  // sampled in place, row by row
    const int vocab = model_->config().vocab_size;
    int row = 0;
    for (const ScheduledSequence& sched : cmd.scheduled) {
      if (!sched.sample) continue;
      SequenceState& s = seqs_[sched.seq_id];
      float* row_logits = logits + static_cast<size_t>(row++) * vocab;
      // The sampled token is the one after the positions computed so far.
      const int known = sched.num_computed_tokens + static_cast<int>(sched.token_ids.size());
      s.tokens.resize(std::max<int>(known, s.num_prompt_tokens));
      const std::span<const int> all(s.tokens);
      std::span<const uint64_t> allowed;
      if (sched.constrained && !sched.allowed_mask.empty()) {
        allowed = sched.allowed_mask;
      } else if (sched.constrained) {
        allowed_.assign((vocab + 63) / 64, 0);
        for (int t : sched.allowed_ids) allowed_[t >> 6] |= uint64_t{1} << (t & 63);
        allowed = allowed_;
      }
      SampledToken token =
          sampler_.Sample(row_logits, s.sampling, all.first(s.num_prompt_tokens),
                          all.subspan(s.num_prompt_tokens), s.seq_index, s.stop_ids, allowed);
      token.seq_id = sched.seq_id;
      s.tokens.push_back(token.token_id);
      result.sampled.push_back(std::move(token));
    }
  }
  result.forward_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace pagoda
