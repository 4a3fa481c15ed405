// What structured output costs the router per step: 32 streams under one JSON Schema, each
// needing its token mask (router/core/constraint.h FillAllowed: the mask and its wire form) before
// every step and advancing its matcher by its sampled token after. The streams write one
// document each, token by token (the tokenizer's encoding of a valid document), starting at
// staggered points, so one step sees 32 different grammar states.
//   first: a fresh TokenMasker (the first request with this schema: every walk is new)
//   warm:  the same masker again (later requests with the schema: the walks are cached)
// One core. Usage: constrained_step_benchmark [tokenizer.json ...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/model/model_config.h"
#include "lib/grammar/json_schema.h"
#include "lib/text/tokenizer_loader.h"
#include "router/api/constraint_compiler.h"
#include "router/core/constraint.h"

namespace pagoda {
namespace {

constexpr int kStreams = 32;

constexpr char kSchema[] = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 64},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "pattern": "^[a-z0-9.]+@[a-z0-9]+\\.[a-z]{2,4}$"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
    "score": {"type": "number"}
  },
  "required": ["name", "age", "tags", "score"],
  "additionalProperties": false
})";
constexpr char kDocument[] =
    R"({"name": "Ada Lovelace of London", "age": 36, "email": "ada.lovelace@example.org", )"
    R"("tags": ["mathematics", "engines", "poetry of science"], "score": 98.25})";

std::string SharedDir() {
  const char* env = std::getenv("PAGODA_SHARED");
  return env != nullptr ? env : PAGODA_DEFAULT_SHARED_DIR;
}

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

void Run(const std::string& path) {
  auto tokenizer = LoadTokenizer(path);
  if (!tokenizer.ok()) {
    fprintf(stderr, "%s: %s\n", path.c_str(), std::string(tokenizer.status().message()).c_str());
    std::exit(1);
  }
  const Tokenizer& tok = **tokenizer;
  ModelConfig config;
  config.vocab_size = tok.vocab_size();
  config.eos_ids = {tok.eos_id()};
  ConstraintCompiler compiler(&tok, config);
  auto gbnf = JsonSchemaToGbnf(kSchema);
  auto t0 = std::chrono::steady_clock::now();
  auto constraint = compiler.Compile(*gbnf, "guided_json");
  if (!constraint.ok()) std::exit(2);
  const double setup_ms = Ms(std::chrono::steady_clock::now() - t0);
  // The document in the vocabulary's tokens, longest match first (as a BPE mostly splits it;
  // the tokenizer's own encoding may start with SentencePiece's space, which JSON refuses).
  const TokenVocabulary& vocab = (*constraint)->masker->vocabulary();
  absl::flat_hash_map<std::string, int> by_bytes;
  for (int id = 0; id < vocab.size(); ++id) {
    if (!vocab.bytes(id).empty()) by_bytes.emplace(vocab.bytes(id), id);
  }
  std::vector<int> doc;
  const std::string text = kDocument;
  for (size_t pos = 0; pos < text.size();) {
    size_t len = std::min<size_t>(16, text.size() - pos);
    while (len > 0 && !by_bytes.contains(text.substr(pos, len))) --len;
    if (len == 0) std::exit(5);
    doc.push_back(by_bytes.at(text.substr(pos, len)));
    pos += len;
  }

  for (int pass = 0; pass < 2; ++pass) {
    // pass 0: a fresh masker; pass 1: the same one, its walks cached.
    std::shared_ptr<TokenMasker> masker =
        pass == 0
            ? std::make_shared<TokenMasker>((*constraint)->grammar, *compiler.Vocabulary(),
                                            TokenMaskerOptions{.cache_bytes = kMaskCacheBytes})
            : (*constraint)->masker;
    if (pass == 1) {
      // Warm the shared masker with one full pass first.
      GrammarMatcher m((*constraint)->grammar);
      std::vector<uint64_t> mask, words;
      std::vector<int> ids;
      for (int t : doc) {
        (void)FillAllowed(*masker, m, &mask, &ids, &words);
        m.Accept(masker->vocabulary().bytes(t));
      }
    }
    std::vector<GrammarMatcher> streams(kStreams, GrammarMatcher((*constraint)->grammar));
    std::vector<size_t> at(kStreams);
    for (int s = 0; s < kStreams; ++s) {
      at[s] = doc.size() * s / kStreams;
      for (size_t i = 0; i < at[s]; ++i) streams[s].Accept(masker->vocabulary().bytes(doc[i]));
    }
    std::vector<uint64_t> mask, words;
    std::vector<int> ids;
    std::vector<double> steps;
    size_t wire_bytes = 0, wire_ids = 0, wire_masks = 0;
    for (size_t step = 0; step < doc.size(); ++step) {
      const auto start = std::chrono::steady_clock::now();
      for (int s = 0; s < kStreams; ++s) {
        const int token = doc[(at[s] + step) % doc.size()];
        if ((at[s] + step) % doc.size() == 0) streams[s] = GrammarMatcher((*constraint)->grammar);
        if (!FillAllowed(*masker, streams[s], &mask, &ids, &words).ok()) std::exit(3);
        wire_bytes += ids.size() * 4 + words.size() * 8;
        wire_ids += !ids.empty();
        wire_masks += !words.empty();
        if (!streams[s].Accept(masker->vocabulary().bytes(token))) std::exit(4);
      }
      steps.push_back(Ms(std::chrono::steady_clock::now() - start));
    }
    std::vector<double> sorted = steps;
    std::sort(sorted.begin(), sorted.end());
    double sum = 0;
    for (double x : steps) sum += x;
    printf(
        "%s vocab %d, %s masker: %zu steps of %d streams: mean %.3f ms/step (%.1f us/stream), "
        "p50 %.3f, p90 %.3f, max %.3f ms; wire %.0f B/stream/step (%zu id lists, %zu bitmasks); "
        "compile+vocabulary %.1f ms\n",
        path.substr(path.rfind("/models/") + 8).c_str(), tok.vocab_size(),
        pass == 0 ? "first (cold)" : "warm", steps.size(), kStreams, sum / steps.size(),
        1000 * sum / steps.size() / kStreams, sorted[sorted.size() / 2],
        sorted[sorted.size() * 9 / 10], sorted.back(),
        static_cast<double>(wire_bytes) / steps.size() / kStreams, wire_ids, wire_masks, setup_ms);
  }
}

}  // namespace
}  // namespace pagoda

int main(int argc, char** argv) {
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) paths.push_back(argv[i]);
  if (paths.empty()) {
    paths = {pagoda::SharedDir() + "/models/llama2-tokenizer/tokenizer.json",
             pagoda::SharedDir() + "/models/llama3-tokenizer/tokenizer.json"};
  }
  for (const std::string& p : paths) pagoda::Run(p);
  return 0;
}
