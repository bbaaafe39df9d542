#include "program/source_error.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace shardmap {
namespace program {

std::string SourceMessage(absl::string_view source, SourcePos pos,
                          absl::string_view what) {
  // What is said may echo the source (names, strings): keep it short.
  constexpr size_t kMaxWhat = 512;
  std::string out = absl::StrCat("line ", pos.line, ", column ", pos.column,
                                 ": ", what.substr(0, kMaxWhat),
                                 what.size() > kMaxWhat ? "..." : "");
  std::vector<absl::string_view> lines = absl::StrSplit(source, '\n');
  if (pos.line < 1 || pos.line > static_cast<int>(lines.size())) return out;
  absl::string_view line = lines[pos.line - 1];
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.find_first_not_of(" \t") == absl::string_view::npos) {
    return out;  // a blank line: nothing to point at
  }
  // Long lines are cut around the column so the caret stays readable.
  constexpr int kWidth = 120;
  int column = pos.column < 1 ? 1 : pos.column;
  if (column > static_cast<int>(line.size()) + 1) {
    column = static_cast<int>(line.size()) + 1;
  }
  int first = 0;
  if (column > kWidth) first = column - kWidth / 2;
  absl::string_view shown = line.substr(first, kWidth);
  std::string caret_pad;
  for (int i = first; i < column - 1; ++i) {
    // Keep tabs so the caret lines up under them.
    caret_pad.push_back(line[i] == '\t' ? '\t' : ' ');
  }
  absl::StrAppend(&out, "\n  ", first > 0 ? "..." : "", shown, "\n  ",
                  first > 0 ? "   " : "", caret_pad, "^");
  return out;
}

absl::Status SourceError(absl::string_view source, SourcePos pos,
                         absl::string_view what, absl::StatusCode code) {
  return absl::Status(code, SourceMessage(source, pos, what));
}

}  // namespace program
}  // namespace shardmap
