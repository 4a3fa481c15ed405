#include "worker/worker_engine.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/process/progress_meter.h"
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
  if (options.max_loras < 1 || options.max_cpu_loras < options.max_loras) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-loras=", options.max_loras,
                     " must be in [1, --max-cpu-loras=", options.max_cpu_loras, "]"));
  }
  if (options.threads > 0) omp_set_num_threads(options.threads);
  const ModelConfig& config = source.config();
  const std::optional<WeightDtype> all = options.weight_dtype;
  // Packing reads the weights from the file (mapped): that is the load a user waits for.
  ProgressMeter progress("loading weights", static_cast<int64_t>(source.num_bytes()),
                         ProgressMeter::ForStderr());
  ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model,
                   LlamaModel::Create(
                       source, options.max_num_batched_tokens, options.max_num_seqs,
                       [all](GgmlType stored) { return all.value_or(AutoWeightDtype(stored)); },
                       options.compute_dtype,
                       [&](int64_t bytes) {
                         progress.Add(bytes);
                         if (options.on_load_progress) {
                           options.on_load_progress(progress.done(),
                                                    static_cast<int64_t>(source.num_bytes()));
                         }
                       },
                       options.layers));
  progress.Done();
  // A model this small computes an op in less time than handing it between threads costs
  // (each op is a parallel region): served stories260K decodes a token in 0.33 ms on one thread
  // and 2.56 ms on two (docs/BENCHMARKS.md §24). It runs on one.
  if (model->weight_bytes() < kSingleThreadWeightBytes && omp_get_max_threads() > 1) {
    LOG(INFO) << "weights of " << model->weight_bytes() / 1024
              << " KiB: one compute thread (handing each op between threads costs more)";
    omp_set_num_threads(1);
  }
  LOG(INFO) << "weights: " << model->DescribeWeightDtypes()
            << (options.weight_dtype ? "" : " (--weight-dtype=auto, by each tensor's type)") << ", "
            << model->weight_bytes() / (1 << 20) << " MiB from " << source.num_bytes() / (1 << 20)
            << " MiB in the file; peak resident so far " << PeakResidentBytes() / (1 << 20)
            << " MiB";
  // Sized after the weights are packed (and their load buffers freed), as vLLM sizes its pool:
  // a pipeline stage's blocks hold its own layers only.
  const ModelConfig kv_config = StageKvConfig(config, model->layers());
  const KvDtype dtype = options.kv_cache_dtype;
  const int64_t block_bytes = KvPool::BytesPerBlock(kv_config, options.block_size, dtype);
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
  const int num_blocks =
      options.num_blocks > 0
          ? options.num_blocks
          : KvPool::BlocksForBytes(kv_config, options.block_size, kv_bytes, dtype);
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
  // Adapter paths must lie in --lora-dir, or by default where the --lora-modules ones are.
  LoraReadOptions read;
  read.allowed_roots = options.lora_dirs;
  if (read.allowed_roots.empty()) {
    for (const WorkerOptions::LoraModule& m : options.lora_modules) {
      const std::filesystem::path dir = std::filesystem::path(m.path).parent_path();
      read.allowed_roots.push_back(dir.empty() ? std::string(".") : dir.string());
    }
  }
  // auto: an f32 model's adapters in f32 (exact), any other's in bf16.
  const WeightDtype lora_dtype = options.lora_dtype.value_or(
      model->weight_dtype() == WeightDtype::kF32 ? WeightDtype::kF32 : WeightDtype::kBf16);
  auto loras = std::make_unique<LoraRegistry>(config, options.max_cpu_loras, options.max_loras,
                                              std::move(read), lora_dtype);
  for (const WorkerOptions::LoraModule& m : options.lora_modules) {
    if (absl::Status s = loras->Load(m.name, m.path); !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("--lora-modules=", m.name, "=", m.path, ": ", s.message()));
    }
  }
  return std::unique_ptr<WorkerEngine>(
      new WorkerEngine(std::move(model), options, num_blocks, std::move(loras)));
}

WorkerEngine::WorkerEngine(std::unique_ptr<LlamaModel> model, const WorkerOptions& options,
                           int num_blocks, std::unique_ptr<LoraRegistry> loras)
    : model_(std::move(model)),
      kv_(StageKvConfig(model_->config(), model_->layers()), num_blocks, options.block_size,
          options.kv_cache_dtype),
      ledger_(num_blocks, options.block_size),
      sampler_(model_->config().vocab_size),
      loras_(std::move(loras)),
      validator_({.vocab_size = model_->config().vocab_size,
                  .max_seq_len = model_->config().max_seq_len,
                  .num_blocks = kv_.num_blocks(),
                  .block_size = kv_.block_size(),
                  .max_tokens = model_->max_tokens(),
                  .max_logit_rows = model_->max_logit_rows()},
                 loras_.get()) {
  info_.model_fingerprint = model_->config().Fingerprint();
  info_.num_blocks = num_blocks;
  info_.block_size = options.block_size;
  info_.max_num_batched_tokens = options.max_num_batched_tokens;
  info_.max_num_seqs = options.max_num_seqs;
  info_.kv_cache_dtype = KvDtypeName(options.kv_cache_dtype);
  info_.adapters = loras_->List();
  info_.max_loras = loras_->max_loras();
  info_.max_cpu_loras = loras_->max_cpu_loras();
  info_.layer_begin = model_->layers().begin;
  info_.layer_end = model_->layers().end;
}

absl::Status WorkerEngine::LoadAdapter(const std::string& name, const std::string& path) {
  RETURN_IF_ERROR(loras_->Load(name, path));
  info_.adapters = loras_->List();
  return absl::OkStatus();
}

absl::Status WorkerEngine::UnloadAdapter(const std::string& name) {
  RETURN_IF_ERROR(loras_->Unload(name));
  info_.adapters = loras_->List();
  return absl::OkStatus();
}

absl::Status WorkerEngine::Validate(const StepCommand& cmd) const {
  absl::flat_hash_map<int64_t, HeldSequence> held;
  held.reserve(seqs_.size());
  for (const auto& [id, s] : seqs_) {
    held[id] = {.num_blocks = static_cast<int>(s.block_table.size()),
                .num_prompt_tokens = s.num_prompt_tokens,
                .prompt_logprobs = s.sampling.prompt_logprobs,
                .pooling = s.pooling,
                .num_pooled_rows = s.num_pooled_rows,
                .adapter = s.adapter};
  }
  RETURN_IF_ERROR(validator_.Validate(cmd, std::move(held)));
  if (cmd.pulls.empty() && !transfers_.busy()) return absl::OkStatus();
  KvTransfers::SequenceTables tables;
  for (const auto& [id, s] : seqs_) tables.emplace(id, &s.block_table);
  return transfers_.ValidateStep(cmd, tables);
}

void WorkerEngine::EnableTransfers(std::unique_ptr<KvPuller> puller,
                                   const std::string& advertise_address) {
  CHECK(!advertise_address.empty()) << "an advertise address is needed";
  transfers_.SetPuller(std::move(puller));
  info_.kv_transfer_address = advertise_address;
}

absl::StatusOr<StepResult> WorkerEngine::Execute(const StepCommand& cmd) {
  RETURN_IF_ERROR(Validate(cmd));
  if (stage_link_ == nullptr && !model_->layers().whole(model_->config().num_layers) &&
      !cmd.scheduled.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("step ", cmd.step_id, ": a stage of layers ",
                                                      model_->layers().ToString(),
                                                      " has no link to the stages beside it"));
  }
  const auto start = std::chrono::steady_clock::now();
  // Adapters first (one evicted is read again, in room the finished sequences' may leave): a
  // failure leaves every sequence as it was.
  std::vector<const PackedLora*> finishing;
  for (int64_t id : cmd.finished_ids) {
    auto it = seqs_.find(id);
    if (it != seqs_.end() && it->second.lora) finishing.push_back(it->second.lora.get());
  }
  std::vector<std::shared_ptr<const PackedLora>> new_loras(cmd.new_sequences.size());
  for (size_t i = 0; i < cmd.new_sequences.size(); ++i) {
    const std::string& name = cmd.new_sequences[i].adapter;
    if (name.empty()) continue;
    absl::StatusOr<std::shared_ptr<const PackedLora>> lora = loras_->Acquire(name, finishing);
    if (!lora.ok()) {
      return absl::Status(lora.status().code(),
                          absl::StrCat("step ", cmd.step_id, ": sequence ",
                                       cmd.new_sequences[i].seq_id, ": ", lora.status().message()));
    }
    new_loras[i] = *std::move(lora);
  }
  for (int64_t id : cmd.finished_ids) seqs_.erase(id);
  for (size_t i = 0; i < cmd.new_sequences.size(); ++i) {
    const NewSequence& n = cmd.new_sequences[i];
    SequenceState& s = seqs_[n.seq_id];
    s.adapter = n.adapter;
    s.lora = std::move(new_loras[i]);
    s.sampling = n.sampling;
    s.seq_index = n.seq_index;
    s.stop_ids = n.stop_ids;
    s.num_prompt_tokens = static_cast<int>(n.prompt_ids.size());
    s.tokens = n.prompt_ids;
    s.tokens.insert(s.tokens.end(), n.output_ids.begin(), n.output_ids.end());
    s.pooling = n.pooling;
    s.salted = n.salted;
    if (n.pooling == Pooling::kMean) s.pooled.assign(model_->config().dim, 0.0);
  }
  if (disk_) SaveBlocksAboutToChange(cmd);
  for (const BlockCopy& copy : cmd.block_copies) {
    kv_.CopyBlock(copy.src, copy.dst);
    ledger_.Copied(copy.src, copy.dst);
  }
  for (const BlockPull& pull : cmd.pulls) {
    for (int b : pull.dst_block_ids) ledger_.Overwritten(b);
  }
  transfers_.Start(cmd.pulls);

  token_ids_.clear();
  positions_.clear();
  slots_.clear();
  logit_rows_.clear();
  hidden_rows_.clear();
  attention_.clear();
  lora_batch_.Clear();
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
    // K/V computed under an adapter are that adapter's: never offered as the base model's.
    ledger_.Wrote(s.block_table, sched.num_computed_tokens, sched.token_ids,
                  !s.salted && s.lora == nullptr);
    const int n = static_cast<int>(sched.token_ids.size());
    if (s.lora != nullptr) lora_batch_.Add(s.lora.get(), first_row, n);
    attention_.push_back({first_row, n, sched.num_computed_tokens, s.block_table.data()});
    // Logit rows in the order Execute reads them: prompt rows, then the sampled one.
    if (sched.prompt_logprobs) {
      const int rows = NumPromptRows(sched.num_computed_tokens, sched.num_computed_tokens + n,
                                     s.num_prompt_tokens);
      for (int i = 0; i < rows; ++i) logit_rows_.push_back(first_row + i);
    }
    if (sched.sample) {
      for (int i = n - 1 - sched.num_draft_tokens; i < n; ++i) logit_rows_.push_back(first_row + i);
    }
    const bool last_chunk = sched.num_computed_tokens + n == s.num_prompt_tokens;
    if (s.pooling == Pooling::kMean) {
      for (int i = 0; i < n; ++i) hidden_rows_.push_back(first_row + i);
    } else if (s.pooling == Pooling::kLast && last_chunk) {
      hidden_rows_.push_back(first_row + n - 1);
    }
  }

  StepResult result;
  result.step_id = cmd.step_id;
  if (!token_ids_.empty()) {
    ForwardBatch batch{token_ids_,   positions_,        slots_, attention_, logit_rows_,
                       hidden_rows_, lora_batch_.rows()};
    const int dim = model_->config().dim;
    const auto since = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };
    if (!model_->holds_first_layer()) {  // the stage before's residual stream
      hidden_in_.resize(token_ids_.size() * dim);
      const auto waited = std::chrono::steady_clock::now();
      RETURN_IF_ERROR(stage_link_->Receive(cmd.step_id, hidden_in_));
      result.stage.wait_seconds = since(waited);
      batch.hidden_in = hidden_in_.data();
    }
    float* logits = model_->Forward(batch, kv_);  // sampled in place, row by row
    if (!model_->holds_last_layer()) {            // the next stage samples
      const std::span<const float> out(model_->residual(), token_ids_.size() * dim);
      const auto sent = std::chrono::steady_clock::now();
      RETURN_IF_ERROR(stage_link_->Send(cmd.step_id, out));
      result.stage.send_seconds = since(sent);
      result.stage.sent_bytes = static_cast<int64_t>(out.size_bytes());
      result.forward_seconds = since(start);
      return result;
    }
    const int vocab = model_->config().vocab_size;
    const float* hidden = model_->final_hidden() + static_cast<size_t>(logit_rows_.size()) * dim;
    int row = 0, hidden_row = 0;
    for (const ScheduledSequence& sched : cmd.scheduled) {
      SequenceState& s = seqs_[sched.seq_id];
      const int n = static_cast<int>(sched.token_ids.size());
      if (s.pooling != Pooling::kNone) {
        const bool last_chunk = sched.num_computed_tokens + n == s.num_prompt_tokens;
        const int rows = s.pooling == Pooling::kMean ? n : (last_chunk ? 1 : 0);
        Pool(sched.seq_id, s, hidden + static_cast<size_t>(hidden_row) * dim, rows, last_chunk,
             &result);
        hidden_row += rows;
        continue;
      }
      if (sched.prompt_logprobs) {
        const int rows = NumPromptRows(sched.num_computed_tokens, sched.num_computed_tokens + n,
                                       s.num_prompt_tokens);
        if (rows > 0) {
          PromptLogprobs& out = result.prompt_logprobs.emplace_back();
          out.seq_id = sched.seq_id;
          out.first_position = sched.num_computed_tokens + 1;
          const int top_n = std::min(s.sampling.prompt_logprobs, vocab);
          for (int i = 0; i < rows; ++i) {
            sampler_.AppendPromptLogprob(logits + static_cast<size_t>(row++) * vocab,
                                         s.tokens[out.first_position + i], top_n, &out);
          }
        }
      }
      if (!sched.sample) continue;
      // The first sampled token is the one after the positions computed so far, less the draft.
      const int draft = sched.num_draft_tokens;
      const int known = sched.num_computed_tokens + n - draft;
      s.tokens.resize(std::max<int>(known, s.num_prompt_tokens));
      std::span<const uint64_t> allowed;
      if (sched.constrained && !sched.allowed_mask.empty()) {
        allowed = sched.allowed_mask;
      } else if (sched.constrained) {
        allowed_.assign((vocab + 63) / 64, 0);
        for (int t : sched.allowed_ids) allowed_[t >> 6] |= uint64_t{1} << (t & 63);
        allowed = allowed_;
      }
      sampler_.VerifyDraft(logits + static_cast<size_t>(row) * vocab,
                           std::span(sched.token_ids).last(draft), s.sampling, s.num_prompt_tokens,
                           s.seq_index, s.stop_ids, allowed, sched.seq_id, &s.tokens,
                           &result.sampled);
      row += draft + 1;
    }
  }
  result.forward_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // A router with nothing else for this worker waits here for its pulls (bounded).
  transfers_.TakeEnded(cmd.await_transfers && cmd.scheduled.empty(), absl::Seconds(10),
                       &result.transfers);
  return result;
}

absl::Status WorkerEngine::EnableDiskCache(const KvDiskCacheOptions& options) {
  // The weights' dtypes and their compute change the K/V a prompt gives.
  const std::string fingerprint =
      absl::StrCat(info_.model_fingerprint, ";weights=", model_->DescribeWeightDtypes(),
                   model_->layers().whole(model_->config().num_layers)
                       ? ""
                       : ";layers=" + model_->layers().ToString());
  ASSIGN_OR_RETURN(disk_, KvDiskCache::Open(options, fingerprint, kv_));
  disk_->Restore(kMaxCachedBlockTokens / kv_.block_size(), &kv_, &ledger_);
  return absl::OkStatus();
}

void WorkerEngine::SaveBlocksAboutToChange(const StepCommand& cmd) {
  for (const BlockCopy& copy : cmd.block_copies) disk_->BeforeOverwrite(copy.dst, kv_, ledger_);
  for (const BlockPull& pull : cmd.pulls) {
    for (int b : pull.dst_block_ids) disk_->BeforeOverwrite(b, kv_, ledger_);
  }
  // A block the router hands a sequence anew for positions it has not computed held something
  // else (one before them is a prefix hit: it keeps what it holds). The blocks a sequence keeps
  // are its own: a rewrite there is a rejected draft's positions, nothing worth keeping.
  const int bs = kv_.block_size();
  for (const ScheduledSequence& sched : cmd.scheduled) {
    for (size_t j = 0; j < sched.new_block_ids.size(); ++j) {
      const int i = sched.num_kept_blocks + static_cast<int>(j);  // its index in the table
      if ((i + 1) * bs > sched.num_computed_tokens) {
        disk_->BeforeOverwrite(sched.new_block_ids[j], kv_, ledger_);
      }
    }
  }
}

void WorkerEngine::Pool(int64_t seq_id, SequenceState& s, const float* rows, int n, bool last_chunk,
                        StepResult* result) {
  const int dim = model_->config().dim;
  std::vector<double> v(dim, 0.0);
  if (s.pooling == Pooling::kMean) {
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < dim; ++i) s.pooled[i] += rows[static_cast<size_t>(r) * dim + i];
    }
    s.num_pooled_rows += n;
    if (!last_chunk) return;
    for (int i = 0; i < dim; ++i) v[i] = s.pooled[i] / s.num_pooled_rows;
  } else {
    if (!last_chunk) return;
    for (int i = 0; i < dim; ++i) v[i] = rows[i];
  }
  double norm = 0.0;
  for (double x : v) norm += x * x;
  norm = std::sqrt(norm);
  Embedding& e = result->embeddings.emplace_back();
  e.seq_id = seq_id;
  e.values.resize(dim);
  for (int i = 0; i < dim; ++i) e.values[i] = static_cast<float>(norm > 0 ? v[i] / norm : v[i]);
}

}  // namespace pagoda
