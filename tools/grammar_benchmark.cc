// Token-mask time per token (TokenMasker::FillMask) at the Llama 2 (32k) and Llama 3 (128k)
// vocabularies, for a JSON Schema and for json_object, in three states: inside a string, inside
// a number, between values (structure). One core.
//   warm: the cache of per-top-of-stack walks holds the state (every later sequence with the
//         grammar, and the same state again in one sequence);
//   cold: a new TokenMasker each time: the walks a state needs the first time it is seen
//         (cold:2, the same without the walk's transition memo).
//   build/bin/grammar_benchmark --benchmark_filter=Mask
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "lib/grammar/grammar.h"
#include "lib/grammar/grammar_matcher.h"
#include "lib/grammar/json_schema.h"
#include "lib/grammar/token_masker.h"
#include "lib/grammar/token_vocabulary.h"
#include "lib/text/tokenizer_loader.h"

namespace pagoda {
namespace {

std::string SharedDir() {
  const char* env = std::getenv("PAGODA_SHARED");
  return env != nullptr ? env : PAGODA_DEFAULT_SHARED_DIR;
}

// As tests/lib/grammar/test_vocabulary.h: special tokens get no bytes.
std::shared_ptr<const TokenVocabulary> Vocabulary(int which) {
  static std::map<int, std::shared_ptr<const TokenVocabulary>> loaded;
  auto& v = loaded[which];
  if (v != nullptr) return v;
  const std::string path = SharedDir() + (which == 32 ? "/models/llama2-tokenizer/tokenizer.json"
                                                      : "/models/llama3-tokenizer/tokenizer.json");
  auto tok = LoadTokenizer(path);
  if (!tok.ok()) {
    fprintf(stderr, "%s: %s\n", path.c_str(), std::string(tok.status().message()).c_str());
    std::exit(1);
  }
  std::vector<std::string> bytes((*tok)->vocab_size());
  for (int id = 0; id < (*tok)->vocab_size(); ++id) {
    std::string b = (*tok)->TokenBytes((*tok)->eos_id(), id);
    const bool special = id == (*tok)->bos_id() || id == (*tok)->eos_id() || b == "<unk>" ||
                         (b.size() > 4 && b.starts_with("<|") && b.ends_with("|>"));
    if (!special) bytes[id] = std::move(b);
  }
  v = *TokenVocabulary::Create(std::move(bytes), {(*tok)->eos_id()});
  return v;
}

constexpr char kSchema[] = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 64},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "pattern": "^[a-z0-9.]+@[a-z0-9]+\\.[a-z]{2,4}$"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
    "address": {"$ref": "#/$defs/address"},
    "score": {"type": "number"}
  },
  "required": ["name", "age", "tags", "score"],
  "additionalProperties": false,
  "$defs": {"address": {"type": "object", "properties": {
      "street": {"type": "string"}, "city": {"type": "string"}},
      "required": ["city"], "additionalProperties": false}}
})";

// The text each state is reached by.
const char* Prefix(int grammar, int state) {
  static const char* kSchemaPrefixes[] = {R"({"name": "Ada Love)", R"({"name": "Ada", "age": 3)",
                                          R"({"name": "Ada", "age": 36, )"};
  static const char* kObjectPrefixes[] = {R"({"name": "Ada Love)", R"({"name": "Ada", "age": 3)",
                                          R"({"name": "Ada", "age": 36, )"};
  return grammar == 0 ? kSchemaPrefixes[state] : kObjectPrefixes[state];
}

std::shared_ptr<const Grammar> MakeGrammar(int grammar) {
  auto gbnf = grammar == 0 ? JsonSchemaToGbnf(kSchema) : JsonObjectGbnf();
  if (!gbnf.ok()) std::exit(1);
  return *ParseGbnf(*gbnf);
}

// Args: vocabulary (32 or 128), grammar (0 schema, 1 json_object), state (0 string, 1 number,
// 2 structure), cold (0 warm, 1 cold, 2 cold with the walk's transition memo off: the
// step-by-step walk, for comparison).
void BM_Mask(benchmark::State& state) {
  auto v = Vocabulary(state.range(0));
  auto g = MakeGrammar(state.range(1));
  GrammarMatcher m(g);
  if (!m.Accept(Prefix(state.range(1), state.range(2)))) std::exit(2);
  std::vector<uint64_t> mask(v->mask_words());
  TokenMaskerOptions options;
  if (state.range(3) == 2) options.memo_sets = 0;
  auto masker = std::make_unique<TokenMasker>(g, v, options);
  if (!masker->FillMask(m, mask).ok()) std::exit(3);
  for (auto _ : state) {
    if (state.range(3)) {
      state.PauseTiming();
      masker = std::make_unique<TokenMasker>(g, v, options);
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(masker->FillMask(m, mask));
  }
  int allowed = 0;
  for (uint64_t w : mask) allowed += __builtin_popcountll(w);
  state.counters["allowed"] = allowed;
  state.counters["mask_bytes"] = mask.size() * 8;
  state.counters["list_bytes"] = allowed * 4;
  state.counters["cache_entries"] = masker->cached_entries();
}
BENCHMARK(BM_Mask)
    ->ArgNames({"vocab_k", "json_object", "state", "cold"})
    ->ArgsProduct({{32, 128}, {0, 1}, {0, 1, 2}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pagoda

BENCHMARK_MAIN();
