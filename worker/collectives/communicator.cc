#include "worker/collectives/communicator.h"

#include <xxhash.h>

#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/collective_rules.h"
#include "core/manual_axes.h"
#include "core/status_util.h"
#include "worker/collectives/all_gather.h"
#include "worker/collectives/all_reduce.h"
#include "worker/collectives/all_to_all.h"
#include "worker/collectives/permute.h"
#include "worker/collectives/reduce_scatter.h"
#include "worker/metrics/worker_metrics.h"

namespace shardmap {
namespace {

// Byte layouts. An array seen as [outer][n][inner] (inner counted in bytes)
// is "interleaved"; the same data as [n][outer][inner] is "packed": the n
// pieces one after another, as the algorithms move them.
void Pack(const uint8_t* interleaved, int64_t outer, int64_t n, size_t inner,
          uint8_t* packed) {
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(packed + (k * outer + o) * inner,
                  interleaved + (o * n + k) * inner, inner);
    }
  }
}

void Unpack(const uint8_t* packed, int64_t outer, int64_t n, size_t inner,
            uint8_t* interleaved) {
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(interleaved + (o * n + k) * inner,
                  packed + (k * outer + o) * inner, inner);
    }
  }
}

int64_t Product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// An uninitialized staging array of `shape` when `needed` (its user
// writes every byte), else none.
absl::StatusOr<std::optional<Tensor>> StagingIf(bool needed, DType dtype,
                                                Shape shape) {
  if (!needed) return std::nullopt;
  SHARD_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(dtype, std::move(shape)));
  return std::optional<Tensor>(std::move(t));
}

absl::Span<uint8_t> Bytes(Tensor& t) { return {t.data(), t.num_bytes()}; }
absl::Span<const uint8_t> Bytes(const Tensor& t) {
  return {t.data(), t.num_bytes()};
}

std::string Describe(const char* op, const Axes& axes, const Tensor& x,
                     const std::string& extra = "") {
  return absl::StrCat(op, "(axes=", AxesText(axes), ", ",
                      ShapeString(x.dtype(), x.shape()),
                      extra.empty() ? "" : ", ", extra, ")");
}

}  // namespace

Communicator::Communicator(const Mesh* mesh, int64_t device,
                           PeerTransport* transport, Options options)
    : mesh_(mesh), device_(device), transport_(transport), options_(options) {}

absl::StatusOr<GroupView> Communicator::Group(const Axes& axes,
                                              const char* op) const {
  SHARD_ASSIGN_OR_RETURN(std::vector<int> positions,
                         ResolveAxes(op, *mesh_, axes));
  SHARD_RETURN_IF_ERROR(CheckCollectiveManual(op, axes, options_.manual_axes));
  const std::vector<int64_t> mine = mesh_->Coords(device_);
  const int64_t n = GroupSize(*mesh_, positions);
  GroupView group;
  group.devices.reserve(n);
  for (int64_t r = 0; r < n; ++r) {
    // Rank r, row-major over the named axes in the order given.
    std::vector<int64_t> coords = mine;
    int64_t rest = r;
    for (int i = static_cast<int>(positions.size()) - 1; i >= 0; --i) {
      const int64_t size = mesh_->axes()[positions[i]].size;
      coords[positions[i]] = rest % size;
      rest /= size;
    }
    group.devices.push_back(mesh_->DeviceId(coords));
  }
  int64_t rank = 0;
  for (int p : positions) rank = rank * mesh_->axes()[p].size + mine[p];
  group.rank = static_cast<int>(rank);
  return group;
}

absl::StatusOr<int64_t> Communicator::AxisSize(const Axes& axes) const {
  SHARD_ASSIGN_OR_RETURN(std::vector<int> positions,
                         ResolveAxes("axis_size", *mesh_, axes));
  SHARD_RETURN_IF_ERROR(
      CheckCollectiveManual("axis_size", axes, options_.manual_axes));
  return GroupSize(*mesh_, positions);
}

absl::StatusOr<int64_t> Communicator::AxisIndex(const Axes& axes) const {
  SHARD_ASSIGN_OR_RETURN(GroupView group, Group(axes, "axis_index"));
  return group.rank;
}

CollectiveTag Communicator::NextTag(const std::string& text) {
  CollectiveTag tag;
  tag.seq = next_seq_++;
  tag.fingerprint.text = text;
  tag.fingerprint.hash = XXH3_64bits(text.data(), text.size());
  return tag;
}

absl::StatusOr<Tensor> Communicator::Reduce(const char* op, ReduceOp reduce,
                                            const Tensor& x, const Axes& axes) {
  worker_metrics::CollectiveTimer timer(op);
  SHARD_ASSIGN_OR_RETURN(GroupView group, Group(axes, op));
  // Written by AllReduce from x, not copied from it first.
  SHARD_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(x.dtype(), x.shape()));
  AllReduceOptions o;
  o.group = std::move(group);
  o.tag = NextTag(Describe(op, axes, x));
  o.dtype = x.dtype();
  o.data = Bytes(out);
  o.input = Bytes(x);
  o.op = reduce;
  o.algorithm = options_.algorithm;
  SHARD_RETURN_IF_ERROR(AllReduce(o, *transport_));
  return out;
}

absl::StatusOr<Tensor> Communicator::Psum(const Tensor& x, const Axes& axes) {
  return Reduce("psum", ReduceOp::kSum, x, axes);
}

absl::StatusOr<Tensor> Communicator::Pmax(const Tensor& x, const Axes& axes) {
  return Reduce("pmax", ReduceOp::kMax, x, axes);
}

absl::StatusOr<Tensor> Communicator::Pmin(const Tensor& x, const Axes& axes) {
  return Reduce("pmin", ReduceOp::kMin, x, axes);
}

absl::StatusOr<Tensor> Communicator::Pmean(const Tensor& x, const Axes& axes) {
  // Reduce first: it checks the axes, so that its errors name pmean.
  SHARD_ASSIGN_OR_RETURN(Tensor sum, Reduce("pmean", ReduceOp::kSum, x, axes));
  SHARD_ASSIGN_OR_RETURN(int64_t n, AxisSize(axes));
  const int64_t count = sum.num_elements();
  switch (sum.dtype()) {
    case DType::kFloat32: {
      float* p = sum.data_as<float>();
      for (int64_t i = 0; i < count; ++i) p[i] /= static_cast<float>(n);
      return sum;
    }
    case DType::kFloat64: {
      double* p = sum.data_as<double>();
      for (int64_t i = 0; i < count; ++i) p[i] /= static_cast<double>(n);
      return sum;
    }
    case DType::kInt32: {
      // As JAX: integer psum / n is a true division: float32 for int32.
      SHARD_ASSIGN_OR_RETURN(Tensor out,
                             Tensor::Create(DType::kFloat32, sum.shape()));
      float* q = out.data_as<float>();
      const int32_t* p = sum.data_as<int32_t>();
      for (int64_t i = 0; i < count; ++i) {
        q[i] = static_cast<float>(p[i]) / static_cast<float>(n);
      }
      return out;
    }
    case DType::kInt64: {
      // float64 for int64 (the float of the integer's width, as programs
      // and scale), rounded once.
      SHARD_ASSIGN_OR_RETURN(Tensor out,
                             Tensor::Create(DType::kFloat64, sum.shape()));
      double* q = out.data_as<double>();
      const int64_t* p = sum.data_as<int64_t>();
      for (int64_t i = 0; i < count; ++i) {
        q[i] = static_cast<double>(p[i]) / static_cast<double>(n);
      }
      return out;
    }
  }
  return sum;
}

absl::StatusOr<Tensor> Communicator::AllGather(const Tensor& x,
                                               const Axes& axes, int64_t axis,
                                               bool tiled) {
  worker_metrics::CollectiveTimer timer("all_gather");
  SHARD_ASSIGN_OR_RETURN(int k, CheckAllGather(x.shape(), axis, tiled));
  SHARD_ASSIGN_OR_RETURN(GroupView group, Group(axes, "all_gather"));
  const int64_t n = group.size();
  Shape out_shape = x.shape();
  if (tiled) {
    out_shape[k] *= n;
  } else {
    out_shape.insert(out_shape.begin() + k, n);
  }
  // Every byte is written below: no zero-fill (a pass over the whole
  // output, a tenth of a large all_gather's time).
  SHARD_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(x.dtype(), out_shape));
  // Blocks arrive packed, [n][outer][inner] with outer the dimensions
  // before `k`; the result interleaves them: [outer][n][inner]. With no
  // outer dimensions the two are the same, and blocks land in place.
  const int64_t outer = Product(x.shape(), 0, k);
  const size_t inner =
      Product(x.shape(), k, x.shape().size()) * ItemSize(x.dtype());
  SHARD_ASSIGN_OR_RETURN(
      std::optional<Tensor> packed,
      StagingIf(outer != 1, x.dtype(), Shape{n * NumElements(x.shape())}));
  AllGatherOptions o;
  o.group = std::move(group);
  o.tag = NextTag(Describe("all_gather", axes, x,
                           absl::StrCat("axis=", k, ", tiled=", tiled)));
  o.input = Bytes(x);
  o.output = packed ? Bytes(*packed) : Bytes(out);
  SHARD_RETURN_IF_ERROR(shardmap::AllGather(o, *transport_));
  if (packed) Unpack(packed->data(), outer, n, inner, out.data());
  return out;
}

absl::StatusOr<Tensor> Communicator::PsumScatter(const Tensor& x,
                                                 const Axes& axes,
                                                 int64_t scatter_dimension,
                                                 bool tiled) {
  worker_metrics::CollectiveTimer timer("psum_scatter");
  SHARD_ASSIGN_OR_RETURN(GroupView group, Group(axes, "psum_scatter"));
  const int64_t n = group.size();
  SHARD_ASSIGN_OR_RETURN(
      int d, CheckPsumScatter(x.shape(), scatter_dimension, tiled, n));
  // Chunk r is x's r-th slice along d: pack the chunks one after another.
  const int64_t outer = Product(x.shape(), 0, d);
  const size_t inner = (x.shape()[d] / n) *
                       Product(x.shape(), d + 1, x.shape().size()) *
                       ItemSize(x.dtype());
  // With no outer dimensions x is already packed.
  SHARD_ASSIGN_OR_RETURN(std::optional<Tensor> packed,
                         StagingIf(outer != 1, x.dtype(), x.shape()));
  if (packed) Pack(x.data(), outer, n, inner, packed->data());
  Shape out_shape = x.shape();
  if (tiled) {
    out_shape[d] /= n;
  } else {
    out_shape.erase(out_shape.begin() + d);
  }
  // ReduceScatter writes every byte.
  SHARD_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(x.dtype(), out_shape));
  ReduceScatterOptions o;
  o.group = std::move(group);
  o.tag = NextTag(
      Describe("psum_scatter", axes, x,
               absl::StrCat("scatter_dimension=", d, ", tiled=", tiled)));
  o.dtype = x.dtype();
  o.input = Bytes(packed ? static_cast<const Tensor&>(*packed) : x);
  o.output = Bytes(out);
  o.op = ReduceOp::kSum;
  SHARD_RETURN_IF_ERROR(ReduceScatter(o, *transport_));
  return out;
}

absl::StatusOr<Tensor> Communicator::Ppermute(const Tensor& x, const Axes& axes,
                                              const nlohmann::json& perm) {
  worker_metrics::CollectiveTimer timer("ppermute");
  SHARD_ASSIGN_OR_RETURN(GroupView group, Group(axes, "ppermute"));
  SHARD_RETURN_IF_ERROR(CheckPpermuteAxesOrder(*mesh_, axes));
  SHARD_ASSIGN_OR_RETURN(auto pairs, CheckPermutation(perm, group.size()));
  // Permute writes every byte (zeros where no pair sends here).
  SHARD_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(x.dtype(), x.shape()));
  PermuteOptions o;
  o.group = std::move(group);
  o.tag = NextTag(
      Describe("ppermute", axes, x, absl::StrCat("perm=", perm.dump())));
  o.pairs = std::move(pairs);
  o.input = Bytes(x);
  o.output = Bytes(out);
  SHARD_RETURN_IF_ERROR(Permute(o, *transport_));
  return out;
}

absl::StatusOr<Tensor> Communicator::AllToAll(const Tensor& x, const Axes& axes,
                                              int64_t split_axis,
                                              int64_t concat_axis, bool tiled) {
  worker_metrics::CollectiveTimer timer("all_to_all");
  SHARD_ASSIGN_OR_RETURN(GroupView group, Group(axes, "all_to_all"));
  const int64_t n = group.size();
  SHARD_ASSIGN_OR_RETURN(
      auto sc, CheckAllToAll(x.shape(), split_axis, concat_axis, tiled, n));
  const auto [s, c] = sc;
  // Chunk j (for rank j) is x's j-th slice along split_axis.
  const size_t item = ItemSize(x.dtype());
  // With no dimensions before split_axis, x is already packed.
  const int64_t split_outer = Product(x.shape(), 0, s);
  SHARD_ASSIGN_OR_RETURN(std::optional<Tensor> packed,
                         StagingIf(split_outer != 1, x.dtype(), x.shape()));
  if (packed) {
    Pack(
        x.data(), split_outer, n,
        (x.shape()[s] / n) * Product(x.shape(), s + 1, x.shape().size()) * item,
        packed->data());
  }
  // What arrives from rank k is a chunk of `chunk` shape; the result
  // interleaves the chunks along concat_axis, in source order. With no
  // dimensions before concat_axis, chunks land in place.
  Shape chunk = x.shape();
  if (tiled) {
    chunk[s] /= n;
  } else {
    chunk.erase(chunk.begin() + s);
  }
  Shape out_shape = chunk;
  if (tiled) {
    out_shape[c] *= n;
  } else {
    out_shape.insert(out_shape.begin() + c, n);
  }
  // Every chunk is written below.
  SHARD_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(x.dtype(), out_shape));
  const int64_t concat_outer = Product(chunk, 0, c);
  SHARD_ASSIGN_OR_RETURN(std::optional<Tensor> received,
                         StagingIf(concat_outer != 1, x.dtype(), x.shape()));
  AllToAllOptions o;
  o.group = std::move(group);
  o.tag = NextTag(Describe(
      "all_to_all", axes, x,
      absl::StrCat("split_axis=", s, ", concat_axis=", c, ", tiled=", tiled)));
  o.input = Bytes(packed ? static_cast<const Tensor&>(*packed) : x);
  o.output = received ? Bytes(*received) : Bytes(out);
  SHARD_RETURN_IF_ERROR(shardmap::AllToAll(o, *transport_));
  if (received) {
    Unpack(received->data(), concat_outer, n,
           Product(chunk, c, chunk.size()) * item, out.data());
  }
  return out;
}

}  // namespace shardmap
