#include "client/array_format.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardmap {
namespace {

// numpy marks floats that print as integers with a trailing point: "3.".
std::string FloatText(std::string s) {
  if (s.find_first_of(".eE") == std::string::npos) s += ".";
  return s;
}

std::string Element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: {
      const float v = t.data_as<float>()[i];
      if (std::isnan(v)) return "nan";
      if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
      return FloatText(absl::StrFormat("%.8g", v));
    }
    case DType::kFloat64: {
      const double v = t.data_as<double>()[i];
      if (std::isnan(v)) return "nan";
      if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
      return FloatText(absl::StrFormat("%.16g", v));
    }
    case DType::kInt32:
      return absl::StrCat(t.data_as<int32_t>()[i]);
    case DType::kInt64:
      return absl::StrCat(t.data_as<int64_t>()[i]);
  }
  return "?";
}

nlohmann::json JsonElement(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: {
      const float v = t.data_as<float>()[i];
      return std::isfinite(v) ? nlohmann::json(v)
                              : nlohmann::json(Element(t, i));
    }
    case DType::kFloat64: {
      const double v = t.data_as<double>()[i];
      return std::isfinite(v) ? nlohmann::json(v)
                              : nlohmann::json(Element(t, i));
    }
    case DType::kInt32:
      return t.data_as<int32_t>()[i];
    case DType::kInt64:
      return t.data_as<int64_t>()[i];
  }
  return nullptr;
}

// Elements are right-aligned to one width, as numpy prints them.
void Format(const Tensor& t, const std::vector<std::string>& text, size_t width,
            int dim, int64_t offset, int64_t stride, std::string* out) {
  if (dim == t.rank()) {
    const std::string& e = text[offset];
    out->append(width - std::min(width, e.size()), ' ');
    absl::StrAppend(out, e);
    return;
  }
  const int64_t n = t.shape()[dim];
  const int64_t inner = stride / std::max<int64_t>(n, 1);
  absl::StrAppend(out, "[");
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) {
      absl::StrAppend(out, dim + 1 == t.rank() ? " " : "\n");
      if (dim + 1 < t.rank()) out->append(dim + 1, ' ');
    }
    Format(t, text, width, dim + 1, offset + i * inner, inner, out);
  }
  absl::StrAppend(out, "]");
}

nlohmann::json ToJson(const Tensor& t, int dim, int64_t offset,
                      int64_t stride) {
  if (dim == t.rank()) return JsonElement(t, offset);
  nlohmann::json list = nlohmann::json::array();
  const int64_t n = t.shape()[dim];
  const int64_t inner = stride / std::max<int64_t>(n, 1);
  for (int64_t i = 0; i < n; ++i)
    list.push_back(ToJson(t, dim + 1, offset + i * inner, inner));
  return list;
}

}  // namespace

std::string FormatArray(const Tensor& t, int64_t max_elements) {
  if (t.num_elements() > max_elements) {
    return absl::StrCat("<", ShapeString(t.dtype(), t.shape()), ": ",
                        t.num_elements(),
                        " elements; write it with --out FILE.npy>");
  }
  std::vector<std::string> text;
  size_t width = 0;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    text.push_back(Element(t, i));
    width = std::max(width, text.back().size());
  }
  std::string out;
  Format(t, text, width, 0, 0, t.num_elements(), &out);
  return out;
}

nlohmann::json ArrayToJson(const Tensor& t) {
  return ToJson(t, 0, 0, t.num_elements());
}

}  // namespace shardmap
