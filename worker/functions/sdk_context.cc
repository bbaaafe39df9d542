#include "worker/functions/sdk_context.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status_util.h"
#include "worker/collectives/communicator.h"

namespace shardmap {

// The SDK's dtype values are the core's (an ABI promise of shardmap/tensor.h).
static_assert(static_cast<int>(DType::kFloat32) ==
                  static_cast<int>(sdk::DType::kFloat32) &&
              static_cast<int>(DType::kFloat64) ==
                  static_cast<int>(sdk::DType::kFloat64) &&
              static_cast<int>(DType::kInt32) ==
                  static_cast<int>(sdk::DType::kInt32) &&
              static_cast<int>(DType::kInt64) ==
                  static_cast<int>(sdk::DType::kInt64));

sdk::DType ToSdk(DType dtype) { return static_cast<sdk::DType>(dtype); }
DType FromSdk(sdk::DType dtype) { return static_cast<DType>(dtype); }

sdk::TensorView ViewOf(Tensor& t) {
  return sdk::TensorView(ToSdk(t.dtype()), t.shape(), t.data());
}

namespace {

bool Views(const Tensor& t, const sdk::TensorView& v) {
  return t.data() != nullptr && t.data() == v.data() &&
         ToSdk(t.dtype()) == v.dtype() && t.shape() == v.shape();
}

bool ValidDType(sdk::DType d) {
  return d == sdk::DType::kFloat32 || d == sdk::DType::kFloat64 ||
         d == sdk::DType::kInt32 || d == sdk::DType::kInt64;
}

// A copy of the memory `v` views, as a tensor of its dtype and shape.
absl::StatusOr<Tensor> CopyOf(const sdk::TensorView& v, const char* what) {
  if (!ValidDType(v.dtype())) {
    return absl::InternalError(absl::StrCat(what, " has an unknown dtype (",
                                            static_cast<int>(v.dtype()), ")"));
  }
  SHARD_ASSIGN_OR_RETURN(Tensor t,
                         Tensor::Create(FromSdk(v.dtype()), v.shape()));
  if (t.num_bytes() > 0) {
    if (v.data() == nullptr) {
      return absl::InternalError(absl::StrCat(what, " is a null view of shape ",
                                              ShapeTuple(v.shape())));
    }
    std::memcpy(t.data(), v.data(), t.num_bytes());
  }
  return t;
}

}  // namespace

WorkerContext::WorkerContext(const std::string& function,
                             const CallContext& call, std::vector<Tensor>& args,
                             const nlohmann::json& kwargs)
    : function_(function), call_(call), args_(args), kwargs_(kwargs) {}

void WorkerContext::FillMesh() const {
  if (mesh_filled_) return;
  mesh_filled_ = true;
  if (call_.mesh == nullptr) return;
  for (const MeshAxis& a : call_.mesh->axes()) {
    axis_names_.push_back(a.name);
    axis_sizes_.push_back(a.size);
  }
}

std::vector<sdk::TensorView> WorkerContext::ArgViews() {
  std::vector<sdk::TensorView> views;
  views.reserve(args_.size());
  for (Tensor& t : args_) views.push_back(ViewOf(t));
  return views;
}

Tensor* WorkerContext::Find(const sdk::TensorView& v, bool* movable) {
  *movable = true;
  for (Tensor& t : args_) {
    if (Views(t, v)) return &t;
  }
  for (auto& t : made_) {
    if (Views(*t, v)) return t.get();
  }
  if (call_.states != nullptr) {
    for (auto& [name, t] : *call_.states) {
      if (Views(t, v)) {
        *movable = false;
        return &t;
      }
    }
  }
  return nullptr;
}

absl::StatusOr<std::vector<Tensor>> WorkerContext::TakeOutputs(
    const std::vector<sdk::TensorView>& views) {
  std::vector<Tensor> out;
  out.reserve(views.size());
  for (size_t i = 0; i < views.size(); ++i) {
    bool movable = false;
    Tensor* t = Find(views[i], &movable);
    if (t != nullptr && movable) {
      out.push_back(std::move(*t));
    } else if (t != nullptr) {
      out.push_back(t->Clone());
    } else {
      SHARD_ASSIGN_OR_RETURN(
          Tensor copy, CopyOf(views[i], absl::StrCat("output ", i).c_str()));
      out.push_back(std::move(copy));
    }
  }
  return out;
}

absl::StatusOr<sdk::TensorView> WorkerContext::Keep(absl::StatusOr<Tensor> t) {
  if (!t.ok()) return t.status();
  made_.push_back(std::make_unique<Tensor>(*std::move(t)));
  return ViewOf(*made_.back());
}

absl::StatusOr<sdk::TensorView> WorkerContext::Allocate(
    sdk::DType dtype, std::vector<int64_t> shape) {
  return Make(dtype, std::move(shape), /*zero=*/true);
}

absl::StatusOr<sdk::TensorView> WorkerContext::AllocateUninitialized(
    sdk::DType dtype, std::vector<int64_t> shape) {
  return Make(dtype, std::move(shape), /*zero=*/false);
}

absl::StatusOr<sdk::TensorView> WorkerContext::Make(sdk::DType dtype,
                                                    std::vector<int64_t> shape,
                                                    bool zero) {
  if (!ValidDType(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Allocate: unknown dtype ", static_cast<int>(dtype)));
  }
  uint64_t bytes = ItemSize(FromSdk(dtype));
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && bytes > (uint64_t{1} << 62) / d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Allocate: shape ", ShapeTuple(shape),
                       " has a negative dimension or is too large"));
    }
    bytes *= d;
  }
  if (call_.reserve) {
    SHARD_ASSIGN_OR_RETURN(std::shared_ptr<void> token, call_.reserve(bytes));
    reservations_.push_back(std::move(token));
  }
  SHARD_ASSIGN_OR_RETURN(Tensor t,
                         Tensor::Create(FromSdk(dtype), std::move(shape)));
  if (zero && t.num_bytes() > 0) std::memset(t.data(), 0, t.num_bytes());
  made_.push_back(std::make_unique<Tensor>(std::move(t)));
  return ViewOf(*made_.back());
}

absl::StatusOr<sdk::TensorView> WorkerContext::State(const std::string& slot) {
  if (call_.states != nullptr) {
    if (auto it = call_.states->find(slot); it != call_.states->end()) {
      return ViewOf(it->second);
    }
  }
  return absl::FailedPreconditionError(
      absl::StrCat("state '", slot,
                   "' is not bound for this call (declare it with State() "
                   "and bind it with --state ",
                   slot, "=NAME)"));
}

absl::Status WorkerContext::NeedComm(const char* op) const {
  if (call_.comm != nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      op, " needs collectives, but this job runs without a communicator"));
}

absl::StatusOr<const Tensor*> WorkerContext::Input(const sdk::TensorView& v,
                                                   Tensor& copy) {
  bool movable = false;
  if (const Tensor* t = Find(v, &movable); t != nullptr) return t;
  SHARD_ASSIGN_OR_RETURN(copy, CopyOf(v, "a collective's input"));
  return &copy;
}

absl::StatusOr<int64_t> WorkerContext::AxisIndex(const sdk::Axes& axes) {
  SHARD_RETURN_IF_ERROR(NeedComm("axis_index"));
  return call_.comm->AxisIndex(axes);
}

absl::StatusOr<int64_t> WorkerContext::AxisSize(const sdk::Axes& axes) {
  SHARD_RETURN_IF_ERROR(NeedComm("axis_size"));
  return call_.comm->AxisSize(axes);
}

// Runs `op` of the communicator on the tensor `x` views and keeps the
// result.
#define SHARD_SDK_COLLECTIVE(name, call)                    \
  SHARD_RETURN_IF_ERROR(NeedComm(name));                    \
  Tensor copy;                                              \
  SHARD_ASSIGN_OR_RETURN(const Tensor* in, Input(x, copy)); \
  return Keep(call_.comm->call)

absl::StatusOr<sdk::TensorView> WorkerContext::Psum(const sdk::TensorView& x,
                                                    const sdk::Axes& axes) {
  SHARD_SDK_COLLECTIVE("psum", Psum(*in, axes));
}

absl::StatusOr<sdk::TensorView> WorkerContext::Pmean(const sdk::TensorView& x,
                                                     const sdk::Axes& axes) {
  SHARD_SDK_COLLECTIVE("pmean", Pmean(*in, axes));
}

absl::StatusOr<sdk::TensorView> WorkerContext::Pmax(const sdk::TensorView& x,
                                                    const sdk::Axes& axes) {
  SHARD_SDK_COLLECTIVE("pmax", Pmax(*in, axes));
}

absl::StatusOr<sdk::TensorView> WorkerContext::Pmin(const sdk::TensorView& x,
                                                    const sdk::Axes& axes) {
  SHARD_SDK_COLLECTIVE("pmin", Pmin(*in, axes));
}

absl::StatusOr<sdk::TensorView> WorkerContext::AllGather(
    const sdk::TensorView& x, const sdk::Axes& axes, int64_t axis, bool tiled) {
  SHARD_SDK_COLLECTIVE("all_gather", AllGather(*in, axes, axis, tiled));
}

absl::StatusOr<sdk::TensorView> WorkerContext::PsumScatter(
    const sdk::TensorView& x, const sdk::Axes& axes, int64_t scatter_dimension,
    bool tiled) {
  SHARD_SDK_COLLECTIVE("psum_scatter",
                       PsumScatter(*in, axes, scatter_dimension, tiled));
}

absl::StatusOr<sdk::TensorView> WorkerContext::Ppermute(
    const sdk::TensorView& x, const sdk::Axes& axes,
    const std::vector<std::pair<int64_t, int64_t>>& perm) {
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& [src, dst] : perm) pairs.push_back({src, dst});
  SHARD_SDK_COLLECTIVE("ppermute", Ppermute(*in, axes, pairs));
}

absl::StatusOr<sdk::TensorView> WorkerContext::AllToAll(
    const sdk::TensorView& x, const sdk::Axes& axes, int64_t split_axis,
    int64_t concat_axis, bool tiled) {
  SHARD_SDK_COLLECTIVE("all_to_all",
                       AllToAll(*in, axes, split_axis, concat_axis, tiled));
}

#undef SHARD_SDK_COLLECTIVE

}  // namespace shardmap
