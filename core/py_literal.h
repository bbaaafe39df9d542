// The subset of Python literals a .npy header holds: a dict of strings,
// booleans, integers, tuples and lists, as numpy writes with repr(). Used by
// core/npy_header.cc; nothing is evaluated.
//
// Thread-safe: the parser is a value used by one caller; nothing is shared.
#ifndef SHARDMAP_CORE_PY_LITERAL_H_
#define SHARDMAP_CORE_PY_LITERAL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardmap {

struct PyValue {
  enum Kind { kString, kBool, kInt, kTuple, kList, kOther };
  Kind kind = kOther;
  std::string text;            // kString: the contents; others: the token.
  std::vector<PyValue> items;  // kTuple, kList.
};
using PyDict = std::vector<std::pair<std::string, PyValue>>;

// Parses "{'key': value, ...}" (trailing commas allowed, "(3)" is the int
// 3), keys in the order written.
// Errors: INVALID_ARGUMENT "malformed header dict at offset N: <what>" for
//   anything else, text after the closing brace, or nesting deeper than 16.
//   The caller adds the file's name.
absl::StatusOr<PyDict> ParsePyDict(absl::string_view text);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_PY_LITERAL_H_
