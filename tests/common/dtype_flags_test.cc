#include "common/dtype_flags.h"

#include <string>

#include "gtest/gtest.h"

namespace pagoda {
namespace {

TEST(DtypeFlagsTest, EveryDtypeIsParsedFromItsOwnName) {
  for (WeightDtype d : {WeightDtype::kF32, WeightDtype::kBf16, WeightDtype::kInt8}) {
    EXPECT_EQ(ParseWeightDtypeFlag("weight-dtype", WeightDtypeName(d)).value(), d);
  }
  for (KvDtype d : {KvDtype::kF32, KvDtype::kBf16, KvDtype::kF16}) {
    EXPECT_EQ(ParseKvDtypeFlag("kv-cache-dtype", KvDtypeName(d)).value(), d);
  }
}

TEST(DtypeFlagsTest, AutoLeavesTheChoiceToTheReader) {
  EXPECT_EQ(ParseWeightDtypeFlag("weight-dtype", "auto").value(), std::nullopt);
  EXPECT_EQ(ParseKvDtypeFlag("kv-cache-dtype", "auto").value(), std::nullopt);
}

TEST(DtypeFlagsTest, AnUnknownNameIsRefusedNamingTheFlagItWasGivenTo) {
  const absl::Status weight = ParseWeightDtypeFlag("worker-weight-dtype", "f16").status();
  EXPECT_EQ(weight.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(weight.message(), "--worker-weight-dtype=f16: expected auto, f32, bf16, int8 or int4");
  const absl::Status kv = ParseKvDtypeFlag("worker-kv-cache-dtype", "int4").status();
  EXPECT_EQ(kv.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv.message(), "--worker-kv-cache-dtype=int4: expected auto, f32, bf16, f16 or int8");
}

// q6_k is only what `auto` keeps a GGUF's Q6_K tensors as: no flag asks every matrix for it.
TEST(DtypeFlagsTest, QSixKIsNamedButNoFlagValue) {
  EXPECT_STREQ(WeightDtypeName(WeightDtype::kQ6K), "q6_k");
  const absl::Status status = ParseWeightDtypeFlag("weight-dtype", "q6_k").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "--weight-dtype=q6_k: expected auto, f32, bf16, int8 or int4");
}

TEST(DtypeFlagsTest, TheChoicesListAutoThenEveryName) {
  EXPECT_EQ(WeightDtypeChoices(), "auto, f32, bf16, int8 or int4");
  EXPECT_EQ(KvDtypeChoices(), "auto, f32, bf16, f16 or int8");
}

// auto is a compute dtype of its own (bf16 where the CPU has it), not the reader's default.
TEST(DtypeFlagsTest, ComputeDtypeNamesAutoF32AndBf16) {
  for (ComputeDtype d : {ComputeDtype::kAuto, ComputeDtype::kF32, ComputeDtype::kBf16}) {
    EXPECT_EQ(ParseComputeDtypeFlag("compute-dtype", ComputeDtypeName(d)).value(), d);
  }
  EXPECT_EQ(ComputeDtypeChoices(), "auto, f32 or bf16");
  const absl::Status status = ParseComputeDtypeFlag("compute-dtype", "int8").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "--compute-dtype=int8: expected auto, f32 or bf16");
}

}  // namespace
}  // namespace pagoda
