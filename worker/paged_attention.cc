#include "worker/paged_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

namespace pagoda {
namespace {

// Query rows of one sequence handled together, sharing every K/V block load.
constexpr int kTileRows = 16;
// A sequence's step of at least this many rows (a prefill chunk) runs attention_prefill, rows
// in lanes; fewer (a decode, a verification of at most kMaxDraftTokens drafts, a short chunk)
// run attention (or attention_decode_bf16dot or _int8), so a verification's rows round as the
// decodes they check, given the same q and K/V (the matmuls' rounding depends on a step's rows:
// docs/serving.md, speculative decoding).
constexpr int kPrefillKernelRows = 64;
// A part of a context split across threads has at least this many blocks (of 16 tokens: 512),
// so merging the parts costs nothing next to reading them.
constexpr int kMinSplitBlocks = 32;
// Floats of q an int8 step rotates before it spreads the rotation over threads.
constexpr int kMinParallelRotation = 1 << 16;

// Rows [row_begin, row_end) of a sequence (or of a group's gathered rows) against KV heads
// [head_begin, head_end). A block's heads are contiguous in the pool, so one item reads each
// block as one run.
struct WorkItem {
  int seq;  // or group
  int head_begin, head_end;
  int row_begin, row_end;
  // A part of a split context: blocks [block_begin, block_end) of the table, its states left
  // in the parts' buffer at `part_states` floats; block_end -1: not split.
  int block_begin = 0, block_end = -1;
  size_t part_states = 0;
};

// A work item whose context is split into `num_parts` consecutive items of the parts list,
// merged after they all ran.
struct SplitItem {
  WorkItem whole;
  int first_part, num_parts;
};

// Sequences whose tables begin with the same `num_blocks` blocks, all below every member's
// first query position: a system prompt in the prefix cache, or the n samples of one prompt.
struct Group {
  int num_blocks = 0;
  const int* block_table = nullptr;  // a member's
  int first_row = 0, num_rows = 0;   // in the gathered rows
};

// Leading blocks of `seq` that every one of its query rows sees whole.
int FullBlocksBefore(const AttentionSequence& seq, int block_size) {
  return seq.start_pos / block_size;
}

// Appends items covering `num_rows` rows of each of `num_units` units, heads split so that
// every thread has some work.
void AddItems(int num_units, const std::function<int(int)>& rows_of, int num_kv_heads,
              std::vector<WorkItem>* items) {
  int num_tiles = 0;
  for (int u = 0; u < num_units; ++u) num_tiles += (rows_of(u) + kTileRows - 1) / kTileRows;
  // Whole units per item when there is enough work; otherwise split the heads so every
  // thread has some (a lone decode would else run on one core).
  const int wanted = 4 * omp_get_max_threads();
  const int splits = std::clamp((wanted + num_tiles - 1) / std::max(num_tiles, 1), 1, num_kv_heads);
  for (int u = 0; u < num_units; ++u) {
    for (int part = 0; part < splits; ++part) {
      const int h0 = num_kv_heads * part / splits, h1 = num_kv_heads * (part + 1) / splits;
      for (int r = 0; r < rows_of(u); r += kTileRows) {
        items->push_back({u, h0, h1, r, std::min(r + kTileRows, rows_of(u))});
      }
    }
  }
}

// Reused across calls: they grow to the largest step once, then never allocate.
struct Buffers {
  std::vector<WorkItem> shared_items, items, parts;
  std::vector<SplitItem> splits;
  std::vector<float> part_states;
  std::vector<Group> groups;
  std::vector<int> order, group_of, state_row;  // group_of: -1 for none
  std::vector<std::pair<int, int>> shared;      // (blocks shared with the lead, sequence)
  std::vector<float> gathered_q, states;
  std::vector<int> rows;         // every row of the step's sequences
  std::vector<float> rotated_q;  // for an int8 cache
};

// Finds the groups and gives each member its first row in the gathered rows; returns their
// count. Sequences are grouped by their first block; a group shares the leading blocks that
// most of its members have in common (members with fewer run alone).
int GroupSharedPrefixes(std::span<const AttentionSequence> seqs, int bs, Buffers& b) {
  const int num_seqs = static_cast<int>(seqs.size());
  std::vector<int>& order = b.order;
  std::vector<std::pair<int, int>>& shared = b.shared;
  b.groups.clear();
  order.resize(num_seqs);
  std::iota(order.begin(), order.end(), 0);
  // A prefill chunk reads its blocks alone: its rows' kernel rounds otherwise.
  auto first_block = [&](int s) {
    return FullBlocksBefore(seqs[s], bs) > 0 && seqs[s].num_rows < kPrefillKernelRows
               ? seqs[s].block_table[0]
               : -1;
  };
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    return std::pair(first_block(x), x) < std::pair(first_block(y), y);
  });
  b.group_of.assign(num_seqs, -1);
  b.state_row.assign(num_seqs, 0);
  int num_state_rows = 0;
  for (int i = 0; i < num_seqs;) {
    int j = i + 1;
    while (j < num_seqs && first_block(order[j]) == first_block(order[i])) ++j;
    if (first_block(order[i]) >= 0 && j - i >= 2) {
      // Blocks each member shares with the one that has the most below its rows, best first;
      // keep the count that saves the most reads (blocks x members).
      const AttentionSequence& lead =
          seqs[*std::max_element(order.begin() + i, order.begin() + j, [&](int x, int y) {
            return seqs[x].start_pos < seqs[y].start_pos;
          })];
      shared.clear();
      for (int m = i; m < j; ++m) {
        const AttentionSequence& seq = seqs[order[m]];
        const int limit = std::min(FullBlocksBefore(seq, bs), FullBlocksBefore(lead, bs));
        int k = 0;
        while (k < limit && seq.block_table[k] == lead.block_table[k]) ++k;
        shared.push_back({k, order[m]});
      }
      std::sort(shared.begin(), shared.end(), std::greater<>());
      int best = 0, best_members = 0;
      for (int m = 0; m < static_cast<int>(shared.size()); ++m) {
        if (m >= 1 && shared[m].first * (m + 1) > best * best_members) {
          best = shared[m].first;
          best_members = m + 1;
        }
      }
      if (best > 0) {
        Group& g = b.groups.emplace_back();
        g.num_blocks = best;
        g.block_table = lead.block_table;
        g.first_row = num_state_rows;
        for (int m = 0; m < best_members; ++m) {
          const int s = shared[m].second;
          b.group_of[s] = static_cast<int>(b.groups.size()) - 1;
          b.state_row[s] = num_state_rows;
          num_state_rows += seqs[s].num_rows;
        }
        g.num_rows = num_state_rows - g.first_row;
      }
    }
    i = j;
  }
  return num_state_rows;
}

// Blocks a sequence's rows read.
int BlocksOf(const AttentionSequence& seq, int block_size) {
  return (seq.start_pos + seq.num_rows - 1) / block_size + 1;
}

// When there are fewer items than threads, splits each item of an ungrouped sequence with a
// long context into parts of consecutive blocks (at least kMinSplitBlocks each), so that every
// thread has about two: a lone long decode would else use as many threads as it has KV heads.
// Moves the split items from `items` to `splits`, their parts to `parts`.
void SplitLongContexts(std::span<const AttentionSequence> seqs, const AttentionShape& shape,
                       const std::vector<int>& group_of, Buffers& b) {
  b.parts.clear();
  b.splits.clear();
  const int threads = omp_get_max_threads();
  const int num_items = static_cast<int>(b.items.size());
  if (num_items == 0 || num_items >= threads) return;
  const int group_size = shape.num_heads / shape.num_kv_heads;
  const int wanted = (2 * threads + num_items - 1) / num_items;
  size_t floats = 0;
  int kept = 0;
  for (const WorkItem& item : b.items) {
    const AttentionSequence& seq = seqs[item.seq];
    const int blocks = BlocksOf(seq, shape.block_size);
    const int num_parts = std::min(wanted, blocks / kMinSplitBlocks);
    if (group_of[item.seq] >= 0 || num_parts < 2) {
      b.items[kept++] = item;
      continue;
    }
    b.splits.push_back({item, static_cast<int>(b.parts.size()), num_parts});
    const int tile_heads = (item.head_end - item.head_begin) * group_size;
    const size_t states = static_cast<size_t>(item.row_end - item.row_begin) * tile_heads;
    for (int p = 0; p < num_parts; ++p) {
      WorkItem part = item;
      part.block_begin = blocks * p / num_parts;
      part.block_end = blocks * (p + 1) / num_parts;
      part.part_states = floats;
      floats += states * (shape.head_dim + 2);
      b.parts.push_back(part);
    }
  }
  b.items.resize(kept);
  b.part_states.resize(floats);
}

// Merges a split item's parts (each m | l | o over the item's states, as the kernel leaves
// them) by the online-softmax rule and writes the normalised rows to `out`.
void MergeParts(const SplitItem& split, const std::vector<WorkItem>& parts,
                const AttentionShape& shape, const AttentionSequence& seq, const float* part_states,
                float* out) {
  const WorkItem& item = split.whole;
  const int hd = shape.head_dim, group_size = shape.num_heads / shape.num_kv_heads;
  const int tile_heads = (item.head_end - item.head_begin) * group_size;
  const int states = (item.row_end - item.row_begin) * tile_heads;
  const int out_stride = shape.num_heads * hd;
  for (int s = 0; s < states; ++s) {
    const int r = item.row_begin + s / tile_heads, i = s % tile_heads;
    float m = -std::numeric_limits<float>::infinity();
    for (int p = 0; p < split.num_parts; ++p) {
      m = std::max(m, part_states[parts[split.first_part + p].part_states + s]);
    }
    float* dst = out + static_cast<size_t>(seq.first_row + r) * out_stride +
                 static_cast<size_t>(item.head_begin * group_size + i) * hd;
    std::fill_n(dst, hd, 0.0f);
    float l = 0;
    for (int p = 0; p < split.num_parts; ++p) {
      const float* base = part_states + parts[split.first_part + p].part_states;
      const float part_m = base[s];
      if (part_m == -std::numeric_limits<float>::infinity()) continue;  // saw none of them
      const float c = std::exp(part_m - m);
      l += base[states + s] * c;
      const float* o = base + 2 * states + static_cast<size_t>(s) * hd;
      for (int d = 0; d < hd; ++d) dst[d] += o[d] * c;
    }
    const float inv = 1.0f / l;
    for (int d = 0; d < hd; ++d) dst[d] *= inv;
  }
}

// rows = the rows of every sequence, ascending; returns their count.
int ListRows(std::span<const AttentionSequence> seqs, std::vector<int>& rows) {
  rows.clear();
  for (const AttentionSequence& seq : seqs) {
    for (int r = 0; r < seq.num_rows; ++r) rows.push_back(seq.first_row + r);
  }
  std::sort(rows.begin(), rows.end());
  return static_cast<int>(rows.size());
}

}  // namespace

void PagedAttention(const Kernels& kernels, const AttentionShape& shape,
                    std::span<const AttentionSequence> seqs, const float* q, int q_stride,
                    const KvLayerView& kv, float* out) {
  const int num_seqs = static_cast<int>(seqs.size());
  const int bs = shape.block_size, hd = shape.head_dim, heads = shape.num_heads;
  const int group_size = shape.num_heads / shape.num_kv_heads;
  // Named through references, so the OpenMP threads below see the calling thread's.
  static thread_local Buffers buffers;
  std::vector<WorkItem>& shared_items = buffers.shared_items;
  std::vector<WorkItem>& items = buffers.items;
  std::vector<Group>& groups = buffers.groups;
  std::vector<int>& group_of = buffers.group_of;
  std::vector<int>& state_row = buffers.state_row;
  std::vector<float>& gathered_q = buffers.gathered_q;
  std::vector<float>& states = buffers.states;
  shared_items.clear();
  items.clear();

  // An int8 cache holds its rows rotated (kv_dtype.h): q goes in rotated, `out` is rotated back
  // at the end.
  const int row_floats = heads * hd;
  const bool rotated = kv.dtype == KvDtype::kInt8;
  std::vector<int>& rows = buffers.rows;
  const int num_rows = rotated ? ListRows(seqs, rows) : 0;
  if (rotated) {
    std::vector<float>& rotated_q = buffers.rotated_q;
    rotated_q.resize(static_cast<size_t>(rows.empty() ? 0 : rows.back() + 1) * row_floats);
    // Threads only for a step's worth of rows: a decode's few rows cost less than a fork.
#pragma omp parallel for schedule(static) if (num_rows * row_floats >= kMinParallelRotation)
    for (int i = 0; i < num_rows; ++i) {
      float* dst = rotated_q.data() + static_cast<size_t>(rows[i]) * row_floats;
      std::copy_n(q + static_cast<size_t>(rows[i]) * q_stride, row_floats, dst);
      for (int h = 0; h < heads; ++h) RotateToInt8Basis(dst + h * hd, hd);
    }
    q = rotated_q.data();
    q_stride = row_floats;
  }

  const int num_state_rows = GroupSharedPrefixes(seqs, bs, buffers);

  // The grouped sequences' query rows, gathered in group order, and room for their states.
  gathered_q.resize(static_cast<size_t>(num_state_rows) * row_floats);
  states.resize(static_cast<size_t>(num_state_rows) * heads * (hd + 2));
  for (int s = 0; s < num_seqs; ++s) {
    if (group_of[s] < 0) continue;
    for (int r = 0; r < seqs[s].num_rows; ++r) {
      std::copy_n(q + static_cast<size_t>(seqs[s].first_row + r) * q_stride, row_floats,
                  gathered_q.data() + static_cast<size_t>(state_row[s] + r) * row_floats);
    }
  }
  // states: m (rows × heads) | l (rows × heads) | o (rows × heads × hd), row-major
  float* const state_m = states.data();
  float* const state_l = state_m + static_cast<size_t>(num_state_rows) * heads;
  float* const state_o = state_l + static_cast<size_t>(num_state_rows) * heads;

  AddItems(
      static_cast<int>(groups.size()), [&](int g) { return groups[g].num_rows; },
      shape.num_kv_heads, &shared_items);
  AddItems(
      num_seqs, [&](int s) { return seqs[s].num_rows; }, shape.num_kv_heads, &items);
  SplitLongContexts(seqs, shape, group_of, buffers);
  std::vector<WorkItem>& parts = buffers.parts;
  std::vector<SplitItem>& splits = buffers.splits;
  std::vector<float>& part_states = buffers.part_states;

  // Copies a tile's states between the kernel's scratch and `states` (to_scratch: resume).
  auto move_states = [&](const WorkItem& item, int first_state_row, float* scratch,
                         bool to_scratch) {
    const int tile_heads = (item.head_end - item.head_begin) * group_size;
    const int tile_states = (item.row_end - item.row_begin) * tile_heads;
    for (int r = item.row_begin; r < item.row_end; ++r) {
      for (int i = 0; i < tile_heads; ++i) {
        const int s = (r - item.row_begin) * tile_heads + i;
        const size_t g =
            static_cast<size_t>(first_state_row + r) * heads + item.head_begin * group_size + i;
        float* sm = scratch + s;
        float* sl = scratch + tile_states + s;
        float* so = scratch + 2 * tile_states + static_cast<size_t>(s) * hd;
        if (to_scratch) {
          *sm = state_m[g];
          *sl = state_l[g];
          std::copy_n(state_o + g * hd, hd, so);
        } else {
          state_m[g] = *sm;
          state_l[g] = *sl;
          std::copy_n(so, hd, state_o + g * hd);
        }
      }
    }
  };
  auto tile = [&](const WorkItem& item, int start_pos, const int* block_table, const float* q_rows,
                  int stride, float* out_rows, float* scratch) {
    return AttentionTile{.num_heads = heads,
                         .num_kv_heads = shape.num_kv_heads,
                         .head_dim = hd,
                         .block_size = bs,
                         .start_pos = start_pos,
                         .row_begin = item.row_begin,
                         .row_end = item.row_end,
                         .head_begin = item.head_begin,
                         .head_end = item.head_end,
                         .block_table = block_table,
                         .q = q_rows,
                         .q_stride = stride,
                         .k_pool = kv.k,
                         .v_pool = kv.v,
                         .out = out_rows,
                         .scratch = scratch,
                         .kv_dtype = kv.dtype};
  };

  // A prefill chunk's kernel: bf16 products for a cache already in fewer than 32 bits, where
  // the CPU has them; f32 else.
  const auto prefill =
      kv.dtype != KvDtype::kF32 && kernels.attention_prefill_bf16dot != nullptr && hd % 2 == 0
          ? kernels.attention_prefill_bf16dot
          : kernels.attention_prefill;
  // The others': keys in lanes and bf16 pairs for a bf16 or int8 cache (f16 keeps its 11 bits);
  // without bf16 products, int16 pairs for an int8 cache.
  const auto decode = [&] {
    const bool bf16dot = kernels.attention_decode_bf16dot != nullptr && hd % 2 == 0;
    if ((kv.dtype == KvDtype::kBf16 || kv.dtype == KvDtype::kInt8) && bf16dot) {
      return kernels.attention_decode_bf16dot;
    }
    if (kv.dtype == KvDtype::kInt8 && kernels.attention_decode_int8 != nullptr) {
      return kernels.attention_decode_int8;  // takes any tile: head sizes it lacks go to f32
    }
    return kernels.attention;
  }();
  auto kernel_of = [&](const AttentionSequence& seq) {
    return seq.num_rows >= kPrefillKernelRows ? prefill : decode;
  };

  const int num_shared_items = static_cast<int>(shared_items.size());
  const int num_items = static_cast<int>(items.size());
  const int num_parts = static_cast<int>(parts.size());
  const int num_splits = static_cast<int>(splits.size());
#pragma omp parallel
  {
    static thread_local std::vector<float> scratch;
    // The shared blocks, once per group: every row of every member sees them whole.
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < num_shared_items; ++i) {
      const WorkItem& item = shared_items[i];
      const Group& g = groups[item.seq];
      const int tile_heads = (item.head_end - item.head_begin) * group_size;
      scratch.resize(AttentionScratchFloats(item.row_end - item.row_begin, tile_heads, hd, bs));
      AttentionTile t = tile(item, g.num_blocks * bs, g.block_table,
                             gathered_q.data() + static_cast<size_t>(g.first_row) * row_floats,
                             row_floats, nullptr, scratch.data());
      t.block_end = g.num_blocks;
      t.finish = false;
      decode(t);
      move_states(item, g.first_row, scratch.data(), /*to_scratch=*/false);
    }
    // Then each sequence through its own blocks (all of them when it is in no group).
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < num_items; ++i) {
      const WorkItem& item = items[i];
      const AttentionSequence& seq = seqs[item.seq];
      const int tile_heads = (item.head_end - item.head_begin) * group_size;
      scratch.resize(AttentionScratchFloats(item.row_end - item.row_begin, tile_heads, hd, bs));
      AttentionTile t = tile(item, seq.start_pos, seq.block_table,
                             q + static_cast<size_t>(seq.first_row) * q_stride, q_stride,
                             out + static_cast<size_t>(seq.first_row) * heads * hd, scratch.data());
      if (group_of[item.seq] >= 0) {
        move_states(item, state_row[item.seq], scratch.data(), /*to_scratch=*/true);
        t.block_begin = groups[group_of[item.seq]].num_blocks;
        t.resume = true;
      }
      kernel_of(seq)(t);
    }
    // The parts of split contexts, each left unnormalised in part_states, then merged.
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < num_parts; ++i) {
      const WorkItem& item = parts[i];
      const AttentionSequence& seq = seqs[item.seq];
      const int tile_heads = (item.head_end - item.head_begin) * group_size;
      const int tile_states = (item.row_end - item.row_begin) * tile_heads;
      scratch.resize(AttentionScratchFloats(item.row_end - item.row_begin, tile_heads, hd, bs));
      AttentionTile t = tile(item, seq.start_pos, seq.block_table,
                             q + static_cast<size_t>(seq.first_row) * q_stride, q_stride, nullptr,
                             scratch.data());
      t.block_begin = item.block_begin;
      t.block_end = item.block_end;
      t.finish = false;
      kernel_of(seq)(t);
      std::copy_n(scratch.data(), static_cast<size_t>(tile_states) * (hd + 2),
                  part_states.data() + item.part_states);
    }
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < num_splits; ++i) {
      MergeParts(splits[i], parts, shape, seqs[splits[i].whole.seq], part_states.data(), out);
    }
    if (rotated) {
#pragma omp for schedule(static)
      for (int i = 0; i < num_rows; ++i) {
        float* o = out + static_cast<size_t>(rows[i]) * row_floats;
        for (int h = 0; h < heads; ++h) RotateFromInt8Basis(o + h * hd, hd);
      }
    }
  }
}

}  // namespace pagoda
