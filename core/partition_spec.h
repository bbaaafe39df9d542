// JAX's PartitionSpec: one entry per leading array dimension, each None, an
// axis name, or a tuple of axis names (the first one major). Dimensions
// past the last entry are not split. The in_spec `None` (unsplit) means the
// whole argument on every device.
//
// Immutable value type; safe to share between threads.
#ifndef SHARDMAP_CORE_PARTITION_SPEC_H_
#define SHARDMAP_CORE_PARTITION_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/mesh.h"

namespace shardmap {

class PartitionSpec {
 public:
  // Axis names of one entry; empty = None.
  using Entry = std::vector<std::string>;

  // P(): replicated over every axis.
  PartitionSpec() = default;
  explicit PartitionSpec(std::vector<Entry> entries)
      : entries_(std::move(entries)) {}
  // The in_spec `None`: the whole argument on every device.
  static PartitionSpec Unsplit();
  // JAX's `Infer` (in_specs of resident arguments): the argument keeps the
  // resident array's own spec. Parsed from "Infer".
  static PartitionSpec Infer();

  // Parses the Python text form: P('x', None), P(('x','y')), P(), None,
  // PartitionSpec('x'). Names may be quoted or bare (P(x, None)). A
  // one-name tuple is the name itself; an empty tuple is None.
  // INVALID_ARGUMENT naming the position of the first error for malformed
  // text (including a nested tuple).
  static absl::StatusOr<PartitionSpec> Parse(absl::string_view text);

  bool unsplit() const { return unsplit_; }
  bool infer() const { return infer_; }
  const std::vector<Entry>& entries() const { return entries_; }
  // Every axis the spec names, in order of appearance.
  std::vector<std::string> MentionedAxes() const;
  bool Mentions(absl::string_view axis) const;

  // JAX's repr: P('i',), P('i', 'j'), P(), P(('x', 'y'),), None or Infer.
  std::string ToString() const;

  // Checks the spec against a mesh and an array of rank `rank`, as JAX
  // does. `what` names the spec in messages, e.g. "in_specs[1]" or
  // "out_specs[0]", and `value` the array, e.g. "args[1]".
  // INVALID_ARGUMENT for an axis not in the mesh, an axis used twice, or a
  // spec longer than the rank.
  absl::Status Validate(const Mesh& mesh, int rank, absl::string_view what,
                        absl::string_view value) const;

  bool operator==(const PartitionSpec& o) const {
    return unsplit_ == o.unsplit_ && infer_ == o.infer_ &&
           entries_ == o.entries_;
  }
  // Whether this spec splits an array of rank `rank` as `o` does: the
  // dimensions a spec leaves out are None, as are all of an unsplit one's
  // (P('x') and P('x', None) alike for a matrix).
  bool SplitsAlike(const PartitionSpec& o, size_t rank) const;

 private:
  std::vector<Entry> entries_;
  bool unsplit_ = false;
  bool infer_ = false;
};

// Whether an array of rank `rank` sharded by `a_spec` over `a_mesh` has
// the same blocks on the same devices as sharded by `b_spec` over `b_mesh`
// (writing it the other way over an existing array needs overwrite).
inline bool SameSharding(const Mesh& a_mesh, const PartitionSpec& a_spec,
                         const Mesh& b_mesh, const PartitionSpec& b_spec,
                         size_t rank) {
  return a_mesh == b_mesh && a_spec.SplitsAlike(b_spec, rank);
}

}  // namespace shardmap

#endif  // SHARDMAP_CORE_PARTITION_SPEC_H_
