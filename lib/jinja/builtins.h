// jinja2's and Python's library as templates see it: filters (filters.h), tests
// (builtin_tests.cc), the methods of str, dict and list, where the sandbox refuses the mutating
// ones (methods.cc), and the globals (globals.cc).
#ifndef PAGODA_LIB_JINJA_BUILTINS_H_
#define PAGODA_LIB_JINJA_BUILTINS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/jinja/interpreter.h"
#include "lib/jinja/value.h"

namespace pagoda::jinja {

// `subject | name(args)`; INVALID_ARGUMENT for an unknown filter.
absl::StatusOr<Value> ApplyFilter(Interpreter& interp, absl::string_view name, const Value& subject,
                                  CallArgs& args);
// Whether `name` is a filter (for the `filter` test).
bool HasFilter(absl::string_view name);
// `subject is name(args)`; INVALID_ARGUMENT for an unknown test.
absl::StatusOr<bool> ApplyTest(Interpreter& interp, absl::string_view name, const Value& subject,
                               CallArgs& args);
// `obj.name` as jinja2's sandboxed getattr: a method (bound to obj), a dict key, or an
// undefined that fails when used. REQUIRES: !obj.is_undefined().
Value GetAttribute(Interpreter& interp, const Value& obj, const std::string& name);
// `obj[key]`: an item, else an attribute, else an undefined. REQUIRES: !obj.is_undefined().
Value GetItem(Interpreter& interp, const Value& obj, const Value& key);
// The values a `for` loop visits: list items, dict keys, string characters; charged one
// step each before they are built.
absl::StatusOr<ValueList> Iterate(Interpreter& interp, const Value& v);
// Python's format.format(*args.positional, **args.keyword); REQUIRES: format.is_string().
// Markup escapes what it inserts.
absl::StatusOr<Value> PythonStrFormat(Interpreter& interp, const Value& format, CallArgs& args);
// Python's `format % values` for %s, %r, %d, %i and %%.
absl::StatusOr<std::string> PercentFormat(const std::string& format, const ValueList& values);
// range, namespace, dict, raise_exception, strftime_now.
void AddGlobals(Interpreter& interp, Scope& scope);

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_BUILTINS_H_
