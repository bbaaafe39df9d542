// Prints arrays the way numpy does (nested brackets), for shardctl's
// human-readable output, and as JSON values for --json.
#ifndef SHARDMAP_CLIENT_ARRAY_FORMAT_H_
#define SHARDMAP_CLIENT_ARRAY_FORMAT_H_

#include <nlohmann/json.hpp>
#include <string>

#include "core/tensor.h"

namespace shardmap {

// numpy-like text; arrays over `max_elements` are summarized with "...".
std::string FormatArray(const Tensor& t, int64_t max_elements = 1000);
// Nested JSON lists of the values (a number for a 0-d array).
nlohmann::json ArrayToJson(const Tensor& t);

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_ARRAY_FORMAT_H_
