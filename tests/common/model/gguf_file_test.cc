// GGUF files: malformed ones are refused naming the field, never a crash, wherever they are cut
// or flipped.
#include "common/model/gguf_file.h"

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model/model_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/model/gguf_writer.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

std::string U64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string U32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string Str(const std::string& s) { return U64(s.size()) + s; }

// A header with `kv` metadata entries (raw bytes) and no tensors.
std::string RawGguf(uint64_t kv_count, const std::string& kvs, uint64_t tensor_count = 0,
                    const std::string& tensors = "") {
  return "GGUF" + U32(3) + U64(tensor_count) + U64(kv_count) + kvs + tensors +
         std::string(64, '\0');
}

TEST(GgufFileTest, MalformedFilesAreRefusedNamingTheField) {
  const std::string good = testing::TinyGgufModelBytes();
  {
    const std::string path = testing::TempDir() + "/good.gguf";
    testing::WriteFile(path, good);
    ASSERT_TRUE(GgufFile::Open(path).ok());
  }
  std::vector<testing::BadGguf> cases;
  auto mutated = [&](auto&&... args) { cases.push_back(testing::MutatedGguf(good, args...)); };
  mutated(
      "short", [](std::string& b) { b.resize(20); }, "too short for a GGUF header");
  mutated(
      "version1", [](std::string& b) { testing::PutAt<uint32_t>(&b, 4, 1); },
      "GGUF version 1 is not supported");
  mutated(
      "big_endian", [](std::string& b) { testing::PutAt<uint32_t>(&b, 4, 0x03000000); },
      "GGUF version 50331648");
  mutated(
      "tensor_count", [](std::string& b) { testing::PutAt<uint64_t>(&b, 8, uint64_t{1} << 60); },
      "tensor_count 1152921504606846976 does not fit");
  mutated(
      "kv_count", [](std::string& b) { testing::PutAt<uint64_t>(&b, 16, uint64_t{1} << 62); },
      "kv_count");
  mutated(
      "key_length", [](std::string& b) { testing::PutAt<uint64_t>(&b, 24, uint64_t{1} << 50); },
      "metadata entry 0: truncated key");
  mutated(
      "value_type", [](std::string& b) { testing::PutAt<uint32_t>(&b, 24 + 8 + 20, 99); },
      "metadata general.architecture: unknown type 99");
  mutated(
      "string_length",
      [](std::string& b) { testing::PutAt<uint64_t>(&b, 24 + 8 + 20 + 4, uint64_t{1} << 40); },
      "general.architecture: string runs past the end of the file");
  mutated(
      "truncated_tensor_data", [](std::string& b) { b.resize(b.size() - 100); },
      "outside the data section");
  mutated(
      "n_dims",
      [](std::string& b) {
        testing::PutAt<uint32_t>(&b, testing::GgufTensorInfoAt(b, "blk.0.attn_q.weight"), 7);
      },
      "tensor blk.0.attn_q.weight: n_dims 7");
  mutated(
      "zero_dim",
      [](std::string& b) {
        testing::PutAt<uint64_t>(&b, testing::GgufTensorInfoAt(b, "blk.0.attn_q.weight") + 4, 0);
      },
      "tensor blk.0.attn_q.weight: dimension 0 = 0");
  mutated(
      "huge_dims",
      [](std::string& b) {
        const size_t at = testing::GgufTensorInfoAt(b, "blk.0.attn_q.weight");
        testing::PutAt<uint64_t>(&b, at + 4, uint64_t{1} << 30);
        testing::PutAt<uint64_t>(&b, at + 12, uint64_t{1} << 30);
      },
      "dimension 1 = 1073741824 is out of range");
  mutated(
      "ggml_type",
      [](std::string& b) {
        testing::PutAt<uint32_t>(&b, testing::GgufTensorInfoAt(b, "blk.0.attn_q.weight") + 20, 77);
      },
      "blk.0.attn_q.weight: ggml type 77 is not supported");
  mutated(
      "partial_block",
      [](std::string& b) {
        testing::PutAt<uint32_t>(&b, testing::GgufTensorInfoAt(b, "output_norm.weight") + 12, 12);
      },
      "row of 64 values is not whole Q4_K blocks of 256");
  mutated(
      "unaligned",
      [](std::string& b) {
        testing::PutAt<uint64_t>(&b, testing::GgufTensorInfoAt(b, "output_norm.weight") + 16, 4);
      },
      "output_norm.weight: offset 4 is not aligned");
  mutated(
      "offset_past_end",
      [](std::string& b) {
        testing::PutAt<uint64_t>(&b, testing::GgufTensorInfoAt(b, "output_norm.weight") + 16,
                                 uint64_t{1} << 40);
      },
      "output_norm.weight: [1099511627776");
  mutated(
      "overlap",
      [](std::string& b) {
        const size_t at = testing::GgufTensorInfoAt(b, "token_embd.weight") + 24;
        uint64_t offset;
        std::memcpy(&offset, b.data() + at, 8);
        testing::PutAt<uint64_t>(&b, testing::GgufTensorInfoAt(b, "output_norm.weight") + 16,
                                 offset + 32);
      },
      "overlap");
  mutated(
      "duplicate_tensor",
      [](std::string& b) { b.replace(b.find("blk.0.attn_v.weight"), 19, "blk.0.attn_k.weight"); },
      "tensor blk.0.attn_k.weight: duplicate tensor name");
  cases.push_back(
      {"array_of_arrays", RawGguf(1, Str("a") + U32(9) + U32(9) + U64(1)), "array element type 9"});
  cases.push_back({"string_array_count",
                   RawGguf(1, Str("a") + U32(9) + U32(8) + U64(uint64_t{1} << 58)),
                   "strings do not fit the file"});
  cases.push_back({"number_array_count",
                   RawGguf(1, Str("a") + U32(9) + U32(6) + U64(uint64_t{1} << 61)),
                   "elements do not fit the file"});
  cases.push_back({"string_in_array",
                   RawGguf(1, Str("a") + U32(9) + U32(8) + U64(2) + Str("x") + U64(1 << 20)),
                   "a: string 1 runs past the end"});
  cases.push_back({"duplicate_key",
                   RawGguf(2, Str("a") + U32(4) + U32(1) + Str("a") + U32(4) + U32(2)),
                   "metadata a: duplicate key"});
  cases.push_back({"alignment", RawGguf(1, Str("general.alignment") + U32(4) + U32(3)),
                   "general.alignment 3 is not a power of two"});
  cases.push_back({"alignment_type", RawGguf(1, Str("general.alignment") + U32(8) + Str("x")),
                   "general.alignment is not an integer"});
  cases.push_back({"bad_magic", "GGUX" + std::string(60, '\0'), "not a GGUF file"});
  int n = 0;
  for (const testing::BadGguf& c : cases) {
    const std::string path = absl::StrCat(testing::TempDir(), "/bad", n++, ".gguf");
    testing::WriteFile(path, c.bytes);
    const absl::Status s = GgufFile::Open(path).status();
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.name;
  }
  EXPECT_GE(cases.size(), 20u);
}

TEST(GgufFileTest, EveryTruncationAndManyByteFlipsAreErrorsNotCrashes) {
  const std::string good = testing::TinyGgufModelBytes();
  const std::string path = testing::TempDir() + "/cut.gguf";
  for (size_t len = 0; len < good.size(); len += len < 2048 ? 1 : 97) {
    testing::WriteFile(path, good.substr(0, len));
    EXPECT_FALSE(LoadModelWeights(path).ok()) << len;
  }
  std::mt19937 rng(9);
  const size_t header_end = good.find("token_embd.weight") + 64;  // flips in the header area
  for (int i = 0; i < 300; ++i) {
    std::string b = good;
    b[rng() % header_end] ^= static_cast<char>(1 + rng() % 255);
    testing::WriteFile(path, b);
    (void)LoadModelWeights(path);  // may load (a flipped value) or fail; must not crash
    (void)LoadModelConfig(path);
  }
}

}  // namespace
}  // namespace pagoda
