#include "core/bounded_input.h"

#include "absl/strings/str_cat.h"

namespace shardmap {

std::string Truncate(absl::string_view value, size_t max_bytes) {
  if (value.size() <= max_bytes) return std::string(value);
  size_t cut = max_bytes;
  // Back up over UTF-8 continuation bytes (10xxxxxx) so that no character
  // is split.
  while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  return absl::StrCat(value.substr(0, cut), "... (", value.size(), " bytes)");
}

absl::Status CheckJsonDepth(absl::string_view text, absl::string_view what,
                            int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " nests deeper than ", max_depth,
                         " levels (at byte ", i, ")"));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text,
                                         absl::string_view what,
                                         int max_depth) {
  if (absl::Status s = CheckJsonDepth(text, what, max_depth); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("malformed ", s.message()));
  }
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "malformed ", what, " at byte ", e.byte, ": ", Truncate(e.what())));
  } catch (const nlohmann::json::exception& e) {
    // E.g. a number too large for a double (out_of_range), which would
    // otherwise escape and end the process.
    return absl::InvalidArgumentError(
        absl::StrCat("malformed ", what, ": ", Truncate(e.what())));
  }
}

}  // namespace shardmap
