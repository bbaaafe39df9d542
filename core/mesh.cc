#include "core/mesh.h"

#include <cctype>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/bounded_input.h"

namespace shardmap {

bool IsAxisName(absl::string_view s) {
  if (s.empty()) return false;
  if (!(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) {
    return false;
  }
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
      return false;
  }
  return true;
}

Mesh::Mesh(std::vector<MeshAxis> axes) : axes_(std::move(axes)) {
  for (const MeshAxis& a : axes_) num_devices_ *= a.size;
}

absl::StatusOr<Mesh> Mesh::Create(std::vector<MeshAxis> axes) {
  if (axes.empty()) {
    return absl::InvalidArgumentError(
        "mesh has no axes; give at least one, e.g. --mesh x=4");
  }
  absl::flat_hash_set<std::string> seen;
  int64_t devices = 1;
  for (const MeshAxis& a : axes) {
    if (!IsAxisName(a.name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mesh axis name '", Truncate(a.name),
          "' is not an identifier (letters, digits and '_', not starting "
          "with a digit)"));
    }
    if (a.name == "None") {
      return absl::InvalidArgumentError(
          "mesh axis name 'None' would read as None in a PartitionSpec; "
          "choose another name");
    }
    if (!seen.insert(a.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh axis '", a.name, "' appears twice"));
    }
    if (a.size < 1) {
      return absl::InvalidArgumentError(absl::StrCat("mesh axis '", a.name,
                                                     "' has size ", a.size,
                                                     "; sizes must be >= 1"));
    }
    if (a.size > kMaxDevices || devices * a.size > kMaxDevices) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh has more than ", kMaxDevices, " devices"));
    }
    devices *= a.size;
  }
  return Mesh(std::move(axes));
}

absl::StatusOr<Mesh> Mesh::Parse(absl::string_view text) {
  std::vector<MeshAxis> axes;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    std::vector<absl::string_view> kv = absl::StrSplit(part, '=');
    int64_t size = 0;
    if (kv.size() != 2 ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(kv[1]), &size)) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed mesh '", Truncate(text),
                       "': expected AXIS=SIZE[,AXIS=SIZE...], "
                       "e.g. data=2,model=4; got '",
                       Truncate(part), "'"));
    }
    axes.push_back({std::string(absl::StripAsciiWhitespace(kv[0])), size});
  }
  return Create(std::move(axes));
}

std::optional<int> Mesh::AxisPosition(absl::string_view name) const {
  for (int i = 0; i < num_axes(); ++i) {
    if (axes_[i].name == name) return i;
  }
  return std::nullopt;
}

std::vector<int64_t> Mesh::Coords(int64_t device) const {
  std::vector<int64_t> coords(axes_.size());
  for (int i = num_axes() - 1; i >= 0; --i) {
    coords[i] = device % axes_[i].size;
    device /= axes_[i].size;
  }
  return coords;
}

int64_t Mesh::DeviceId(const std::vector<int64_t>& coords) const {
  int64_t id = 0;
  for (int i = 0; i < num_axes(); ++i) id = id * axes_[i].size + coords[i];
  return id;
}

std::string Mesh::ToString() const {
  return absl::StrJoin(axes_, ",", [](std::string* out, const MeshAxis& a) {
    absl::StrAppend(out, a.name, "=", a.size);
  });
}

std::string Mesh::Describe() const {
  std::vector<int64_t> sizes;
  std::vector<std::string> names;
  for (const MeshAxis& a : axes_) {
    sizes.push_back(a.size);
    names.push_back(absl::StrCat("'", a.name, "'"));
  }
  const char* comma = axes_.size() == 1 ? "," : "";
  return absl::StrCat("shape (", absl::StrJoin(sizes, ", "), comma,
                      ") with corresponding axis names (",
                      absl::StrJoin(names, ", "), comma, ")");
}

}  // namespace shardmap
