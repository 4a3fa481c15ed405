// A request body parsed into a JSON tree whose memory is bounded by the body's size (issue 36).
//
// nlohmann's tree costs a node of 16 bytes per value plus its container's slack: a 32 MiB body
// of token ids ("1,1,1,...", 2 bytes each) became ~570 MB. Here one SAX pass builds the tree
// and refuses, before it is built, a body that
//   - nests deeper than max_depth, or has more than max_object_keys keys in an object or
//     max_keys in all (ordered_json finds a key by a linear scan of its object);
//   - would need more than max_tree_bytes_per_body_byte × its size + kTreeSlackBytes of tree.
// Lists of integers in [0, 2^31) under the top-level fields named in `id_fields` (a prompt of
// token ids, or a list of them) are kept compact, 4 bytes an id, as a binary value of subtype
// kIdListSubtype: read them with IsIdList / IdListSize / AppendIdList, never as arrays. So a
// body's peak in the router is at most ~4x its size.
#ifndef PAGODA_ROUTER_API_OPENAI_REQUEST_JSON_H_
#define PAGODA_ROUTER_API_OPENAI_REQUEST_JSON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"

namespace pagoda {

struct RequestJsonLimits {
  int max_depth = 64;
  int64_t max_object_keys = 1024;  // in one object
  int64_t max_keys = 100'000;      // in the whole body
  // What the tree may cost beside the body, estimated as it is built (values, containers'
  // slack, strings, keys, compact ids): small bodies get kTreeSlackBytes whatever their size.
  double max_tree_bytes_per_body_byte = 2;
  static constexpr int64_t kTreeSlackBytes = 4 << 20;
  // Top-level fields whose integer lists (the field's value, or each element of it) are kept
  // compact.
  std::vector<std::string> id_fields;
};

inline constexpr uint64_t kIdListSubtype = 0x1d;
// How ParseRequestJson's message for text that is not one JSON value ends.
inline constexpr absl::string_view kNotJson = ": not valid JSON";

// The body as a JSON value; INVALID_ARGUMENT naming `what` when it passes a limit, or "not
// valid JSON" when it is not one JSON value.
absl::StatusOr<OrderedJson> ParseRequestJson(absl::string_view text,
                                             const RequestJsonLimits& limits,
                                             absl::string_view what = "the request body");

// Whether `v` is a compact list of ids (ParseRequestJson's).
bool IsIdList(const OrderedJson& v);
// Its number of ids. REQUIRES: IsIdList(v).
int64_t IdListSize(const OrderedJson& v);
// Appends its ids to `out`. REQUIRES: IsIdList(v).
void AppendIdList(const OrderedJson& v, std::vector<int>* out);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_REQUEST_JSON_H_
