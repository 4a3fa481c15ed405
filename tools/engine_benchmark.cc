// Engine throughput on a random-weight model (values don't matter for speed), through the same
// Engine → InProcessExecutor → WorkerEngine path as `pagoda run`:
//   BM_Prefill/P      one prompt of P tokens, 1 output token      (items = prompt tokens); its
//                     time is how long a step with a P-token prefill chunk holds every decode
//                     (P up to the model's context)
//   BM_Decode/S       one step of S sequences that are decoding    (items = tokens generated)
//   BM_PrefillDeep/P  BM_Prefill at 4k-32k tokens, one iteration each (a 16k prefill of the
//                     1.1B shape takes minutes); prefill runs in chunks of 2,048 tokens
//   BM_DecodeAt/S/D   one decode step of S sequences, each D tokens deep (items = tokens
//                     generated); the D cached tokens are never computed: the sequences are
//                     handed to the worker as prefix-cache hits on blocks no one wrote, whose
//                     contents do not change the speed (so no S x D-token prefill first)
//   BM_Verify/Q       one sequence's step of Q query tokens after a 256-token prompt: its last
//                     token and a draft of Q - 1 (speculative decoding's verification, logits
//                     at all Q rows; items = steps). Q = 1 is a plain decode step. Where its
//                     time leaves BM_Verify/1's is where a wider draft stops being nearly free
//                     (router/spec/speculative.h, --speculative-max-step-tokens).
// Shape: $PAGODA_BENCH_SHAPE (default stories110M; see common/model/random_weights.cc), or a
// model in $PAGODA_BENCH_MODEL: a GGUF file, a llama2.c checkpoint or an HF directory, loaded
// as the worker loads it. Threads: OMP_NUM_THREADS. Kernels: PAGODA_ISA.
// Weights: $PAGODA_BENCH_WEIGHTS = any --weight-dtype the worker takes (f32, bf16, int8, and
// int4 once it exists); unset: f32 for a random model, auto (per tensor) for a file.
// bf16 weights' arithmetic: $PAGODA_BENCH_COMPUTE = auto (default), f32 or bf16 (--compute-dtype);
// which bf16 engine: PAGODA_MATMUL = ours or onednn (worker/linear.h).
// KV cache element type: $PAGODA_BENCH_KV = f32 (default), bf16 or f16 (in the context); its
// size: $PAGODA_BENCH_KV_GIB (default 1; rows that do not fit it are skipped, with a message).
// Context of a named shape: $PAGODA_BENCH_CONTEXT tokens (default the shape's own, 2,048 for
// 1B): the depth rows need 32,768.
// Beside tok/s each reports GFLOP/s (matmuls and attention) and roof: the share of this
// machine's roof the steps reach, the roof being max(flops / FMA peak, bytes / read bandwidth)
// per step (tools/roofline.h, for the ISA in use). The FMA peak is measured at start; the read
// bandwidth is sampled between the timed steps (read_GBps: bytes over seconds of the samples),
// because a shared VM's bandwidth moves by 2x within seconds (docs/BENCHMARKS.md §20). Either
// can be fixed by $PAGODA_ROOF_GFLOPS and $PAGODA_ROOF_GBS. The bytes count the K/V each step
// reads beside the weights; kv_share is the K/V's part of them.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/dtype_flags.h"
#include "common/executor.h"
#include "common/model/model_loader.h"
#include "common/model/random_weights.h"
#include "common/step.h"
#include "glog/logging.h"
#include "router/core/engine.h"
#include "tools/roofline.h"
#include "worker/in_process_executor.h"
#include "worker/kernels/isa.h"

namespace pagoda {
namespace {

// $PAGODA_BENCH_KV, read before any benchmark runs: a bad value stops the program at once, and
// the context printed at start names it.
const KvDtype kBenchKv = [] {
  const char* kv = std::getenv("PAGODA_BENCH_KV");
  absl::StatusOr<KvDtype> dtype = ParseKvCacheDtype(kv ? kv : "f32");
  if (!dtype.ok()) {
    std::cerr << "PAGODA_BENCH_KV: " << dtype.status().message() << "\n";
    std::exit(2);
  }
  benchmark::AddCustomContext("kv_cache_dtype", KvDtypeName(*dtype));
  return *dtype;
}();

// Query rows of a sequence that share each K/V block load (kTileRows in paged_attention.cc).
constexpr int kAttentionTileRows = 16;

struct Bench {
  ModelConfig config;
  std::unique_ptr<InProcessExecutor> executor;
  std::unique_ptr<Engine> engine;
  std::mt19937 rng{1};
  int64_t next_request_id = 0;
  double kv_elem_bytes = 4;  // of the KV cache's dtype (int8: 1 and its row's scale, shared)

  std::vector<int> RandomPrompt(int n) {
    std::uniform_int_distribution<int> id(3, config.vocab_size - 1);
    std::vector<int> p = {1};
    while (static_cast<int>(p.size()) < n) p.push_back(id(rng));
    return p;
  }
  void RunToCompletion() {
    while (engine->has_unfinished()) CHECK(engine->Step().ok());
  }

  // Work of a step: `rows` tokens at context lengths ctx_first, ctx_first + ctx_step, ... (each
  // attends to that many positions), `logits` rows through the classifier. Rows of one sequence
  // (ctx_step 1) read each K/V block once per tile of kAttentionTileRows (paged_attention.cc).
  struct Work {
    double flops = 0, bytes = 0;
    double kv_bytes = 0;  // of `bytes`
  };
  Work StepWork(int rows, int ctx_first, int ctx_step, int logits) const {
    const ModelConfig& c = config;
    const double q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
    const double layer_weights =
        c.dim * (q + 2 * kv) + q * c.dim + 3.0 * c.dim * c.hidden_dim;  // per layer
    const double classifier = static_cast<double>(c.dim) * c.vocab_size;
    Work w;
    w.flops = 2 * (rows * layer_weights * c.num_layers + logits * classifier);
    w.bytes = weight_bytes * (layer_weights * c.num_layers + classifier);
    for (int r = 0; r < rows; ++r) {
      const double ctx = ctx_first + static_cast<double>(r) * ctx_step;
      w.flops += 4 * ctx * q * c.num_layers;                      // q·k and p·v
      w.kv_bytes += kv_elem_bytes * 2 * ctx * kv * c.num_layers;  // K and V read
    }
    if (ctx_step == 1) w.kv_bytes /= std::min(rows, kAttentionTileRows);
    w.bytes += w.kv_bytes;
    return w;
  }
  // Weights of every matrix, the embedding table included.
  double MatrixWeights() const {
    const ModelConfig& c = config;
    const double q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
    const double layer = c.dim * (q + 2 * kv) + q * c.dim + 3.0 * c.dim * c.hidden_dim;
    return layer * c.num_layers + (c.tied_embeddings ? 1.0 : 2.0) * c.dim * c.vocab_size;
  }
  // Seconds the roof allows for `w`.
  double RoofSeconds(const Work& w) const {
    return std::max(w.flops / (peak_gflops * 1e9), w.bytes / (read_gbs * 1e9));
  }
  double peak_gflops = 0, read_gbs = 0;
  bool fixed_read_gbs = false;  // $PAGODA_ROOF_GBS: not sampled
  std::unique_ptr<roofline::ReadBuffer> read_buffer;
  // Samples of the read bandwidth taken during one benchmark.
  double sampled_bytes = 0, sampled_seconds = 0;
  void SampleReadBandwidth() {
    if (fixed_read_gbs) return;
    sampled_seconds += read_buffer->ReadOnce();
    sampled_bytes += roofline::ReadBuffer::kBytes;
    read_gbs = sampled_bytes / sampled_seconds / 1e9;
  }
  // Bytes per weight as packed (f32 4, bf16 2, int8 34/32; a mix for auto on a file), from the
  // worker's weight bytes. The FMA peak stays f32's: int8's integer dot products can beat it
  // (VNNI multiplies 4 bytes per 32-bit lane).
  double weight_bytes = 4;
};

void MeasureRoof(Bench& b) {
  const char* gflops = std::getenv("PAGODA_ROOF_GFLOPS");
  const char* gbs = std::getenv("PAGODA_ROOF_GBS");
  const bool avx512 = std::string(ActiveKernels().name) == "avx512";
  b.peak_gflops = gflops ? std::atof(gflops) : roofline::PeakGflops(avx512, 50'000'000);
  if (gbs) {
    b.read_gbs = std::atof(gbs);
    b.fixed_read_gbs = true;
  } else {
    b.read_buffer = std::make_unique<roofline::ReadBuffer>();
    b.SampleReadBandwidth();
  }
  LOG(INFO) << "roof (" << ActiveKernels().name << "): " << b.peak_gflops << " GFLOP/s, "
            << b.read_gbs << " GB/s" << (gbs ? "" : " at start, sampled again during each run");
}

// GFLOP/s and roof share of `iterations` steps of `w` that took the benchmark's time.
void ReportWork(benchmark::State& state, const Bench& b, const Bench::Work& w) {
  state.counters["GFLOP/s"] = benchmark::Counter(w.flops / 1e9, benchmark::Counter::kIsRate);
  // Roof seconds per second spent: 1.0 when every step runs at the roof.
  state.counters["roof"] = benchmark::Counter(b.RoofSeconds(w), benchmark::Counter::kIsRate);
  state.counters["read_GBps"] = b.read_gbs;
  state.counters["kv_share"] = w.bytes > 0 ? w.kv_bytes / w.bytes : 0;
}

// Starts the bandwidth samples of one benchmark.
void StartSamples(Bench& b) {
  b.sampled_bytes = b.sampled_seconds = 0;
  b.SampleReadBandwidth();
}

// Between timed steps: a read-bandwidth sample every `every` iterations.
void MaybeSample(benchmark::State& state, Bench& b, int64_t iteration, int every) {
  if (b.fixed_read_gbs || iteration % every != every - 1) return;
  state.PauseTiming();
  b.SampleReadBandwidth();
  state.ResumeTiming();
}

Bench& GetBench() {
  static Bench* bench = [] {
    auto* b = new Bench;
    std::unique_ptr<WeightSource> source;
    WorkerOptions wo;
    if (const char* path = std::getenv("PAGODA_BENCH_MODEL")) {
      auto s = OpenWeightSource(path);
      CHECK(s.ok()) << s.status();
      source = *std::move(s);
    } else {
      const char* shape = std::getenv("PAGODA_BENCH_SHAPE");
      ModelConfig c;
      CHECK(NamedModelConfig(shape ? shape : "stories110M", &c)) << shape;
      if (const char* context = std::getenv("PAGODA_BENCH_CONTEXT")) {
        c.max_seq_len = std::atoi(context);
        CHECK_GT(c.max_seq_len, 0) << "PAGODA_BENCH_CONTEXT=" << context;
      }
      auto s = WeightSource::FromWeights(RandomModelWeights(c, 1));
      CHECK(s.ok()) << s.status();
      source = *std::move(s);
      wo.weight_dtype = WeightDtype::kF32;
    }
    b->config = source->config();
    const char* dtype = std::getenv("PAGODA_BENCH_WEIGHTS");
    if (dtype && *dtype) {
      absl::StatusOr<std::optional<WeightDtype>> d = ParseWeightDtype(dtype);
      CHECK(d.ok()) << "PAGODA_BENCH_WEIGHTS=" << dtype << ": " << d.status().message();
      wo.weight_dtype = *d;  // auto: nullopt, per tensor
    }
    if (const char* compute = std::getenv("PAGODA_BENCH_COMPUTE"); compute && *compute) {
      absl::StatusOr<ComputeDtype> c = ParseComputeDtypeFlag("PAGODA_BENCH_COMPUTE", compute);
      CHECK(c.ok()) << c.status().message();
      wo.compute_dtype = *c;
    }
    wo.kv_cache_dtype = kBenchKv;
    b->kv_elem_bytes =
        static_cast<double>(KvRowBytes(kBenchKv, b->config.head_dim)) / b->config.head_dim;
    const char* kv_gib = std::getenv("PAGODA_BENCH_KV_GIB");
    wo.kv_cache_bytes = static_cast<int64_t>((kv_gib ? std::atof(kv_gib) : 1.0) * (1LL << 30));
    CHECK_GT(wo.kv_cache_bytes, 0) << "PAGODA_BENCH_KV_GIB=" << kv_gib;
    wo.max_num_batched_tokens = 2048;
    auto worker = WorkerEngine::Create(*source, wo);
    CHECK(worker.ok()) << worker.status();
    source.reset();
    b->weight_bytes = (*worker)->weight_bytes() / b->MatrixWeights();
    b->executor = std::make_unique<InProcessExecutor>(*std::move(worker));
    EngineOptions eo;
    eo.max_num_batched_tokens = 2048;
    b->engine = std::make_unique<Engine>(b->config, b->executor.get(), eo);
    MeasureRoof(*b);
    return b;
  }();
  return *bench;
}

GenerationRequest Request(std::vector<int> prompt, int max_tokens) {
  GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  return r;
}

void BM_Prefill(benchmark::State& state) {
  Bench& b = GetBench();
  // The one output token must fit the context too.
  const int prompt_len = std::min(static_cast<int>(state.range(0)), b.config.max_seq_len - 1);
  StartSamples(b);
  for (auto _ : state) {
    state.PauseTiming();
    if (!b.fixed_read_gbs) b.SampleReadBandwidth();
    // Random prompts: no cache hits.
    CHECK(b.engine->AddRequest(b.next_request_id++, Request(b.RandomPrompt(prompt_len), 1)).ok());
    state.ResumeTiming();
    b.RunToCompletion();
  }
  state.SetItemsProcessed(state.iterations() * prompt_len);
  Bench::Work w = b.StepWork(prompt_len, 1, 1, 1);
  w.flops *= state.iterations();
  w.bytes *= state.iterations();
  w.kv_bytes *= state.iterations();
  ReportWork(state, b, w);
}

void BM_Decode(benchmark::State& state) {
  Bench& b = GetBench();
  const int num_seqs = static_cast<int>(state.range(0));
  const int prompt_len = 32, budget = 400;  // decode positions 32..~300: a typical short chat
  for (int i = 0; i < num_seqs; ++i) {
    CHECK(b.engine->AddRequest(b.next_request_id++, Request(b.RandomPrompt(prompt_len), budget))
              .ok());
  }
  CHECK(b.engine->Step().ok());  // all prefills fit one step; from here every step decodes
  Bench::Work total;
  int ctx = prompt_len + 1;  // the first decode attends to the prompt and itself
  StartSamples(b);
  int64_t iteration = 0;
  for (auto _ : state) {
    MaybeSample(state, b, iteration++, 4);
    auto updates = b.engine->Step();
    CHECK(updates.ok() && static_cast<int>(updates->size()) == num_seqs);
    const Bench::Work w = b.StepWork(num_seqs, ctx++, 0, num_seqs);
    total.flops += w.flops;
    total.bytes += w.bytes;
    total.kv_bytes += w.kv_bytes;
  }
  state.SetItemsProcessed(state.iterations() * num_seqs);
  ReportWork(state, b, total);
  b.RunToCompletion();  // after the timed loop: not measured
}

// BM_Prefill at lengths the short rows' shapes cannot hold: skipped where the context is shorter.
void BM_PrefillDeep(benchmark::State& state) {
  if (state.range(0) >= GetBench().config.max_seq_len) {
    state.SkipWithError("longer than the context ($PAGODA_BENCH_CONTEXT)");
    return;
  }
  BM_Prefill(state);
}

// A step id and sequence ids no Engine step uses.
int64_t NextDirectStepId() {
  static int64_t step_id = int64_t{1} << 40;
  return step_id++;
}

// The timed loop of a benchmark that sends `command` straight to the executor, a fresh step id
// each time, with a read-bandwidth sample every `sample_every` iterations.
void ExecuteEachIteration(benchmark::State& state, Bench& b, StepCommand& command,
                          int sample_every) {
  StartSamples(b);
  int64_t iteration = 0;
  for (auto _ : state) {
    MaybeSample(state, b, iteration++, sample_every);
    command.step_id = NextDirectStepId();
    const absl::StatusOr<StepResult> result = b.executor->Execute(command);
    CHECK(result.ok()) << result.status();
  }
}

// Drives the executor directly: S sequences start as prefix-cache hits of D tokens on blocks
// no step wrote (zeros, or what an earlier benchmark left: any finite K/V runs at the same
// speed), then every timed step decodes the token at position D again. It uses the pool's last
// blocks, as BM_Verify does.
void BM_DecodeAt(benchmark::State& state) {
  Bench& b = GetBench();
  const int num_seqs = static_cast<int>(state.range(0)), depth = static_cast<int>(state.range(1));
  const WorkerInfo& info = b.executor->info();
  const int blocks_per_seq = depth / info.block_size + 1;  // positions 0..depth
  if (depth + 1 > b.config.max_seq_len) {
    state.SkipWithError("deeper than the context ($PAGODA_BENCH_CONTEXT)");
    return;
  }
  if (num_seqs * blocks_per_seq > info.num_blocks) {
    state.SkipWithError("the KV pool is too small ($PAGODA_BENCH_KV_GIB)");
    return;
  }
  StepCommand start;
  start.step_id = NextDirectStepId();
  std::vector<int64_t> seq_ids;
  int next_block = info.num_blocks - num_seqs * blocks_per_seq;
  for (int s = 0; s < num_seqs; ++s) {
    const int64_t seq_id = (int64_t{1} << 40) + b.next_request_id++;
    seq_ids.push_back(seq_id);
    NewSequence& fresh = start.new_sequences.emplace_back();
    fresh.seq_id = seq_id;
    fresh.sampling.temperature = 0;
    fresh.prompt_ids = b.RandomPrompt(depth + 1);
    std::vector<int> blocks(blocks_per_seq);
    std::iota(blocks.begin(), blocks.end(), next_block);
    next_block += blocks_per_seq;
    start.scheduled.push_back({.seq_id = seq_id,
                               .token_ids = {fresh.prompt_ids.back()},
                               .num_computed_tokens = depth,
                               .num_kept_blocks = 0,
                               .new_block_ids = std::move(blocks),
                               .sample = true});
  }
  CHECK(b.executor->Execute(start).ok());
  StepCommand decode;
  for (const ScheduledSequence& s : start.scheduled) {
    decode.scheduled.push_back({.seq_id = s.seq_id,
                                .token_ids = s.token_ids,
                                .num_computed_tokens = depth,
                                .num_kept_blocks = blocks_per_seq,
                                .new_block_ids = {},
                                .sample = true});
  }
  ExecuteEachIteration(state, b, decode, /*sample_every=*/2);
  state.SetItemsProcessed(state.iterations() * num_seqs);
  Bench::Work w = b.StepWork(num_seqs, depth + 1, 0, num_seqs);
  w.flops *= state.iterations();
  w.bytes *= state.iterations();
  w.kv_bytes *= state.iterations();
  ReportWork(state, b, w);
  StepCommand finish;
  finish.step_id = NextDirectStepId();
  finish.finished_ids = seq_ids;
  CHECK(b.executor->Execute(finish).ok());
}

// Drives the executor directly (the Engine schedules a draft only where its proposer finds one):
// one sequence, prefilled once, then the same Q positions after the prompt verified every step.
// It uses the pool's last blocks, which the benchmarks above may have left in the Engine's
// prefix cache: their contents change, their speed does not (run it alone for exact outputs).
void BM_Verify(benchmark::State& state) {
  Bench& b = GetBench();
  const int q = static_cast<int>(state.range(0));
  const int prompt_len = std::min(256, b.config.max_seq_len - q);
  const WorkerInfo& info = b.executor->info();
  const int num_blocks = (prompt_len + q + info.block_size - 1) / info.block_size;
  CHECK_LE(num_blocks, info.num_blocks);
  std::vector<int> blocks;
  for (int i = 0; i < num_blocks; ++i) blocks.push_back(info.num_blocks - num_blocks + i);
  const int64_t seq_id = (int64_t{1} << 40) + b.next_request_id++;
  StepCommand prefill;
  prefill.step_id = NextDirectStepId();
  NewSequence& fresh = prefill.new_sequences.emplace_back();
  fresh.seq_id = seq_id;
  fresh.sampling.temperature = 0;
  fresh.prompt_ids = b.RandomPrompt(prompt_len);
  prefill.scheduled.push_back({.seq_id = seq_id,
                               .token_ids = fresh.prompt_ids,
                               .num_computed_tokens = 0,
                               .num_kept_blocks = 0,
                               .new_block_ids = blocks,
                               .sample = true});
  CHECK(b.executor->Execute(prefill).ok());
  // The draft is random tokens: greedy verification keeps none, so each step samples once, as
  // a draft that misses does; the forward pass (logits at all q rows) is the same either way.
  StepCommand verify;
  verify.scheduled.push_back({.seq_id = seq_id,
                              .token_ids = b.RandomPrompt(q),
                              .num_computed_tokens = prompt_len,
                              .num_kept_blocks = num_blocks,
                              .new_block_ids = {},
                              .sample = true,
                              .num_draft_tokens = q - 1});
  ExecuteEachIteration(state, b, verify, /*sample_every=*/4);
  state.SetItemsProcessed(state.iterations());
  Bench::Work w = b.StepWork(q, prompt_len + 1, 1, q);
  w.flops *= state.iterations();
  w.bytes *= state.iterations();
  w.kv_bytes *= state.iterations();
  ReportWork(state, b, w);
  StepCommand finish;
  finish.step_id = NextDirectStepId();
  finish.finished_ids.push_back(seq_id);
  CHECK(b.executor->Execute(finish).ok());
}

BENCHMARK(BM_Prefill)
    ->Arg(128)
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)  // stories110M's whole context (less the output token)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(3.0)
    ->UseRealTime();
BENCHMARK(BM_Decode)
    ->Arg(1)
    ->Arg(32)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(200)
    ->UseRealTime();
// The lengths people run (issue 42): PAGODA_BENCH_SHAPE=1B PAGODA_BENCH_CONTEXT=32768, and a
// KV pool to hold them (docs/BENCHMARKS.md §28).
BENCHMARK(BM_PrefillDeep)
    ->Arg(4096)
    ->Arg(8192)
    ->Arg(16384)
    ->Arg(32768)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();
BENCHMARK(BM_DecodeAt)
    ->ArgsProduct({{1, 8, 32}, {0, 4096, 8192, 16384}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20)
    ->UseRealTime();
BENCHMARK(BM_Verify)
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->Arg(32)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

}  // namespace
}  // namespace pagoda

BENCHMARK_MAIN();
