// Tokens to a template tree, following jinja2's grammar and operator precedence.
#ifndef PAGODA_LIB_JINJA_PARSER_H_
#define PAGODA_LIB_JINJA_PARSER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "lib/jinja/ast.h"
#include "lib/jinja/lexer.h"

namespace pagoda::jinja {

// How deep expressions and blocks may nest: the evaluator recurses on the tree.
inline constexpr int kMaxExprDepth = 128;
inline constexpr int kMaxBlockDepth = 64;

// INVALID_ARGUMENT naming the line for a syntax error, an unknown tag or nesting too deep.
absl::StatusOr<Body> Parse(const std::vector<Token>& tokens);

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_PARSER_H_
