// The table behind ApplyFilter (builtins.h), filled by the files that define the filters:
// filters.cc (any value), string_filters.cc and sequence_filters.cc. Internal to pagoda_jinja.
#ifndef PAGODA_LIB_JINJA_FILTERS_H_
#define PAGODA_LIB_JINJA_FILTERS_H_

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/jinja/interpreter.h"
#include "lib/jinja/value.h"

namespace pagoda::jinja {

// `subject | name(args)` for one filter.
using Filter = absl::StatusOr<Value> (*)(Interpreter&, const Value&, CallArgs&);
using FilterTable = absl::flat_hash_map<absl::string_view, Filter>;

// Add the filters of string_filters.cc (text, markup, %-format) to `table`.
void AddStringFilters(FilterTable& table);
// Add the filters of sequence_filters.cc (lists, dicts: select, map, sort, ...) to `table`.
void AddSequenceFilters(FilterTable& table);

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_FILTERS_H_
