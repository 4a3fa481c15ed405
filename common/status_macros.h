// Early-return helpers for absl::Status / absl::StatusOr (Abseil 20220623 ships none).
#ifndef PAGODA_COMMON_STATUS_MACROS_H_
#define PAGODA_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PAGODA_CONCAT_INNER_(a, b) a##b
#define PAGODA_CONCAT_(a, b) PAGODA_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function if it is not OK.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    const absl::Status pagoda_status_ = (expr);      \
    if (!pagoda_status_.ok()) return pagoda_status_; \
  } while (0)

// `lhs = value of expr`, or returns its error status from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(PAGODA_CONCAT_(pagoda_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()

#endif  // PAGODA_COMMON_STATUS_MACROS_H_
