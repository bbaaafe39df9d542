// Conversions between core types and their shardmap.v1 proto messages.
// Every FromProto validates: a message from the wire is untrusted input.
#ifndef SHARDMAP_CORE_PROTO_CONVERT_H_
#define SHARDMAP_CORE_PROTO_CONVERT_H_

#include "absl/status/statusor.h"
#include "core/dtype.h"
#include "core/mesh.h"
#include "core/partition_spec.h"
#include "core/tensor.h"
#include "shardmap/v1/common.pb.h"

namespace shardmap {

struct ArrayMeta {
  DType dtype = DType::kFloat32;
  Shape shape;
  size_t num_bytes() const { return NumElements(shape) * ItemSize(dtype); }
};

v1::DType DTypeToProto(DType dtype);
// INVALID_ARGUMENT for DTYPE_UNSPECIFIED or an unknown value.
absl::StatusOr<DType> DTypeFromProto(v1::DType dtype);

v1::Mesh MeshToProto(const Mesh& mesh);
absl::StatusOr<Mesh> MeshFromProto(const v1::Mesh& proto);

v1::PartitionSpec SpecToProto(const PartitionSpec& spec);
PartitionSpec SpecFromProto(const v1::PartitionSpec& proto);

v1::ArrayHeader HeaderToProto(DType dtype, const Shape& shape);
// INVALID_ARGUMENT for a bad dtype, a negative dimension or an absurd size.
// `what` names the array in messages.
absl::StatusOr<ArrayMeta> HeaderFromProto(const v1::ArrayHeader& proto,
                                          absl::string_view what);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_PROTO_CONVERT_H_
