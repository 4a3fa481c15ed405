#include "proto/step_proto.h"

#include <cstring>

namespace pagoda {
namespace {

template <typename T, typename Repeated>
std::vector<T> ToVector(const Repeated& r) {
  return std::vector<T>(r.begin(), r.end());
}

void ToProto(const SamplingParams& in, v1::SamplingState* out) {
  out->set_temperature(in.temperature);
  out->set_top_p(in.top_p);
  out->set_top_k(in.top_k);
  out->set_min_p(in.min_p);
  out->set_repetition_penalty(in.repetition_penalty);
  out->set_presence_penalty(in.presence_penalty);
  out->set_frequency_penalty(in.frequency_penalty);
  out->set_seed(in.seed);
  out->set_logprobs(in.logprobs);
  out->set_min_tokens(in.min_tokens);
  if (in.prompt_logprobs >= 0) out->set_prompt_logprobs(in.prompt_logprobs);
  for (const LogitBias& b : in.logit_bias) {
    v1::LogitBias* p = out->add_logit_bias();
    p->set_token_id(b.token_id);
    p->set_bias(b.bias);
  }
}

SamplingParams FromProto(const v1::SamplingState& in) {
  SamplingParams p;
  p.temperature = in.temperature();
  p.top_p = in.top_p();
  p.top_k = in.top_k();
  p.min_p = in.min_p();
  p.repetition_penalty = in.repetition_penalty();
  p.presence_penalty = in.presence_penalty();
  p.frequency_penalty = in.frequency_penalty();
  p.seed = in.seed();
  p.logprobs = in.logprobs();
  p.min_tokens = in.min_tokens();
  p.prompt_logprobs = in.has_prompt_logprobs() ? in.prompt_logprobs() : -1;
  for (const v1::LogitBias& b : in.logit_bias()) p.logit_bias.push_back({b.token_id(), b.bias()});
  return p;
}

// KV block transfers (issue 28), kept apart from the fields above.
void PullsToProto(const StepCommand& in, v1::StepCommand* out) {
  for (const BlockPull& pull : in.pulls) {
    v1::BlockPull* p = out->add_pulls();
    p->set_transfer_id(pull.transfer_id);
    p->set_peer_address(pull.peer_address);
    p->mutable_src_block_ids()->Add(pull.src_block_ids.begin(), pull.src_block_ids.end());
    p->mutable_dst_block_ids()->Add(pull.dst_block_ids.begin(), pull.dst_block_ids.end());
  }
  out->set_await_transfers(in.await_transfers);
}

// Sizes (equal lengths, at most kMaxBlocksPerPull, the address's length) are the worker's to
// check (WorkerEngine's Validate), which refuses the step with a status naming the field.
void PullsFromProto(const v1::StepCommand& in, StepCommand* out) {
  for (const v1::BlockPull& p : in.pulls()) {
    out->pulls.push_back({p.transfer_id(), p.peer_address(), ToVector<int>(p.src_block_ids()),
                          ToVector<int>(p.dst_block_ids())});
  }
  out->await_transfers = in.await_transfers();
}

void TransfersToProto(const StepResult& in, v1::StepResult* out) {
  for (const TransferResult& t : in.transfers) {
    v1::TransferResult* p = out->add_transfers();
    p->set_transfer_id(t.transfer_id);
    p->set_ok(t.ok);
    p->set_error(t.error);
    p->set_bytes(t.bytes);
    p->set_seconds(t.seconds);
  }
}

void TransfersFromProto(const v1::StepResult& in, StepResult* out) {
  for (const v1::TransferResult& p : in.transfers()) {
    out->transfers.push_back({p.transfer_id(), p.ok(), p.error(), p.bytes(), p.seconds()});
  }
}

}  // namespace

void ToProto(const StepCommand& in, v1::StepCommand* out) {
  out->set_step_id(in.step_id);
  out->mutable_finished_ids()->Add(in.finished_ids.begin(), in.finished_ids.end());
  for (const NewSequence& n : in.new_sequences) {
    v1::NewSequence* p = out->add_new_sequences();
    p->set_seq_id(n.seq_id);
    ToProto(n.sampling, p->mutable_sampling());
    p->set_seq_index(n.seq_index);
    p->mutable_prompt_ids()->Add(n.prompt_ids.begin(), n.prompt_ids.end());
    p->mutable_output_ids()->Add(n.output_ids.begin(), n.output_ids.end());
    p->mutable_stop_ids()->Add(n.stop_ids.begin(), n.stop_ids.end());
    p->set_pooling(static_cast<int>(n.pooling));
    p->set_salted(n.salted);
    p->set_adapter(n.adapter);
  }
  for (const BlockCopy& c : in.block_copies) {
    v1::BlockCopy* p = out->add_block_copies();
    p->set_src(c.src);
    p->set_dst(c.dst);
  }
  for (const ScheduledSequence& s : in.scheduled) {
    v1::ScheduledSequence* p = out->add_scheduled();
    p->set_seq_id(s.seq_id);
    p->mutable_token_ids()->Add(s.token_ids.begin(), s.token_ids.end());
    p->set_num_computed_tokens(s.num_computed_tokens);
    p->set_num_kept_blocks(s.num_kept_blocks);
    p->mutable_new_block_ids()->Add(s.new_block_ids.begin(), s.new_block_ids.end());
    p->set_sample(s.sample);
    p->set_prompt_logprobs(s.prompt_logprobs);
    p->set_num_draft_tokens(s.num_draft_tokens);
    if (s.constrained) {
      p->set_constrained(true);
      p->mutable_allowed_ids()->Add(s.allowed_ids.begin(), s.allowed_ids.end());
      // Little-endian words (both ends are x86-64 or another little-endian build of this tree).
      p->set_allowed_mask(reinterpret_cast<const char*>(s.allowed_mask.data()),
                          s.allowed_mask.size() * sizeof(uint64_t));
    }
  }
  PullsToProto(in, out);
}

StepCommand FromProto(const v1::StepCommand& in) {
  StepCommand out;
  out.step_id = in.step_id();
  out.finished_ids = ToVector<int64_t>(in.finished_ids());
  for (const v1::NewSequence& p : in.new_sequences()) {
    NewSequence& n = out.new_sequences.emplace_back();
    n.seq_id = p.seq_id();
    n.sampling = FromProto(p.sampling());
    n.seq_index = p.seq_index();
    n.prompt_ids = ToVector<int>(p.prompt_ids());
    n.output_ids = ToVector<int>(p.output_ids());
    n.stop_ids = ToVector<int>(p.stop_ids());
    // An unknown value is kept out of the enum's range, for the worker's check to refuse.
    n.pooling = p.pooling() >= 0 && p.pooling() <= 2 ? static_cast<Pooling>(p.pooling())
                                                     : static_cast<Pooling>(-1);
    n.salted = p.salted();
    n.adapter = p.adapter();
  }
  for (const v1::BlockCopy& p : in.block_copies()) out.block_copies.push_back({p.src(), p.dst()});
  for (const v1::ScheduledSequence& p : in.scheduled()) {
    ScheduledSequence& s = out.scheduled.emplace_back();
    s.seq_id = p.seq_id();
    s.token_ids = ToVector<int>(p.token_ids());
    s.num_computed_tokens = p.num_computed_tokens();
    s.num_kept_blocks = p.num_kept_blocks();
    s.new_block_ids = ToVector<int>(p.new_block_ids());
    s.sample = p.sample();
    s.prompt_logprobs = p.prompt_logprobs();
    s.num_draft_tokens = p.num_draft_tokens();  // the worker checks it against token_ids
    s.constrained = p.constrained();
    s.allowed_ids = ToVector<int>(p.allowed_ids());
    const std::string& mask = p.allowed_mask();
    // A length that is not whole words gets one word too many, which the worker refuses.
    s.allowed_mask.resize((mask.size() + 7) / 8 + (mask.size() % 8 != 0 ? 1 : 0));
    if (!mask.empty()) std::memcpy(s.allowed_mask.data(), mask.data(), mask.size());
  }
  PullsFromProto(in, &out);
  return out;
}

void ToProto(const StepResult& in, v1::StepResult* out) {
  out->set_step_id(in.step_id);
  out->set_forward_seconds(in.forward_seconds);
  for (const SampledToken& t : in.sampled) {
    v1::SampledToken* p = out->add_sampled();
    p->set_seq_id(t.seq_id);
    p->set_token_id(t.token_id);
    p->set_logprob(t.logprob);
    for (const TokenLogprob& top : t.top_logprobs) {
      p->add_top_token_ids(top.token_id);
      p->add_top_logprobs(top.logprob);
    }
  }
  for (const PromptLogprobs& l : in.prompt_logprobs) {
    v1::PromptLogprobs* p = out->add_prompt_logprobs();
    p->set_seq_id(l.seq_id);
    p->set_first_position(l.first_position);
    p->mutable_logprobs()->Add(l.logprobs.begin(), l.logprobs.end());
    p->mutable_ranks()->Add(l.ranks.begin(), l.ranks.end());
    for (const TokenLogprob& top : l.top) {
      p->add_top_token_ids(top.token_id);
      p->add_top_logprobs(top.logprob);
    }
  }
  for (const Embedding& e : in.embeddings) {
    v1::Embedding* p = out->add_embeddings();
    p->set_seq_id(e.seq_id);
    p->mutable_values()->Add(e.values.begin(), e.values.end());
  }
  TransfersToProto(in, out);
  if (in.stage.wait_seconds != 0 || in.stage.send_seconds != 0 || in.stage.sent_bytes != 0) {
    v1::StageTiming* stage = out->mutable_stage();
    stage->set_wait_seconds(in.stage.wait_seconds);
    stage->set_send_seconds(in.stage.send_seconds);
    stage->set_sent_bytes(in.stage.sent_bytes);
  }
}

StepResult FromProto(const v1::StepResult& in) {
  StepResult out;
  out.step_id = in.step_id();
  out.forward_seconds = in.forward_seconds();
  out.stage = {.wait_seconds = in.stage().wait_seconds(),
               .send_seconds = in.stage().send_seconds(),
               .sent_bytes = in.stage().sent_bytes()};
  for (const v1::SampledToken& p : in.sampled()) {
    SampledToken& t = out.sampled.emplace_back();
    t.seq_id = p.seq_id();
    t.token_id = p.token_id();
    t.logprob = p.logprob();
    const int n = std::min(p.top_token_ids_size(), p.top_logprobs_size());
    for (int i = 0; i < n; ++i) t.top_logprobs.push_back({p.top_token_ids(i), p.top_logprobs(i)});
  }
  // Sizes are the router's to check (router/core/step_check.h).
  for (const v1::PromptLogprobs& p : in.prompt_logprobs()) {
    PromptLogprobs& l = out.prompt_logprobs.emplace_back();
    l.seq_id = p.seq_id();
    l.first_position = p.first_position();
    l.logprobs = ToVector<float>(p.logprobs());
    l.ranks = ToVector<int>(p.ranks());
    const int n = std::min(p.top_token_ids_size(), p.top_logprobs_size());
    for (int i = 0; i < n; ++i) l.top.push_back({p.top_token_ids(i), p.top_logprobs(i)});
  }
  for (const v1::Embedding& p : in.embeddings()) {
    out.embeddings.push_back({p.seq_id(), ToVector<float>(p.values())});
  }
  TransfersFromProto(in, &out);
  return out;
}

void ToProto(const WorkerInfo& in, v1::Hello* out) {
  out->set_model_fingerprint(in.model_fingerprint);
  out->set_num_blocks(in.num_blocks);
  out->set_block_size(in.block_size);
  out->set_max_num_batched_tokens(in.max_num_batched_tokens);
  out->set_max_num_seqs(in.max_num_seqs);
  out->set_kv_cache_dtype(in.kv_cache_dtype);
  out->set_kv_transfer_address(in.kv_transfer_address);
  for (const AdapterInfo& a : in.adapters) ToProto(a, out->add_adapters());
  out->set_max_loras(in.max_loras);
  out->set_max_cpu_loras(in.max_cpu_loras);
  out->set_layer_begin(in.layer_begin);
  out->set_layer_end(in.layer_end);
}

void ToProto(const AdapterInfo& in, v1::Adapter* out) {
  out->set_name(in.name);
  out->set_rank(in.rank);
  out->set_digest(in.digest);
}

AdapterInfo FromProto(const v1::Adapter& in) { return {in.name(), in.rank(), in.digest()}; }

WorkerInfo FromProto(const v1::Hello& in) {
  WorkerInfo out;
  out.model_fingerprint = in.model_fingerprint();
  out.num_blocks = in.num_blocks();
  out.block_size = in.block_size();
  out.max_num_batched_tokens = in.max_num_batched_tokens();
  out.max_num_seqs = in.max_num_seqs();
  out.kv_cache_dtype = in.kv_cache_dtype();
  out.kv_transfer_address = in.kv_transfer_address();
  for (const v1::Adapter& a : in.adapters()) out.adapters.push_back(FromProto(a));
  out.max_loras = in.max_loras();
  out.max_cpu_loras = in.max_cpu_loras();
  out.layer_begin = in.layer_begin();
  out.layer_end = in.layer_end();
  return out;
}

void ToProto(std::span<const CachedBlock> in, v1::Hello* out) {
  for (const CachedBlock& c : in) {
    v1::CachedBlock* p = out->add_cached_blocks();
    p->set_block(c.block);
    p->set_parent(c.parent);
    p->mutable_tokens()->Add(c.tokens.begin(), c.tokens.end());
  }
}

std::vector<CachedBlock> CachedBlocksFromProto(const v1::Hello& in) {
  std::vector<CachedBlock> out;
  out.reserve(in.cached_blocks_size());  // sized by a message already received
  for (const v1::CachedBlock& p : in.cached_blocks()) {
    out.push_back({.block = p.block(), .parent = p.parent(), .tokens = ToVector<int>(p.tokens())});
  }
  return out;
}

}  // namespace pagoda
