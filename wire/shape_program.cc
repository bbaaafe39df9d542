#include "wire/shape_program.h"

#include "absl/strings/str_cat.h"

namespace shardmap {

std::string PythonLiteral(const nlohmann::json& value) {
  if (value.is_null()) return "None";
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_string()) {
    std::string out = "'";
    for (char c : value.get<std::string>()) {
      if (c == '\\' || c == '\'') out += '\\';
      out += c;
    }
    return out + "'";
  }
  if (value.is_array()) {
    std::string out = "(";
    for (size_t i = 0; i < value.size(); ++i) {
      absl::StrAppend(&out, i > 0 ? ", " : "", PythonLiteral(value[i]));
    }
    return out + (value.size() == 1 ? ",)" : ")");
  }
  return value.dump();  // numbers; objects never reach a shape program
}

absl::StatusOr<std::string> RenderShapeProgram(absl::string_view source,
                                               const nlohmann::json& kwargs) {
  std::string out;
  size_t at = 0;
  while (at < source.size()) {
    const size_t open = source.find('{', at);
    if (open == absl::string_view::npos) break;
    const size_t close = source.find('}', open);
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape program: '{' at ", open, " is not closed"));
    }
    const std::string name(source.substr(open + 1, close - open - 1));
    if (!kwargs.is_object() || !kwargs.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape program: no keyword argument '", name, "' for {", name, "}"));
    }
    absl::StrAppend(&out, source.substr(at, open - at),
                    PythonLiteral(kwargs[name]));
    at = close + 1;
  }
  absl::StrAppend(&out, source.substr(at));
  return out;
}

}  // namespace shardmap
