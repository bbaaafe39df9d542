#include "worker/job_residents.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/block_math.h"
#include "core/status_util.h"
#include "wire/proto_convert.h"
#include "worker/store/block_fetch.h"

namespace shardmap {
namespace {

// A donated argument's block (ResidentSource.donate), taken out of the
// store without a copy when this worker holds exactly the block the job
// reads; nullopt when it does not (the argument is then fetched as any
// other). INVALID_ARGUMENT for a source that does not parse.
absl::StatusOr<std::optional<Tensor>> TakeDonated(const v1::ResidentSource& src,
                                                  const Mesh& mesh,
                                                  int64_t device,
                                                  ResidentStore& store) {
  const std::string& name = src.name();
  SHARD_ASSIGN_OR_RETURN(ArrayMeta meta, HeaderFromProto(src.header(), name));
  PartitionSpec spec = SpecFromProto(src.job_spec());
  if (spec.unsplit()) spec = PartitionSpec();
  SHARD_ASSIGN_OR_RETURN(
      BlockLayout needed,
      BlockLayout::Create(mesh, spec, meta.shape, "the job's spec", name));
  {
    // Scoped: its reference to the data must not count below.
    absl::StatusOr<ResidentStore::Block> held = store.Find(name, src.version());
    if (!held.ok() || held->data == nullptr ||
        held->data->dtype() != meta.dtype ||
        held->box.origin != needed.BlockOrigin(device) ||
        held->box.shape != needed.block_shape()) {
      return std::optional<Tensor>();
    }
  }
  SHARD_ASSIGN_OR_RETURN(ResidentStore::Block taken,
                         store.Take(name, src.version()));
  if (taken.data.use_count() == 1) {
    // The store makes every block's tensor non-const (state_dir.h), and
    // this is its last reference: the buffer itself goes to the job.
    return std::optional<Tensor>(std::move(const_cast<Tensor&>(*taken.data)));
  }
  // Something still reads it (a peer's ReadBlock copying it out): a copy.
  return std::optional<Tensor>(taken.data->Clone());
}

// INVALID_ARGUMENT unless `value` is the block of the state `slot` that
// `spec` gives this device (`spec` unsplit: P()).
absl::Status CheckBlock(const v1::StateSlot& slot, const Mesh& mesh,
                        const v1::PartitionSpec& spec, const Tensor& value) {
  const v1::ResidentSource& src = slot.source();
  SHARD_ASSIGN_OR_RETURN(ArrayMeta meta,
                         HeaderFromProto(src.header(), src.name()));
  PartitionSpec s = SpecFromProto(spec);
  if (s.unsplit()) s = PartitionSpec();
  SHARD_ASSIGN_OR_RETURN(
      BlockLayout layout,
      BlockLayout::Create(mesh, s, meta.shape, "the state's spec", src.name()));
  if (value.dtype() != meta.dtype || value.shape() != layout.block_shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "state '", slot.slot(), "' (", src.name(), ") must keep its block ",
        ShapeString(meta.dtype, layout.block_shape()),
        " but the function left ", ShapeString(value.dtype(), value.shape())));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FetchResidents(const v1::ShardJob& header, const Mesh& mesh,
                            int64_t device, JobPeers& peers,
                            ResidentStore& store, absl::Time deadline,
                            std::vector<Tensor>* args,
                            std::map<std::string, Tensor>* states) {
  const std::string me = peers.my_address();
  auto read = [&peers](const std::string& address,
                       const v1::ReadBlockRequest& request, absl::Time d) {
    return peers.ReadBlock(address, request, d);
  };
  for (int i = 0; i < header.resident_args_size(); ++i) {
    const v1::ResidentSource& src = header.resident_args(i);
    if (src.name().empty()) continue;
    if (i >= static_cast<int>(args->size())) {
      return absl::InvalidArgumentError("resident argument past the arguments");
    }
    // The coordinator planned this job against src.version(): the
    // versions before it are superseded on every worker.
    store.DropBefore(src.name(), src.version());
    if (src.donate()) {
      SHARD_ASSIGN_OR_RETURN(std::optional<Tensor> taken,
                             TakeDonated(src, mesh, device, store));
      if (taken.has_value()) {
        (*args)[i] = *std::move(taken);
        continue;
      }
    }
    SHARD_ASSIGN_OR_RETURN(
        (*args)[i],
        FetchResidentBlock(src, mesh, device, me, store, read, deadline));
  }
  for (const v1::StateSlot& slot : header.states()) {
    store.DropBefore(slot.source().name(), slot.source().version());
    SHARD_ASSIGN_OR_RETURN(
        Tensor t, FetchResidentBlock(slot.source(), mesh, device, me, store,
                                     read, deadline));
    (*states)[slot.slot()] = std::move(t);
  }
  return absl::OkStatus();
}

absl::Status StageWrites(const v1::ShardJob& header, const Mesh& mesh,
                         int64_t device, std::vector<Tensor>& outputs,
                         std::map<std::string, Tensor>* states,
                         ResidentStore& store) {
  auto stage = [&](const std::string& name, uint64_t version,
                   const PartitionSpec& spec, Tensor block) -> absl::Status {
    const PartitionSpec s = spec.unsplit() ? PartitionSpec() : spec;
    SHARD_ASSIGN_OR_RETURN(
        BlockLayout layout,
        BlockLayout::FromBlockShape(mesh, s, block.shape(), "its spec", name));
    ResidentStore::Block b;
    b.version = version;
    b.device = device;
    b.box = Box{layout.BlockOrigin(device), block.shape()};
    b.layout = ResidentStore::ArrayLayout{
        ArrayMeta{block.dtype(), layout.global_shape()}, mesh, s};
    b.data = std::make_shared<Tensor>(std::move(block));
    store.Stage(header.job_id(), name, std::move(b));
    return absl::OkStatus();
  };
  for (int o = 0; o < header.resident_outputs_size(); ++o) {
    const v1::ResidentTarget& target = header.resident_outputs(o);
    if (target.name().empty()) continue;
    if (o >= static_cast<int>(outputs.size())) {
      return absl::InvalidArgumentError("resident output past the outputs");
    }
    SHARD_RETURN_IF_ERROR(stage(target.name(), target.version(),
                                SpecFromProto(target.spec()),
                                std::move(outputs[o])));
  }
  for (int i = 0; i < header.states_size(); ++i) {
    const v1::StateSlot& slot = header.states(i);
    if (!slot.write()) continue;
    auto it = states->find(slot.slot());
    if (it == states->end()) continue;
    // In its out spec when it has one (then resharded already and of that
    // spec's block shape), else as the job read it.
    const bool out = i < header.state_out_specs_size();
    const v1::PartitionSpec& spec =
        out ? header.state_out_specs(i) : slot.source().job_spec();
    SHARD_RETURN_IF_ERROR(CheckBlock(slot, mesh, spec, it->second));
    SHARD_RETURN_IF_ERROR(stage(slot.source().name(), slot.write_version(),
                                SpecFromProto(spec), std::move(it->second)));
  }
  return absl::OkStatus();
}

absl::Status CheckStateBlock(const v1::StateSlot& slot, const Mesh& mesh,
                             const Tensor& value) {
  return CheckBlock(slot, mesh, slot.source().job_spec(), value);
}

}  // namespace shardmap
