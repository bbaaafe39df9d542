#include "core/bounded_json.h"

#include "absl/strings/str_cat.h"

namespace shardmap {

absl::StatusOr<nlohmann::json> ParseBoundedJson(absl::string_view text,
                                                int max_depth) {
  using json = nlohmann::json;
  // The parser itself keeps its nesting on the heap; refusing values
  // deeper than the bound keeps them from being built at all.
  bool too_deep = false;
  const json::parser_callback_t bound =
      [&too_deep, max_depth](int depth, json::parse_event_t, json&) {
        if (depth > max_depth) too_deep = true;
        return !too_deep;
      };
  json value;
  try {
    value = json::parse(text.begin(), text.end(), bound);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not JSON: ", e.what()));
  }
  if (too_deep) {
    return absl::InvalidArgumentError(
        absl::StrCat("nested deeper than ", max_depth));
  }
  return value;
}

}  // namespace shardmap
