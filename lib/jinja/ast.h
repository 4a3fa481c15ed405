// The parsed template: expressions and statements, each with its source line for errors.
#ifndef PAGODA_LIB_JINJA_AST_H_
#define PAGODA_LIB_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lib/jinja/value.h"

namespace pagoda::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kName,       // name
    kList,       // [children...]
    kTuple,      // (children...)
    kDict,       // {children[0]: children[1], ...}
    kGetAttr,    // children[0].name
    kGetItem,    // children[0][children[1]]
    kSlice,      // children[0][children[1]:children[2]:children[3]]; null = omitted
    kCall,       // children[0](children[1:]..., keywords...)
    kFilter,     // children[0] | name(children[1:]..., keywords...); children[0] null in a
                 // filter block
    kTest,       // children[0] is [not] name(children[1:]...)
    kNot,        // not children[0]
    kNegate,     // -children[0]
    kPlus,       // +children[0]
    kBinary,     // children[0] name children[1], name in + - * / // % ** ~
    kAnd,        // children[0] and children[1]
    kOr,         // children[0] or children[1]
    kCompare,    // children[0] ops[0] children[1] ops[1] ... (chained as Python does)
    kCondition,  // children[1] if children[0] else children[2] (children[2] may be null)
  };
  Kind kind;
  int line = 0;
  int depth = 1;  // of the tree under this node, bounded by the parser
  Value value;
  std::string name;
  bool negated = false;  // kTest: `is not`
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  std::vector<std::string> ops;  // kCompare: ==, !=, <, <=, >, >=, in, notin
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// A macro parameter with its optional default.
struct Param {
  std::string name;
  ExprPtr default_value;  // null: none
};

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // conditions[i] -> bodies[i]; a trailing extra body is the else
    kFor,          // for targets in expr [if filter] body [else else_body]
    kSet,          // set targets = expr; or set target.attr = expr (attribute set)
    kSetBlock,     // set targets[0] [| filter] body endset
    kMacro,        // macro name(params) body
    kCallBlock,    // call(params) expr body: `caller` renders body
    kFilterBlock,  // filter expr body
    kWith,         // with targets[i] = values[i] body
    kScope,        // a body in its own scope ({% generation %})
    kBreak,
    kContinue,
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::string name;  // macro name; kSet with attribute: the attribute
  ExprPtr expr;      // output, for iterable, set value, call expression, filter chain
  ExprPtr filter;    // for's `if` filter; kSetBlock's filter (applied to the body)
  std::vector<std::string> targets;
  bool unpack = false;  // targets came as a tuple (`for k, v in ...`)
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  std::vector<ExprPtr> values;  // kWith
  Body body;
  Body else_body;
  std::vector<Param> params;
  bool recursive = false;
};

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_AST_H_
