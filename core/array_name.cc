#include "core/array_name.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace shardmap {
namespace {

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

// The name as it can be shown in an error: escaped, and cut short.
std::string Shown(absl::string_view name) {
  constexpr size_t kShown = 80;
  std::string shown = absl::CHexEscape(name.substr(0, kShown));
  if (name.size() > kShown) absl::StrAppend(&shown, "...");
  return shown;
}

}  // namespace

absl::Status ValidateArrayName(absl::string_view name, absl::string_view what) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", Shown(name), "' ", why));
  };
  if (name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is empty: a resident array needs a name"));
  }
  if (name.size() > kMaxNameBytes) {
    return bad(absl::StrCat("is ", name.size(), " bytes; at most ",
                            kMaxNameBytes, " are allowed"));
  }
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return bad(
          "must be a path of non-empty segments separated by '/', none of "
          "them '.' or '..'");
    }
    if (part.size() > kMaxNameSegmentBytes) {
      return bad(absl::StrCat("has a segment of ", part.size(),
                              " bytes; at most ", kMaxNameSegmentBytes,
                              " are allowed"));
    }
    for (char c : part) {
      if (!NameChar(c)) {
        return bad(absl::StrCat("has the character '",
                                absl::CHexEscape(absl::string_view(&c, 1)),
                                "'; use letters, digits, '_', '-', '.', '/'"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace shardmap
