// pagoda-make-model: writes a random-weight model of a named shape, for benchmarks (values
// don't matter for speed): a llama2.c checkpoint, a Hugging Face directory (config.json +
// model.safetensors in F32, F16 or BF16), or a GGUF file with a real tokenizer's vocabulary,
// streamed to disk so that shapes larger than memory can be written (8B in F16 is 16 GB), for
// llama.cpp's llama-quantize to make Q4_K_M and Q8_0 from.
//   pagoda-make-model --shape=stories110M --out=/tmp/stories110M.bin [--seed=1]
//   pagoda-make-model --shape=1B --format=hf --dtype=bf16 --out=/tmp/tinyllama-shaped
//   pagoda-make-model --shape=8B --format=gguf --dtype=f16 --context=32768
//       --tokenizer=../shared/models/llama3-tokenizer/tokenizer.json --out=/tmp/8B-F16.gguf
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/model/gguf_writer.h"
#include "common/model/hf_model.h"
#include "common/model/llama2c_checkpoint.h"
#include "common/model/random_weights.h"
#include "common/numeric.h"
#include "common/process/command_line.h"
#include "common/status_macros.h"
#include "lib/text/tokenizer_json.h"

ABSL_FLAG(std::string, shape, "stories110M",
          "stories260K, stories15M, stories42M, stories110M, 1B, 8B");
ABSL_FLAG(std::string, out, "",
          "output: a .bin path (llama2c), a directory (hf) or a .gguf path (gguf)");
ABSL_FLAG(std::string, format, "llama2c", "llama2c | hf | gguf");
ABSL_FLAG(std::string, dtype, "f32", "hf and gguf: f32 | f16 | bf16");
ABSL_FLAG(std::string, tokenizer, "",
          "gguf: a byte-level BPE tokenizer.json (Llama 3's, Qwen's) whose vocabulary the file "
          "carries; its size replaces the shape's");
ABSL_FLAG(int, context, 0, "gguf: the context length the file states (default: the shape's)");
ABSL_FLAG(uint64_t, seed, 1, "random seed");

namespace pagoda {
namespace {

// The tokenizer as llama.cpp's converter writes a byte-level BPE ("gpt2") vocabulary: every id
// a token ("[PADn]" for a gap), added tokens as control tokens, merges as "a b".
absl::Status AddGgufVocabulary(const std::string& path, GgufStreamWriter* g, int* vocab_size) {
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  ASSIGN_OR_RETURN(Json j, ParseJson(text, path));
  ASSIGN_OR_RETURN(BpeSpec spec, ReadTokenizerJson(j, path, ""));
  if (spec.pre_tokenizer != BpeSpec::PreTokenizer::kByteLevel) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a byte-level BPE tokenizer (Llama 3's or Qwen's)"));
  }
  int64_t n = 0;
  for (const auto& [piece, id] : spec.vocab) n = std::max(n, id + 1);
  for (const BpeSpec::AddedToken& t : spec.added_tokens) n = std::max(n, t.id + 1);
  if (n <= 0 || n > (1 << 24)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", n, " tokens"));
  }
  std::vector<std::string> tokens(n);
  std::vector<int32_t> types(n, 1);  // normal
  for (int64_t id = 0; id < n; ++id) tokens[id] = absl::StrCat("[PAD", id, "]");
  for (const auto& [piece, id] : spec.vocab) tokens[id] = piece;
  int64_t bos = -1, eos = -1;
  for (const BpeSpec::AddedToken& t : spec.added_tokens) {
    tokens[t.id] = t.content;
    types[t.id] = 3;  // control
    if (t.content == "<|begin_of_text|>") bos = t.id;
    if (t.content == "<|end_of_text|>" || t.content == "<|endoftext|>") eos = t.id;
  }
  std::vector<std::string> merges;
  merges.reserve(spec.merges.size());
  for (const auto& [a, b] : spec.merges) merges.push_back(absl::StrCat(a, " ", b));
  g->AddString("tokenizer.ggml.model", "gpt2");
  g->AddString("tokenizer.ggml.pre", bos >= 0 ? "llama-bpe" : "qwen2");
  g->AddStringArray("tokenizer.ggml.tokens", tokens);
  g->AddI32Array("tokenizer.ggml.token_type", types);
  g->AddStringArray("tokenizer.ggml.merges", merges);
  if (bos >= 0) g->AddU32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
  if (eos >= 0) g->AddU32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
  g->AddBool("tokenizer.ggml.add_bos_token", bos >= 0);
  *vocab_size = static_cast<int>(n);
  return absl::OkStatus();
}

// A llama model of `c` with random weights as GGUF: matrices ~ U(-1, 1)/sqrt(fan_in) in
// `type` (as RandomModelWeights draws them, each tensor from its own seeded stream), norms 1 in
// F32. Written a million values at a time.
absl::Status WriteRandomGguf(const ModelConfig& c, const std::string& tokenizer, GgmlType type,
                             uint64_t seed, const std::string& path) {
  GgufStreamWriter g;
  g.AddString("general.architecture", "llama");
  g.AddString("general.name", absl::StrCat("random-", c.name));
  ModelConfig config = c;
  RETURN_IF_ERROR(AddGgufVocabulary(tokenizer, &g, &config.vocab_size));
  AddGgufHyperparameters(config, "llama", &g);
  struct Tensor {
    std::string name;
    int64_t rows, cols;  // cols 0: a norm (cols values of 1, F32)
  };
  const int64_t dim = config.dim, hidden = config.hidden_dim, q = config.q_dim(),
                kv = config.kv_dim(), vocab = config.vocab_size;
  std::vector<Tensor> tensors = {{"token_embd.weight", vocab, dim}, {"output_norm.weight", dim, 0}};
  if (!config.tied_embeddings) tensors.push_back({"output.weight", vocab, dim});
  for (int l = 0; l < config.num_layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    for (Tensor t : std::initializer_list<Tensor>{{"attn_norm.weight", dim, 0},
                                                  {"attn_q.weight", q, dim},
                                                  {"attn_k.weight", kv, dim},
                                                  {"attn_v.weight", kv, dim},
                                                  {"attn_output.weight", dim, q},
                                                  {"ffn_norm.weight", dim, 0},
                                                  {"ffn_gate.weight", hidden, dim},
                                                  {"ffn_up.weight", hidden, dim},
                                                  {"ffn_down.weight", dim, hidden}}) {
      tensors.push_back({p + t.name, t.rows, t.cols});
    }
  }
  for (const Tensor& t : tensors) {
    if (t.cols == 0) {
      g.AddTensorInfo(t.name, {t.rows}, GgmlType::kF32);
    } else {
      g.AddTensorInfo(t.name, {t.rows, t.cols}, type);
    }
  }
  RETURN_IF_ERROR(g.Open(path));
  constexpr int64_t kChunk = 1 << 20;
  std::vector<float> values;
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    const bool norm = t.cols == 0;
    const GgmlType as = norm ? GgmlType::kF32 : type;
    // The embedding's fan-in is 1, as RandomModelWeights has it.
    const bool embedding = t.name == "token_embd.weight";
    const float scale = norm || embedding ? 1.0f : 1.0f / std::sqrt(static_cast<float>(t.cols));
    std::seed_seq seq{seed, static_cast<uint64_t>(i)};
    std::mt19937_64 rng(seq);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const int64_t count = norm ? t.rows : t.rows * t.cols;
    for (int64_t done = 0; done < count; done += kChunk) {
      values.resize(std::min(kChunk, count - done));
      for (float& x : values) x = norm ? 1.0f : dist(rng) * scale;
      const size_t width = as == GgmlType::kF32 ? 4 : 2;
      bytes.resize(values.size() * width);
      for (size_t k = 0; k < values.size(); ++k) {
        if (as == GgmlType::kF32) {
          std::memcpy(&bytes[k * 4], &values[k], 4);
          continue;
        }
        const uint16_t h = as == GgmlType::kF16 ? FloatToHalf(values[k]) : FloatToBf16(values[k]);
        std::memcpy(&bytes[k * 2], &h, 2);
      }
      RETURN_IF_ERROR(g.Append(bytes));
    }
  }
  return g.Close();
}

}  // namespace
}  // namespace pagoda

int main(int argc, char** argv) {
  pagoda::ParseCommandLine(
      argc, argv,
      {"pagoda-make-model",
       "pagoda-make-model --shape=S --out=PATH [--format=llama2c|hf|gguf] [--dtype=bf16] "
       "[--tokenizer=tokenizer.json] [--context=N] [--seed=N]\n"
       "Writes a model of a named shape with random weights, for benchmarks.\n",
       {{"Model", {"shape", "format", "dtype", "tokenizer", "context", "seed", "out"}}}});
  pagoda::ModelConfig config;
  if (!pagoda::NamedModelConfig(absl::GetFlag(FLAGS_shape), &config)) {
    std::cerr << "error: unknown --shape " << absl::GetFlag(FLAGS_shape) << "\n";
    return 2;
  }
  const std::string out = absl::GetFlag(FLAGS_out), format = absl::GetFlag(FLAGS_format);
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (out.empty() || (format != "llama2c" && format != "hf" && format != "gguf") ||
      (dtype != "f32" && dtype != "f16" && dtype != "bf16")) {
    std::cerr << "error: need --out, --format=llama2c|hf|gguf and --dtype=f32|f16|bf16\n";
    return 2;
  }
  const pagoda::TensorDtype hf_dtype = dtype == "f32"   ? pagoda::TensorDtype::kF32
                                       : dtype == "f16" ? pagoda::TensorDtype::kF16
                                                        : pagoda::TensorDtype::kBF16;
  const std::string tokenizer = absl::GetFlag(FLAGS_tokenizer);
  const int context = absl::GetFlag(FLAGS_context);
  if ((format == "gguf") != !tokenizer.empty() || context < 0 ||
      (context > 0 && format != "gguf")) {
    std::cerr << "error: --format=gguf takes --tokenizer (and only it takes --tokenizer and "
                 "--context, a positive length)\n";
    return 2;
  }
  absl::Status s;
  if (format == "gguf") {
    if (context > 0) config.max_seq_len = context;
    s = pagoda::WriteRandomGguf(config, tokenizer,
                                dtype == "f32"   ? pagoda::GgmlType::kF32
                                : dtype == "f16" ? pagoda::GgmlType::kF16
                                                 : pagoda::GgmlType::kBF16,
                                absl::GetFlag(FLAGS_seed), out);
  } else {
    const pagoda::ModelWeights weights =
        pagoda::RandomModelWeights(config, absl::GetFlag(FLAGS_seed));
    s = format == "llama2c" ? pagoda::WriteLlama2cCheckpoint(weights, out)
                            : pagoda::WriteHfModel(weights, out, hf_dtype);
  }
  if (!s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  return 0;
}
