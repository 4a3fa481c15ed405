#include "worker/onednn_matmul.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "worker/huge_page_buffer.h"

namespace pagoda {
namespace {

using dnnl::memory;
using Dt = memory::data_type;
using Tag = memory::format_tag;

constexpr int kPanelWidth = 64;
constexpr int kOneDnnKBlock = 32;  // BA16a64b2a: 16 pairs of k per block

int RoundUp(int x, int to) { return (x + to - 1) / to * to; }

// One CPU engine and stream for the process (oneDNN runs on the OpenMP threads).
struct Cpu {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};
Cpu& TheCpu() {
  static Cpu* const cpu = new Cpu;
  return *cpu;
}

struct Primitive {
  dnnl::matmul matmul;
  memory::desc src, dst;
  std::string impl;
};

// What a primitive depends on: k, n, rows, bias, accumulate (not the weights' values, and the
// weights' layout follows from k and n on one CPU). y is dense: oneDNN 2.6's brgemm takes no
// row stride (it falls back to ref:any), so a wider y goes through a dense buffer.
using PrimitiveKey = std::tuple<int, int, int, bool, bool>;

absl::StatusOr<dnnl::matmul::primitive_desc> MakeDesc(const PrimitiveKey& key,
                                                      const memory::desc& weights) {
  const auto [k, n, rows, has_bias, accumulate] = key;
  const memory::desc src({rows, k}, Dt::bf16, Tag::ab);
  const memory::desc dst({rows, n}, Dt::f32, Tag::ab);
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  try {
    const dnnl::matmul::desc desc =
        has_bias ? dnnl::matmul::desc(src, weights, memory::desc({1, n}, Dt::f32, Tag::ab), dst)
                 : dnnl::matmul::desc(src, weights, dst);
    dnnl::matmul::primitive_desc pd(desc, attr, TheCpu().engine);
    // The reference implementation runs 200x slower than brgemm or worse: never on the hot path.
    if (absl::StrContains(pd.impl_info_str(), "ref")) {
      return absl::UnimplementedError(absl::StrCat("oneDNN has only ", pd.impl_info_str(),
                                                   " for a bf16 matmul ", k, " -> ", n, " of ",
                                                   rows, " rows on this CPU"));
    }
    return pd;
  } catch (const dnnl::error& e) {
    return absl::UnimplementedError(absl::StrCat("oneDNN has no bf16 matmul ", k, " -> ", n, " of ",
                                                 rows, " rows: ", e.what()));
  }
}

// Primitives depend on the shape, not the weights, so every matmul of one shape shares them.
// They are never freed (at most chunk_rows per shape, ~60 KB each).
absl::Mutex cache_mu;
absl::flat_hash_map<PrimitiveKey, std::unique_ptr<const Primitive>>& Cache()
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(cache_mu) {
  static auto* const cache =
      new absl::flat_hash_map<PrimitiveKey, std::unique_ptr<const Primitive>>;
  return *cache;
}

absl::StatusOr<const Primitive*> GetPrimitive(const PrimitiveKey& key,
                                              const memory::desc& weights) {
  absl::MutexLock lock(&cache_mu);
  auto it = Cache().find(key);
  if (it != Cache().end()) return it->second.get();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<dnnl::matmul::primitive_desc> pd = MakeDesc(key, weights);
  if (!pd.ok()) return pd.status();
  auto primitive = std::make_unique<Primitive>(
      Primitive{dnnl::matmul(*pd), pd->src_desc(), pd->dst_desc(), pd->impl_info_str()});
  VLOG(1)
      << "oneDNN matmul " << std::get<0>(key) << " -> " << std::get<1>(key) << ", "
      << std::get<2>(key) << " rows: " << primitive->impl << " made in "
      << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count()
      << " ms";
  return Cache().emplace(key, std::move(primitive)).first->second.get();
}

}  // namespace

void RoundToBf16(const float* x, int64_t count, uint16_t* out) {
  // Branch-free, so that it vectorises; parallel only where that pays for the fork.
#pragma omp parallel for schedule(static) if (count >= (int64_t{1} << 16))
  for (int64_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, 4);
    const uint32_t rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16;
    const uint32_t quiet_nan = (bits >> 16) | 0x40;
    out[i] = static_cast<uint16_t>((bits & 0x7FFFFFFF) > 0x7F800000 ? quiet_nan : rounded);
  }
}

struct OneDnnBf16Matmul::State {
  int n = 0, k = 0, chunk_rows = 0;
  bool accumulate = false;
  std::vector<float> bias;  // (n) or empty
  memory bias_memory;       // over `bias`
  memory::desc weights_desc;
  memory weights;      // over the caller's panels or `own`
  HugePageBuffer own;  // the weights in oneDNN's layout, when not the caller's
  std::string impl;    // of a chunk of chunk_rows rows
};

namespace {

// Per thread, shared by every matmul (one per matmul would cost ~100 MB in a 1B model).
struct Scratch {
  std::vector<uint16_t> x_bf16;  // (chunk_rows, k): one chunk of x, rounded
  std::vector<float> y_dense;    // (chunk_rows, n): one chunk of a y wider than n
};
Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

}  // namespace

absl::StatusOr<std::unique_ptr<OneDnnBf16Matmul>> OneDnnBf16Matmul::Create(
    const uint16_t* panels, int n, int k, int k_padded, const float* bias, bool accumulate,
    int chunk_rows) {
  CHECK(n > 0 && k > 0 && k <= k_padded && k_padded % 16 == 0 && chunk_rows > 0)
      << "n " << n << " k " << k << " k_padded " << k_padded << " chunk_rows " << chunk_rows;
  Cpu& cpu = TheCpu();
  auto state = std::make_unique<State>();
  state->n = n;
  state->k = k;
  state->chunk_rows = chunk_rows;
  state->accumulate = accumulate;
  if (bias != nullptr) {
    state->bias.assign(bias, bias + n);
    // oneDNN reads the bias, never writes it.
    state->bias_memory =
        memory({{1, n}, Dt::f32, Tag::ab}, cpu.engine, const_cast<float*>(state->bias.data()));
  }
  const bool has_bias = bias != nullptr;

  // The layout oneDNN picks on this CPU, against ours.
  const memory::desc ours({k, n}, Dt::bf16, Tag::BA16a64b2a);
  absl::StatusOr<dnnl::matmul::primitive_desc> any_pd =
      MakeDesc({k, n, chunk_rows, has_bias, accumulate}, memory::desc({k, n}, Dt::bf16, Tag::any));
  if (!any_pd.ok()) return any_pd.status();
  state->weights_desc = any_pd->weights_desc();
  const int onednn_k_padded = RoundUp(k, kOneDnnKBlock);
  const bool in_place = state->weights_desc == ours && k_padded == onednn_k_padded;
  if (in_place) {
    // oneDNN never writes weights: the const_cast only fits its API.
    state->weights = memory(ours, cpu.engine, const_cast<uint16_t*>(panels));
  } else {
    // Ours with k padded to oneDNN's 32 (panels start k_padded · 64 apart in the caller's).
    const size_t panel = static_cast<size_t>(onednn_k_padded) * kPanelWidth;
    const int num_panels = (n + kPanelWidth - 1) / kPanelWidth;
    std::vector<uint16_t> staged(panel * num_panels, 0);
    const size_t copied = static_cast<size_t>(std::min(k_padded, onednn_k_padded)) * kPanelWidth;
    for (int p = 0; p < num_panels; ++p) {
      std::memcpy(staged.data() + p * panel,
                  panels + static_cast<size_t>(p) * k_padded * kPanelWidth, copied * 2);
    }
    state->own = HugePageBuffer((state->weights_desc.get_size() + 3) / 4);
    state->weights = memory(state->weights_desc, cpu.engine, state->own.data());
    if (state->weights_desc == ours) {
      std::memcpy(state->own.data(), staged.data(), staged.size() * 2);
    } else {
      memory from(ours, cpu.engine, staged.data());
      dnnl::reorder(from, state->weights).execute(cpu.stream, from, state->weights);
      cpu.stream.wait();
    }
  }

  for (const int rows : {1, chunk_rows}) {
    absl::StatusOr<const Primitive*> primitive =
        GetPrimitive({k, n, rows, has_bias, accumulate}, state->weights_desc);
    if (!primitive.ok()) return primitive.status();
    state->impl = (*primitive)->impl;
  }
  {
    static absl::Mutex logged_mu;
    static auto* const logged = new absl::flat_hash_set<std::pair<int, int>>;
    absl::MutexLock lock(&logged_mu);
    if (logged->insert({k, n}).second) {
      LOG(INFO) << "oneDNN bf16 matmul " << k << " -> " << n << ": " << state->impl << ", "
                << (in_place ? "on the shared panels" : "on its own reordered copy");
    }
  }
  return std::unique_ptr<OneDnnBf16Matmul>(new OneDnnBf16Matmul(std::move(state)));
}

OneDnnBf16Matmul::OneDnnBf16Matmul(std::unique_ptr<State> state) : state_(std::move(state)) {}
OneDnnBf16Matmul::~OneDnnBf16Matmul() = default;

int OneDnnBf16Matmul::n() const { return state_->n; }
int OneDnnBf16Matmul::k() const { return state_->k; }
bool OneDnnBf16Matmul::uses_caller_layout() const { return state_->own.data() == nullptr; }
std::string OneDnnBf16Matmul::impl_name() const { return state_->impl; }

absl::Status OneDnnBf16Matmul::Run(const float* x, int rows, float* y, int ldy) const {
  const State& s = *state_;
  if (ldy == 0) ldy = s.n;
  CHECK(rows > 0 && ldy >= s.n) << "rows " << rows << " ldy " << ldy << " n " << s.n;
  Scratch& scratch = ThreadScratch();
  const size_t chunk_rows = static_cast<size_t>(std::min(rows, s.chunk_rows));
  if (scratch.x_bf16.size() < chunk_rows * s.k) scratch.x_bf16.resize(chunk_rows * s.k);
  if (ldy != s.n && scratch.y_dense.size() < chunk_rows * s.n) {
    scratch.y_dense.resize(chunk_rows * s.n);
  }
  for (int row = 0; row < rows; row += s.chunk_rows) {
    const int chunk = std::min(s.chunk_rows, rows - row);
    RoundToBf16(x + static_cast<size_t>(row) * s.k, static_cast<int64_t>(chunk) * s.k,
                scratch.x_bf16.data());
    float* const y_chunk = y + static_cast<size_t>(row) * ldy;
    if (ldy == s.n || chunk == 1) {
      absl::Status status = RunChunk(scratch.x_bf16.data(), chunk, y_chunk);
      if (!status.ok()) return status;
      continue;
    }
    const size_t row_bytes = sizeof(float) * s.n;
    if (s.accumulate) {
      for (int r = 0; r < chunk; ++r) {
        std::memcpy(scratch.y_dense.data() + static_cast<size_t>(r) * s.n, y_chunk + r * ldy,
                    row_bytes);
      }
    }
    absl::Status status = RunChunk(scratch.x_bf16.data(), chunk, scratch.y_dense.data());
    if (!status.ok()) return status;
    for (int r = 0; r < chunk; ++r) {
      std::memcpy(y_chunk + r * ldy, scratch.y_dense.data() + static_cast<size_t>(r) * s.n,
                  row_bytes);
    }
  }
  return absl::OkStatus();
}

absl::Status OneDnnBf16Matmul::RunChunk(const uint16_t* x, int rows, float* y) const {
  const State& s = *state_;
  absl::StatusOr<const Primitive*> primitive =
      GetPrimitive({s.k, s.n, rows, !s.bias.empty(), s.accumulate}, s.weights_desc);
  if (!primitive.ok()) return primitive.status();
  Cpu& cpu = TheCpu();
  // Memory objects are only descriptors over our buffers; oneDNN reads x and bias, never writes.
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, memory((*primitive)->src, cpu.engine, const_cast<uint16_t*>(x))},
      {DNNL_ARG_WEIGHTS, s.weights},
      {DNNL_ARG_DST, memory((*primitive)->dst, cpu.engine, y)}};
  if (!s.bias.empty()) args.emplace(DNNL_ARG_BIAS, s.bias_memory);
  try {
    (*primitive)->matmul.execute(cpu.stream, args);
    cpu.stream.wait();
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN matmul failed: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace pagoda
