#include "worker/store/block_fetch.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "core/block_math.h"
#include "core/status_util.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

Box BlockBox(const BlockLayout& layout, int64_t device) {
  return Box{layout.BlockOrigin(device), layout.block_shape()};
}

}  // namespace

absl::StatusOr<Tensor> FetchResidentBlock(const v1::ResidentSource& source,
                                          const Mesh& job_mesh, int64_t device,
                                          const std::string& my_address,
                                          const ResidentStore& store,
                                          const RemoteBlockRead& read,
                                          absl::Time deadline) {
  const std::string& name = source.name();
  SHARD_ASSIGN_OR_RETURN(ArrayMeta meta,
                         HeaderFromProto(source.header(), name));
  SHARD_ASSIGN_OR_RETURN(Mesh array_mesh, MeshFromProto(source.mesh()));
  SHARD_ASSIGN_OR_RETURN(
      BlockLayout held,
      BlockLayout::Create(array_mesh, SpecFromProto(source.spec()), meta.shape,
                          "its spec", name));
  PartitionSpec wanted = SpecFromProto(source.job_spec());
  if (wanted.unsplit()) wanted = PartitionSpec();
  SHARD_ASSIGN_OR_RETURN(BlockLayout needed,
                         BlockLayout::Create(job_mesh, wanted, meta.shape,
                                             "the job's spec", name));
  if (source.holders_size() != array_mesh.num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resident array '", name, "' lists ", source.holders_size(),
        " holders for ", array_mesh.num_devices(), " devices"));
  }
  const Box mine = BlockBox(needed, device);
  SHARD_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(meta.dtype, mine.shape));
  const size_t item = ItemSize(meta.dtype);
  // One source per distinct block of the array: this worker if it holds a
  // replica, else the first holder.
  std::map<int64_t, int64_t> source_of_block;
  for (int64_t j = 0; j < array_mesh.num_devices(); ++j) {
    const int64_t b = held.BlockNumber(j);
    auto it = source_of_block.find(b);
    if (it == source_of_block.end() ||
        (source.holders(j) == my_address &&
         source.holders(it->second) != my_address)) {
      source_of_block[b] = j;
    }
  }
  for (const auto& [block, j] : source_of_block) {
    const Box theirs = BlockBox(held, j);
    Box common;
    if (meta.shape.empty()) {
      common = mine;
    } else if (!Intersect(mine, theirs, &common)) {
      continue;
    }
    if (source.holders(j) == my_address) {
      SHARD_ASSIGN_OR_RETURN(ResidentStore::Block b,
                             store.Find(name, source.version()));
      CopyBox(b.data->data(), b.box, out.data(), mine, common, item);
      continue;
    }
    v1::ReadBlockRequest request;
    request.set_name(name);
    request.set_version(source.version());
    for (int64_t o : common.origin) request.add_origin(o);
    for (int64_t s : common.shape) request.add_shape(s);
    auto bytes = read(source.holders(j), request, deadline);
    if (!bytes.ok()) {
      return Annotate(bytes.status(),
                      absl::StrCat("reading resident array '", name,
                                   "' from worker ", source.holders(j)));
    }
    if (bytes->size() != NumElements(common.shape) * item) {
      return absl::InternalError(
          absl::StrCat("worker ", source.holders(j), " sent ", bytes->size(),
                       " bytes of '", name, "' where ",
                       NumElements(common.shape) * item, " were expected"));
    }
    CopyBox(reinterpret_cast<const uint8_t*>(bytes->data()), common, out.data(),
            mine, common, item);
  }
  return out;
}

absl::StatusOr<std::string> ReadLocalBox(const ResidentStore& store,
                                         const v1::ReadBlockRequest& request) {
  SHARD_ASSIGN_OR_RETURN(ResidentStore::Block b,
                         store.Find(request.name(), request.version()));
  Box box{{request.origin().begin(), request.origin().end()},
          {request.shape().begin(), request.shape().end()}};
  if (box.shape.size() != b.box.shape.size() ||
      box.origin.size() != b.box.shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReadBlock of '", request.name(), "': box of rank ", box.shape.size(),
        " for a block of rank ", b.box.shape.size()));
  }
  for (size_t d = 0; d < box.shape.size(); ++d) {
    if (box.shape[d] < 0 || box.origin[d] < b.box.origin[d] ||
        box.origin[d] + box.shape[d] > b.box.origin[d] + b.box.shape[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat("ReadBlock of '", request.name(),
                       "': the box leaves the block along "
                       "dimension ",
                       d));
    }
  }
  const size_t item = ItemSize(b.data->dtype());
  std::string out(NumElements(box.shape) * item, '\0');
  CopyBox(b.data->data(), b.box, reinterpret_cast<uint8_t*>(out.data()), box,
          box, item);
  return out;
}

}  // namespace shardmap
