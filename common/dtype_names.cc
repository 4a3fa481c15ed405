#include "common/dtype_names.h"

namespace pagoda {

const char* WeightDtypeName(WeightDtype dtype) {
  switch (dtype) {
    case WeightDtype::kF32:
      return "f32";
    case WeightDtype::kBf16:
      return "bf16";
    case WeightDtype::kInt8:
      return "int8";
    case WeightDtype::kInt4:
      return "int4";
    case WeightDtype::kQ6K:
      return "q6_k";
  }
  return "?";
}

const char* KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
      return "f32";
    case KvDtype::kBf16:
      return "bf16";
    case KvDtype::kF16:
      return "f16";
    case KvDtype::kInt8:
      return "int8";
  }
  return "?";
}

int KvRowBytes(KvDtype dtype, int head_dim) {
  switch (dtype) {
    case KvDtype::kF32:
      return 4 * head_dim;
    case KvDtype::kBf16:
    case KvDtype::kF16:
      return 2 * head_dim;
    case KvDtype::kInt8:
      return head_dim + 2;
  }
  return 4 * head_dim;
}

const char* ComputeDtypeName(ComputeDtype dtype) {
  switch (dtype) {
    case ComputeDtype::kAuto:
      return "auto";
    case ComputeDtype::kF32:
      return "f32";
    case ComputeDtype::kBf16:
      return "bf16";
  }
  return "?";
}

}  // namespace pagoda
