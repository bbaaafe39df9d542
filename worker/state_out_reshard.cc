#include "worker/state_out_reshard.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/block_math.h"
#include "core/status_util.h"
#include "wire/proto_convert.h"
#include "worker/job_residents.h"
#include "worker/store/block_fetch.h"

namespace shardmap {
namespace {

PartitionSpec Normal(const v1::PartitionSpec& proto) {
  PartitionSpec s = SpecFromProto(proto);
  return s.unsplit() ? PartitionSpec() : s;
}

// Whether entry `i` of the job's states is stored in another spec than
// the job reads it in.
bool Reshards(const v1::ShardJob& header, int i) {
  if (i >= header.state_out_specs_size() || !header.states(i).write()) {
    return false;
  }
  const v1::ResidentSource& src = header.states(i).source();
  return !Normal(src.job_spec())
              .SplitsAlike(Normal(header.state_out_specs(i)),
                           src.header().shape_size());
}

// The address to read device j's block from: the device with j's manual
// coordinates and this device's auto ones (the blocks are equal along
// auto axes), so every read is of a device the barrier waited for.
std::vector<std::string> Holders(const v1::ShardJob& header, const Mesh& mesh,
                                 int64_t device) {
  std::vector<bool> manual(mesh.num_axes(), header.manual_axes().empty());
  for (const std::string& axis : header.manual_axes()) {
    if (std::optional<int> p = mesh.AxisPosition(axis)) manual[*p] = true;
  }
  const std::vector<int64_t> mine = mesh.Coords(device);
  std::vector<std::string> holders;
  for (int64_t j = 0; j < mesh.num_devices(); ++j) {
    std::vector<int64_t> coords = mesh.Coords(j);
    for (int a = 0; a < mesh.num_axes(); ++a) {
      if (!manual[a]) coords[a] = mine[a];
    }
    holders.push_back(header.device_addresses(mesh.DeviceId(coords)));
  }
  return holders;
}

}  // namespace

bool ReshardsStates(const v1::ShardJob& header) {
  for (int i = 0; i < header.states_size(); ++i) {
    if (Reshards(header, i)) return true;
  }
  return false;
}

absl::Status ReshardWrittenStates(const v1::ShardJob& header, const Mesh& mesh,
                                  int64_t device, JobPeers& peers,
                                  ResidentStore& store,
                                  const StateReshardHooks& hooks,
                                  absl::Time deadline,
                                  std::map<std::string, Tensor>* states) {
  std::vector<int> slots;
  for (int i = 0; i < header.states_size(); ++i) {
    if (Reshards(header, i) && states->count(header.states(i).slot()) > 0) {
      slots.push_back(i);
    }
  }
  if (slots.empty()) return absl::OkStatus();
  if (header.device_addresses_size() != mesh.num_devices()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", header.job_id(), " names no peers for device ", device,
        ", so it cannot store a state in another sharding (state_out_specs)"));
  }
  auto where = [&header](int i) {
    const v1::StateSlot& slot = header.states(i);
    return absl::StrCat("storing state '", slot.slot(), "' (",
                        slot.source().name(), ") as ",
                        Normal(header.state_out_specs(i)).ToString());
  };
  // Expose this device's new blocks, by the job's specs.
  std::vector<v1::ResidentSource> sources;
  uint64_t bytes = 0;
  for (int i : slots) {
    const v1::StateSlot& slot = header.states(i);
    Tensor& value = states->at(slot.slot());
    SHARD_RETURN_IF_ERROR(CheckStateBlock(slot, mesh, value));
    const v1::ResidentSource& src = slot.source();
    SHARD_ASSIGN_OR_RETURN(ArrayMeta meta,
                           HeaderFromProto(src.header(), src.name()));
    const PartitionSpec read = Normal(src.job_spec());
    SHARD_ASSIGN_OR_RETURN(BlockLayout layout,
                           BlockLayout::Create(mesh, read, meta.shape,
                                               "the state's spec", src.name()));
    absl::StatusOr<BlockLayout> out =
        BlockLayout::Create(mesh, Normal(header.state_out_specs(i)), meta.shape,
                            "its out spec", src.name());
    if (!out.ok()) return Annotate(out.status(), where(i));
    bytes += NumElements(out->block_shape()) * ItemSize(meta.dtype);
    ResidentStore::Block b;
    b.version = slot.write_version();
    b.device = device;
    b.box = Box{layout.BlockOrigin(device), layout.block_shape()};
    b.layout = ResidentStore::ArrayLayout{meta, mesh, read};
    b.data = std::make_shared<Tensor>(std::move(value));  // not copied
    store.Expose(header.job_id(), src.name(), std::move(b));
    // Where the new blocks are: this job's devices, in its sharding.
    v1::ResidentSource from;
    from.set_name(src.name());
    from.set_version(slot.write_version());
    *from.mutable_header() = src.header();
    *from.mutable_mesh() = MeshToProto(mesh);
    *from.mutable_spec() = SpecToProto(read);
    for (std::string& h : Holders(header, mesh, device)) {
      from.add_holders(std::move(h));
    }
    *from.mutable_job_spec() = header.state_out_specs(i);
    sources.push_back(std::move(from));
  }
  if (hooks.reserve) {
    std::vector<std::string> names;
    for (int i : slots) {
      names.push_back(absl::StrCat("'", header.states(i).slot(), "' (",
                                   header.states(i).source().name(), ")"));
    }
    SHARD_RETURN_IF_ERROR(hooks.reserve(
        bytes,
        absl::StrCat("job ", header.job_id(), " device ", device, "'s states ",
                     absl::StrJoin(names, ", "), " in their out specs")));
  }
  // Every peer read from has exposed its blocks.
  if (hooks.barrier) {
    SHARD_RETURN_IF_ERROR(Annotate(
        hooks.barrier(),
        absl::StrCat("waiting for the job's devices to store its states in "
                     "their out specs")));
  }
  auto read = [&peers](const std::string& address,
                       const v1::ReadBlockRequest& request, absl::Time d) {
    return peers.ReadBlock(address, request, d);
  };
  std::vector<Tensor> assembled;
  for (size_t k = 0; k < slots.size(); ++k) {
    absl::StatusOr<Tensor> block = FetchResidentBlock(
        sources[k], mesh, device, peers.my_address(), store, read, deadline);
    if (!block.ok()) return Annotate(block.status(), where(slots[k]));
    assembled.push_back(*std::move(block));
  }
  for (size_t k = 0; k < slots.size(); ++k) {
    (*states)[header.states(slots[k]).slot()] = std::move(assembled[k]);
  }
  return absl::OkStatus();
}

}  // namespace shardmap
