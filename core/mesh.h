// A mesh of devices: ordered named axes with sizes, e.g. data=2,model=4.
// Device id = row-major index of the device's coordinates over the axes in
// mesh order (JAX's Mesh over np.arange(n).reshape(sizes)).
//
// Immutable after construction; safe to share between threads.
#ifndef SHARDMAP_CORE_MESH_H_
#define SHARDMAP_CORE_MESH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardmap {

struct MeshAxis {
  std::string name;
  int64_t size = 1;
};

// Whether `s` can name a mesh axis: a Python identifier (letters, digits
// and '_', not starting with a digit).
bool IsAxisName(absl::string_view s);

class Mesh {
 public:
  // Largest mesh accepted; far beyond any cluster of ordinary machines.
  static constexpr int64_t kMaxDevices = 4096;

  // INVALID_ARGUMENT for no axes, an empty or non-identifier name, a name
  // used twice, a size below 1, or more than kMaxDevices devices.
  static absl::StatusOr<Mesh> Create(std::vector<MeshAxis> axes);
  // Parses "data=2,model=4" (spaces allowed). Same errors as Create, plus
  // malformed text.
  static absl::StatusOr<Mesh> Parse(absl::string_view text);

  const std::vector<MeshAxis>& axes() const { return axes_; }
  int num_axes() const { return static_cast<int>(axes_.size()); }
  // The same axes (names and sizes) in the same order.
  bool operator==(const Mesh& o) const {
    if (axes_.size() != o.axes_.size()) return false;
    for (size_t i = 0; i < axes_.size(); ++i) {
      if (axes_[i].name != o.axes_[i].name || axes_[i].size != o.axes_[i].size)
        return false;
    }
    return true;
  }
  int64_t num_devices() const { return num_devices_; }
  // Position of `name` in axes(), or nullopt.
  std::optional<int> AxisPosition(absl::string_view name) const;
  // Coordinates of `device` (0 <= device < num_devices()), one per axis.
  std::vector<int64_t> Coords(int64_t device) const;
  int64_t DeviceId(const std::vector<int64_t>& coords) const;
  // "data=2,model=4"
  std::string ToString() const;
  // JAX's wording for messages: "shape (2, 4) with corresponding axis names
  // ('data', 'model')".
  std::string Describe() const;

 private:
  explicit Mesh(std::vector<MeshAxis> axes);
  std::vector<MeshAxis> axes_;
  int64_t num_devices_ = 1;
};

}  // namespace shardmap

#endif  // SHARDMAP_CORE_MESH_H_
