// The router's cost of a draft (router/spec/), per sequence and step. One core.
//   BM_ProposeNgram/L/S    prompt lookup over an L-token context with max_scan S
//                          (S = L: the whole context). Tokens uniform over a 32k vocabulary,
//                          no suffix of 2 repeats: the whole window is scanned (worst case);
//   BM_ProposeNgramLoop/L  the same context ending in a repeated 64-token passage: the scan
//                          stops at the first 3-token match (the case drafts pay for);
//   BM_ProposeNgramZipf/L/S  text-like tokens (Zipf's law), the last one the most common;
//   BM_ProposeNgramPairs/L   "a b x1 a b x2 ... a b": a 2-token match every 3 tokens, never 3
//                          (the worst case of the scan, default max_scan);
//   BM_SuffixPropose/hit   SuffixIndex::Propose (k = 8) with 1M tokens held (the ring wrapped),
//   256-token outputs,
//                          half of them 200 answer templates with a few tokens changed: the
//                          context ends inside a held template;
//   BM_SuffixPropose/miss  the same index, a context of random tokens (every order walked);
//   BM_SuffixAdd           Add of 256-token outputs (8-token context tail) into a full 1M ring
//                          (items = tokens added).
//   build/bin/spec_benchmark
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "router/spec/ngram_proposer.h"
#include "router/spec/suffix_index.h"

namespace pagoda {
namespace {

constexpr int kVocab = 32000;

std::vector<int> Uniform(std::mt19937* rng, size_t n) {
  std::uniform_int_distribution<int> token(0, kVocab - 1);
  std::vector<int> t(n);
  for (int& x : t) x = token(*rng);
  return t;
}

void BM_ProposeNgram(benchmark::State& state) {
  std::mt19937 rng(1);
  const std::vector<int> tokens = Uniform(&rng, static_cast<size_t>(state.range(0)));
  const NgramOptions options{.max_scan = static_cast<int>(state.range(1))};
  std::vector<int> draft;
  for (auto _ : state) {
    draft.clear();
    benchmark::DoNotOptimize(ProposeNgram(tokens, 8, &draft, options));
  }
}
BENCHMARK(BM_ProposeNgram)
    ->Args({512, 512})
    ->Args({4096, 4096})
    ->Args({32768, 8192})
    ->Args({32768, 32768});

void BM_ProposeNgramLoop(benchmark::State& state) {
  std::mt19937 rng(1);
  std::vector<int> tokens = Uniform(&rng, static_cast<size_t>(state.range(0)) - 64 - 32);
  const std::vector<int> passage = Uniform(&rng, 64);
  tokens.insert(tokens.end(), passage.begin(), passage.end());
  tokens.insert(tokens.end(), passage.begin(), passage.begin() + 32);
  std::vector<int> draft;
  for (auto _ : state) {
    draft.clear();
    benchmark::DoNotOptimize(ProposeNgram(tokens, 8, &draft));
  }
}
BENCHMARK(BM_ProposeNgramLoop)->Arg(512)->Arg(4096)->Arg(32768);

// Text-like: tokens i.i.d. by Zipf's law (s = 1) over the vocabulary, the last one the most
// common: a candidate every ~10 tokens, hardly ever 3 in a row (a bad case for a real prompt).
void BM_ProposeNgramZipf(benchmark::State& state) {
  std::mt19937 rng(1);
  std::vector<double> weights(kVocab);
  for (int r = 0; r < kVocab; ++r) weights[r] = 1.0 / (r + 1);
  std::discrete_distribution<int> zipf(weights.begin(), weights.end());
  std::vector<int> tokens(static_cast<size_t>(state.range(0)));
  for (int& t : tokens) t = zipf(rng);
  tokens.back() = 0;
  const NgramOptions options{.max_scan = static_cast<int>(state.range(1))};
  std::vector<int> draft;
  size_t drafted = 0;
  for (auto _ : state) {
    draft.clear();
    drafted += static_cast<size_t>(ProposeNgram(tokens, 8, &draft, options));
  }
  state.counters["drafted_per_call"] =
      static_cast<double>(drafted) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_ProposeNgramZipf)
    ->Args({512, 512})
    ->Args({4096, 4096})
    ->Args({32768, 8192})
    ->Args({32768, 32768});

// The bad case for the scan: the last 2 tokens recur every 3 tokens, never the last 3
// ("a b x1 a b x2 ... a b"): every third position is checked one by one.
void BM_ProposeNgramPairs(benchmark::State& state) {
  std::vector<int> tokens;
  for (int i = 0; tokens.size() + 2 < static_cast<size_t>(state.range(0)); ++i) {
    tokens.insert(tokens.end(), {1, 2, 3 + i});
  }
  tokens.insert(tokens.end(), {1, 2});
  std::vector<int> draft;
  for (auto _ : state) {
    draft.clear();
    benchmark::DoNotOptimize(ProposeNgram(tokens, 8, &draft));
  }
}
BENCHMARK(BM_ProposeNgramPairs)->Arg(512)->Arg(4096)->Arg(32768);

// 1M tokens of traffic: every other output one of 200 templates with 4 tokens changed.
struct Traffic {
  std::vector<std::vector<int>> templates;
  std::mt19937 rng{2};

  Traffic() {
    for (int i = 0; i < 200; ++i) templates.push_back(Uniform(&rng, 256));
  }
  std::vector<int> Output() {
    if (rng() % 2 == 0) return Uniform(&rng, 256);
    std::vector<int> t = templates[rng() % templates.size()];
    for (int i = 0; i < 4; ++i) t[rng() % t.size()] = static_cast<int>(rng() % kVocab);
    return t;
  }
  // Past the ring's size, so it has wrapped (the steady state).
  void Fill(SuffixIndex* index) {
    for (size_t added = 0; added < (size_t{5} << 20) / 4; added += 256 + 8) {
      index->Add(Uniform(&rng, 8), Output());
    }
  }
};

void BM_SuffixPropose(benchmark::State& state) {
  static SuffixIndex* const index = [] {
    auto* index = new SuffixIndex(SuffixIndexOptions{});
    Traffic traffic;
    traffic.Fill(index);
    return index;
  }();
  std::mt19937 rng(3);
  Traffic traffic;  // the same templates (same seed)
  std::vector<std::vector<int>> contexts;
  for (int i = 0; i < 1024; ++i) {
    if (state.range(0) == 1) {
      const std::vector<int>& t = traffic.templates[rng() % traffic.templates.size()];
      const size_t end = 16 + rng() % (t.size() - 32);
      contexts.emplace_back(t.begin(), t.begin() + static_cast<ptrdiff_t>(end));
    } else {
      contexts.push_back(Uniform(&rng, 64));
    }
  }
  std::vector<int> draft;
  size_t i = 0, drafted = 0;
  for (auto _ : state) {
    draft.clear();
    drafted += static_cast<size_t>(index->Propose(contexts[i++ % contexts.size()], 8, &draft));
  }
  state.counters["tokens_held"] = static_cast<double>(index->num_tokens());
  state.counters["bytes_per_token"] =
      static_cast<double>(index->memory_bytes()) / static_cast<double>(index->num_tokens());
  state.counters["drafted_per_call"] =
      static_cast<double>(drafted) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_SuffixPropose)->ArgName("hit")->Arg(1)->Arg(0);

void BM_SuffixAdd(benchmark::State& state) {
  SuffixIndex index(SuffixIndexOptions{});
  Traffic traffic;
  traffic.Fill(&index);
  std::vector<std::vector<int>> outputs;
  for (int i = 0; i < 64; ++i) outputs.push_back(traffic.Output());
  const std::vector<int> context = Uniform(&traffic.rng, 8);
  size_t i = 0;
  for (auto _ : state) index.Add(context, outputs[i++ % outputs.size()]);
  state.SetItemsProcessed(state.iterations() * (256 + 8));
}
BENCHMARK(BM_SuffixAdd);

}  // namespace
}  // namespace pagoda

BENCHMARK_MAIN();
