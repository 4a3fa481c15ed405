#include "worker/worker_options.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

TEST(WorkerOptionsTest, WeightDtypeIsAutoOrANameAndABadOneNamesTheFlag) {
  EXPECT_FALSE(ParseWeightDtype("auto")->has_value());
  EXPECT_EQ(**ParseWeightDtype("f32"), WeightDtype::kF32);
  EXPECT_EQ(**ParseWeightDtype("bf16"), WeightDtype::kBf16);
  EXPECT_EQ(**ParseWeightDtype("int8"), WeightDtype::kInt8);
  for (const char* bad : {"", "fp16", "INT8", "q4_k", "f16"}) {
    absl::StatusOr<std::optional<WeightDtype>> d = ParseWeightDtype(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(d.status().message(),
              std::string("--weight-dtype=") + bad + ": expected auto, f32, bf16, int8 or int4");
  }
}

TEST(WorkerOptionsTest, LoraDtypeIsAutoF32OrBf16AndABadOneNamesTheFlag) {
  EXPECT_FALSE(ParseLoraDtype("auto")->has_value());
  EXPECT_EQ(**ParseLoraDtype("f32"), WeightDtype::kF32);
  EXPECT_EQ(**ParseLoraDtype("bf16"), WeightDtype::kBf16);
  for (const char* bad : {"", "int8", "float16", "BF16"}) {
    absl::StatusOr<std::optional<WeightDtype>> d = ParseLoraDtype(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().message(),
              std::string("--lora-dtype=") + bad + ": expected auto, f32 or bf16");
  }
}

TEST(WorkerOptionsTest, AutoWeightDtypeKeepsEachStoredTypesValuesExactlyWhereAKernelCan) {
  EXPECT_EQ(AutoWeightDtype(GgmlType::kF32), WeightDtype::kF32);
  EXPECT_EQ(AutoWeightDtype(GgmlType::kF16), WeightDtype::kF32);  // bf16 would round it
  EXPECT_EQ(AutoWeightDtype(GgmlType::kBF16), WeightDtype::kBf16);
  EXPECT_EQ(AutoWeightDtype(GgmlType::kQ8_0), WeightDtype::kInt8);
  EXPECT_EQ(AutoWeightDtype(GgmlType::kQ4_0), WeightDtype::kInt4);
  EXPECT_EQ(AutoWeightDtype(GgmlType::kQ4_K), WeightDtype::kInt4);
  EXPECT_EQ(AutoWeightDtype(GgmlType::kQ6_K), WeightDtype::kQ6K);
}

TEST(WorkerOptionsTest, KvCacheMbIsAutoOrAPositiveSizeAndABadOneNamesTheFlag) {
  EXPECT_EQ(ParseKvCacheMb("auto").value(), 0);
  EXPECT_EQ(ParseKvCacheMb("256").value(), 256LL << 20);
  for (const char* bad : {"0", "-5", "lots", "", "12MB", "2199023255553"}) {
    const absl::StatusOr<int64_t> bytes = ParseKvCacheMb(bad);
    ASSERT_FALSE(bytes.ok()) << bad;
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(bytes.status().message(), HasSubstr(std::string("--kv-cache-mb=") + bad + ":"));
  }
}

TEST(WorkerOptionsTest, KvCacheDtypeIsF32UnlessASixteenBitOneIsAskedFor) {
  EXPECT_EQ(ParseKvCacheDtype("auto").value(), KvDtype::kF32);  // 16-bit K/V are asked for
  EXPECT_EQ(ParseKvCacheDtype("f32").value(), KvDtype::kF32);
  EXPECT_EQ(ParseKvCacheDtype("bf16").value(), KvDtype::kBf16);
  EXPECT_EQ(ParseKvCacheDtype("f16").value(), KvDtype::kF16);
  EXPECT_EQ(ParseKvCacheDtype("int8").value(), KvDtype::kInt8);
  for (const char* bad : {"", "fp16", "BF16", "float32", "INT8", "q8_0", "bf16 "}) {
    const absl::StatusOr<KvDtype> dtype = ParseKvCacheDtype(bad);
    ASSERT_FALSE(dtype.ok()) << bad;
    EXPECT_EQ(dtype.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(dtype.status().message(),
              std::string("--kv-cache-dtype=") + bad + ": expected auto, f32, bf16, f16 or int8");
  }
}

TEST(WorkerOptionsTest, AutoKvSizeIsTheMemoryShareCappedAtWhatTheSequencesCanUse) {
  // Half of 8 GiB, when the sequences could use more.
  EXPECT_EQ(AutoKvCacheBytes(8LL << 30, 0.5, 1 << 10, 1 << 30), 4LL << 30);
  // 256 sequences of 512 tokens of 1 KiB: 128 MiB, though 4 GiB would be free for it.
  EXPECT_EQ(AutoKvCacheBytes(8LL << 30, 0.5, 1 << 10, 256 * 512), 128LL << 20);
  EXPECT_EQ(AutoKvCacheBytes(0, 0.5, 1 << 10, 100), 0);  // unknown memory: no pool, an error
}

TEST(WorkerOptionsTest, MemAvailableIsReadFromProc) { EXPECT_GT(MemAvailableBytes(), 0); }

TEST(WorkerOptionsTest, LoraModulesAreNameEqualsPathAndABadOneNamesTheFlag) {
  absl::StatusOr<WorkerOptions::LoraModule> m = ParseLoraModule("sql=/adapters/sql=v2");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "sql");
  EXPECT_EQ(m->path, "/adapters/sql=v2");
  for (const char* bad : {"sql", "=/a", "sql="}) {
    EXPECT_THAT(ParseLoraModule(bad).status().message(), HasSubstr("--lora-modules")) << bad;
  }
}

}  // namespace
}  // namespace pagoda
