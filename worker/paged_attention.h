// Paged attention over the KV pool's blocks, for prefill chunks and decodes (DESIGN §6).
//
// For each sequence and KV head it walks the sequence's block table and merges one block at a
// time into a running softmax (running max m, running sum l, rescaled output o):
//
//   m' = max(m, max_j s_j)     l' = l·e^(m-m') + Σ_j e^(s_j-m')     o' = o·e^(m-m') + Σ_j
//   e^(s_j-m') v_j
//
// so K/V are read in place from the pool, never gathered into a contiguous copy. Each K/V block
// load serves every query row of the chunk and every query head of the GQA group. Query row r
// of a sequence sits at position start_pos + r and sees positions 0..start_pos + r (causal).
// The K/V of this step's tokens must already be in the pool.
//
// Sequences whose tables begin with the same full blocks (a system prompt in the prefix cache,
// the n samples of one prompt) read them once: their rows run over those blocks together, and
// each sequence then goes on from its rows' (m, l, o) through its own blocks. Per row the
// arithmetic and its order are the same, so the output is bitwise what each gets alone.
#ifndef PAGODA_WORKER_PAGED_ATTENTION_H_
#define PAGODA_WORKER_PAGED_ATTENTION_H_

#include <span>

#include "worker/kernels/kernels.h"

namespace pagoda {

struct AttentionShape {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
};

struct AttentionSequence {
  int first_row = 0;                 // row of its first query token in q and out
  int num_rows = 0;                  // query tokens this step (1 for a decode)
  int start_pos = 0;                 // tokens already in the cache before this step
  const int* block_table = nullptr;  // (ceil((start_pos + num_rows) / block_size)); not owned
};

// q: (T, q_stride) with head h at columns [h*head_dim, (h+1)*head_dim).
// kv: one layer's pool, [num_blocks, num_kv_heads, block_size, head_dim] of kv.dtype; 16-bit
// rows are widened to f32 block by block as the kernel reads them. An int8 pool's rows are
// rotated (kv_dtype.h): q is rotated before the kernels run and the output rotated back.
// out: (T, num_heads * head_dim). Rows not covered by `seqs` are left untouched.
// Parallel over (sequence, KV head, tile of query rows) with OpenMP; each tile runs `kernels`:
// kernels.attention for a sequence's step of fewer than 64 rows (decodes, verifications of
// drafts, short chunks; its bf16 form attention_decode_bf16dot for a bf16 or int8 cache where
// the CPU has AVX512_BF16, else its int16 form attention_decode_int8 for an int8 cache),
// kernels.attention_prefill (or its bf16 form, for a cache in fewer
// than 32 bits, on the same CPUs) for longer ones, which read the blocks of a shared prefix on
// their own. Each kernel computes a row the same whatever else shares the step.
// With fewer of those than threads, a long context (of sequences sharing no blocks) is split
// into parts of consecutive blocks on different threads, whose (m, l, o) are merged by the rule
// above: the same result up to f32 rounding (the sums are grouped otherwise), not bit for bit.
void PagedAttention(const Kernels& kernels, const AttentionShape& shape,
                    std::span<const AttentionSequence> seqs, const float* q, int q_stride,
                    const KvLayerView& kv, float* out);

}  // namespace pagoda

#endif  // PAGODA_WORKER_PAGED_ATTENTION_H_
