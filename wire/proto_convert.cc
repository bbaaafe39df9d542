#include "wire/proto_convert.h"

#include "absl/strings/str_cat.h"

namespace shardmap {

v1::DType DTypeToProto(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return v1::DTYPE_FLOAT32;
    case DType::kFloat64:
      return v1::DTYPE_FLOAT64;
    case DType::kInt32:
      return v1::DTYPE_INT32;
    case DType::kInt64:
      return v1::DTYPE_INT64;
  }
  return v1::DTYPE_UNSPECIFIED;
}

absl::StatusOr<DType> DTypeFromProto(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_FLOAT32:
      return DType::kFloat32;
    case v1::DTYPE_FLOAT64:
      return DType::kFloat64;
    case v1::DTYPE_INT32:
      return DType::kInt32;
    case v1::DTYPE_INT64:
      return DType::kInt64;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported or missing dtype (enum value ",
                       static_cast<int>(dtype), ")"));
  }
}

v1::Mesh MeshToProto(const Mesh& mesh) {
  v1::Mesh proto;
  for (const MeshAxis& a : mesh.axes()) {
    v1::MeshAxis* axis = proto.add_axes();
    axis->set_name(a.name);
    axis->set_size(a.size);
  }
  return proto;
}

absl::StatusOr<Mesh> MeshFromProto(const v1::Mesh& proto) {
  std::vector<MeshAxis> axes;
  for (const v1::MeshAxis& a : proto.axes())
    axes.push_back({a.name(), a.size()});
  return Mesh::Create(std::move(axes));
}

v1::PartitionSpec SpecToProto(const PartitionSpec& spec) {
  v1::PartitionSpec proto;
  proto.set_unsplit(spec.unsplit());
  proto.set_infer(spec.infer());
  for (const PartitionSpec::Entry& e : spec.entries()) {
    v1::SpecEntry* entry = proto.add_entries();
    for (const std::string& axis : e) entry->add_axes(axis);
  }
  return proto;
}

PartitionSpec SpecFromProto(const v1::PartitionSpec& proto) {
  if (proto.unsplit()) return PartitionSpec::Unsplit();
  if (proto.infer()) return PartitionSpec::Infer();
  std::vector<PartitionSpec::Entry> entries;
  for (const v1::SpecEntry& e : proto.entries()) {
    entries.emplace_back(e.axes().begin(), e.axes().end());
  }
  return PartitionSpec(std::move(entries));
}

v1::ArrayHeader HeaderToProto(DType dtype, const Shape& shape) {
  v1::ArrayHeader proto;
  proto.set_dtype(DTypeToProto(dtype));
  for (int64_t d : shape) proto.add_shape(d);
  return proto;
}

absl::StatusOr<ArrayMeta> HeaderFromProto(const v1::ArrayHeader& proto,
                                          absl::string_view what) {
  ArrayMeta meta;
  auto dtype = DTypeFromProto(proto.dtype());
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", dtype.status().message()));
  }
  meta.dtype = *dtype;
  meta.shape.assign(proto.shape().begin(), proto.shape().end());
  if (meta.shape.size() > 32) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has rank ", meta.shape.size(), "; at most 32"));
  }
  unsigned __int128 bytes = ItemSize(meta.dtype);
  for (size_t d = 0; d < meta.shape.size(); ++d) {
    if (meta.shape[d] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": dimension ", d, " has negative size ", meta.shape[d]));
    }
    bytes *= static_cast<uint64_t>(meta.shape[d]);
    if (bytes > (static_cast<unsigned __int128>(1) << 48)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " of shape ", ShapeTuple(meta.shape), " is too large"));
    }
  }
  return meta;
}

}  // namespace shardmap
