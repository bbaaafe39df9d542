#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_util.h"
#include "program/eval_compute.h"
#include "program/eval_layout.h"

namespace shardmap {
namespace program {
namespace {

absl::StatusOr<Tensor> Call(const Instr& in, const Tensor& x, Collectives& c) {
  const MeshAxes& axes = in.attrs.mesh_axes;
  switch (in.op) {
    case OpCode::kPsum:
      return c.Psum(x, axes);
    case OpCode::kPmean:
      return c.Pmean(x, axes);
    case OpCode::kPmax:
      return c.Pmax(x, axes);
    case OpCode::kPmin:
      return c.Pmin(x, axes);
    case OpCode::kAllGather:
      return c.AllGather(x, axes, in.attrs.axis, in.attrs.tiled);
    case OpCode::kPsumScatter:
      return c.PsumScatter(x, axes, in.attrs.axis, in.attrs.tiled);
    case OpCode::kPpermute:
      return c.Ppermute(x, axes, in.attrs.perm_pairs);
    case OpCode::kAllToAll:
      return c.AllToAll(x, axes, in.attrs.split_axis, in.attrs.axis,
                        in.attrs.tiled);
    default:
      break;
  }
  return absl::InternalError(
      absl::StrCat(OpName(in.op), " is not a collective"));
}

}  // namespace

absl::StatusOr<Value> RunCollective(Budget& budget, const Instr& in,
                                    const Value* x, Collectives* collectives) {
  const std::string where = Where(budget.program(), budget.instruction());
  if (collectives == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, " needs collectives, but this run has no communicator"));
  }
  Value out;
  out.shape = in.type.shape;
  out.elem = in.type.elem;
  if (in.op == OpCode::kAxisIndex) {
    SHARD_ASSIGN_OR_RETURN(int64_t index,
                           collectives->AxisIndex(in.attrs.mesh_axes));
    SHARD_ASSIGN_OR_RETURN(out, budget.Allocate(in.type));
    out.mutable_as<int32_t>()[0] = static_cast<int32_t>(index);
    return out;
  }
  // The operand as a tensor of its own shape: a copy only when its
  // storage is shared with a reshape.
  Tensor copy;
  const Tensor* operand = x->storage.get();
  const uint64_t copy_bytes = operand->shape() != x->shape ? x->bytes() : 0;
  SHARD_RETURN_IF_ERROR(budget.Reserve(copy_bytes));
  if (copy_bytes > 0) {
    absl::StatusOr<Tensor> t = ToTensor(*x);
    if (!t.ok()) {
      budget.Release(copy_bytes);
      return Annotate(t.status(), where);
    }
    copy = *std::move(t);
    operand = &copy;
  }
  const uint64_t bytes = out.bytes();
  absl::Status reserved = budget.Reserve(bytes);
  absl::StatusOr<Tensor> result =
      reserved.ok() ? Call(in, *operand, *collectives) : reserved;
  budget.Release(copy_bytes);
  if (!result.ok()) {
    if (reserved.ok()) budget.Release(bytes);
    return reserved.ok() ? Annotate(result.status(), where) : reserved;
  }
  if (result->dtype() != StorageOf(in.type.elem) ||
      result->shape() != in.type.shape) {
    budget.Release(bytes);
    return absl::InternalError(absl::StrCat(
        where, " returned ", ShapeString(result->dtype(), result->shape()),
        " where the program expects ",
        ShapeString(StorageOf(in.type.elem), in.type.shape)));
  }
  out.storage = std::make_shared<Tensor>(*std::move(result));
  out.counted = true;
  return out;
}

}  // namespace program
}  // namespace shardmap
