#include "server/output_assembly.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/block_math.h"
#include "core/status_util.h"
#include "server/replication_check.h"

namespace shardmap {
namespace {

absl::Status DescribeFailure(const absl::Status& s, const std::string& device) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
      return absl::UnavailableError(
          absl::StrCat(device, " is unavailable: ", s.message()));
    case absl::StatusCode::kDeadlineExceeded:
      return absl::DeadlineExceededError(
          absl::StrCat("timed out waiting for ", device, ": ", s.message()));
    default:
      return Annotate(s, device);
  }
}

// Every device's blocks of each output have one dtype and shape, which
// fits its out_spec: the outputs' layouts.
absl::StatusOr<std::vector<BlockLayout>> OutputLayouts(
    const JobPlan& plan, const std::vector<const DeviceResult*>& results) {
  const std::string fn = plan.function.name();
  std::vector<BlockLayout> layouts;
  for (size_t o = 0; o < plan.out_specs.size(); ++o) {
    const ArrayMeta& meta0 = results[0]->outputs[o];
    for (size_t d = 1; d < results.size(); ++d) {
      const ArrayMeta& m = results[d]->outputs[o];
      if (m.dtype != meta0.dtype || m.shape != meta0.shape) {
        return absl::InvalidArgumentError(absl::StrCat(
            fn, " output ", o, " has block ",
            ShapeString(meta0.dtype, meta0.shape), " on device 0 but ",
            ShapeString(m.dtype, m.shape), " on device ", d,
            "; every device must return blocks of one shape and dtype"));
      }
    }
    const std::string what = plan.out_specs.size() == 1
                                 ? "out_specs"
                                 : absl::StrCat("out_specs[", o, "]");
    SHARD_ASSIGN_OR_RETURN(
        BlockLayout layout,
        BlockLayout::FromBlockShape(
            plan.mesh, plan.out_specs[o], meta0.shape, what,
            absl::StrCat(fn, " output ", o, " (",
                         ShapeString(meta0.dtype, meta0.shape), ")")));
    layouts.push_back(std::move(layout));
  }
  return layouts;
}

}  // namespace

std::string DeviceName(const JobPlan& plan, int64_t d,
                       const WorkerPool::Worker& w) {
  return absl::StrCat("device ", d, " (mesh coordinates ",
                      ShapeTuple(plan.mesh.Coords(d)), ", worker ", w.id,
                      " at ", w.address, ")");
}

absl::Status AttributeFailure(
    const std::string& job_id, const JobPlan& plan,
    const std::vector<WorkerPool::Worker>& workers,
    const std::vector<absl::Status>& lost,
    const std::vector<absl::StatusOr<DeviceResult>>& results) {
  const int64_t n = static_cast<int64_t>(results.size());
  auto status_of = [&](int64_t d) -> absl::Status {
    if (!lost[d].ok()) {
      return absl::UnavailableError(
          absl::StrCat(lost[d].message(), "; it was running ",
                       plan.function.name(), " for job ", job_id));
    }
    return results[d].status();
  };
  // Report the root cause: a device's own error, not the CANCELLED its
  // failure caused on the others.
  std::optional<absl::Status> first;
  int64_t first_device = -1;
  for (int64_t d = 0; d < n; ++d) {
    const absl::Status own = status_of(d);
    if (own.ok()) continue;
    const absl::Status s =
        DescribeFailure(own, DeviceName(plan, d, workers[d]));
    if (!first.has_value() || (first->code() == absl::StatusCode::kCancelled &&
                               s.code() != absl::StatusCode::kCancelled)) {
      first = s;
      first_device = d;
    }
  }
  if (!first.has_value()) return absl::OkStatus();
  // A lost worker's own stream says only that it is gone; a peer that was
  // waiting on it in a collective says where. Report both.
  if (first->code() == absl::StatusCode::kUnavailable) {
    for (int64_t d = 0; d < n; ++d) {
      const absl::Status own = status_of(d);
      if (d == first_device || own.ok() ||
          own.code() == absl::StatusCode::kCancelled) {
        continue;
      }
      return absl::UnavailableError(absl::StrCat(first->message(), "; device ",
                                                 d, " saw: ", own.message()));
    }
  }
  return *first;
}

absl::StatusOr<std::vector<JobOutput>> OutputHeaders(
    const JobPlan& plan, const std::vector<WorkerPool::Worker>& workers,
    const std::vector<const DeviceResult*>& results,
    std::vector<BlockLayout>* layouts) {
  SHARD_ASSIGN_OR_RETURN(*layouts, OutputLayouts(plan, results));
  std::vector<const DeviceDigests*> digests;
  for (const DeviceResult* r : results) digests.push_back(&r->digests);
  SHARD_RETURN_IF_ERROR(CheckReplication(plan, digests, [&](int64_t d) {
    return DeviceName(plan, d, workers[d]);
  }));
  std::vector<JobOutput> outputs;
  for (size_t o = 0; o < plan.out_specs.size(); ++o) {
    JobOutput out;
    out.meta =
        ArrayMeta{results[0]->outputs[o].dtype, (*layouts)[o].global_shape()};
    out.stored_as = plan.StoredAs(o);
    outputs.push_back(std::move(out));
  }
  return outputs;
}

absl::StatusOr<std::vector<JobOutput>> AssembleOutputs(
    const JobPlan& plan, const std::vector<WorkerPool::Worker>& workers,
    std::vector<absl::StatusOr<DeviceResult>>& results, uint64_t max_job_bytes,
    OutputBuffers* buffers) {
  std::vector<const DeviceResult*> devices;
  for (const auto& r : results) devices.push_back(&*r);
  std::vector<BlockLayout> layouts;
  SHARD_ASSIGN_OR_RETURN(std::vector<JobOutput> outputs,
                         OutputHeaders(plan, workers, devices, &layouts));
  for (size_t o = 0; o < plan.out_specs.size(); ++o) {
    if (!plan.StoredAs(o).empty()) continue;  // stays on the workers
    const BlockLayout& layout = layouts[o];
    const DType dtype = outputs[o].meta.dtype;
    // The blocks already placed (all of them, with every block alike).
    std::optional<Tensor> placed =
        buffers != nullptr ? buffers->Take(o) : std::nullopt;
    if (!placed.has_value()) {
      SHARD_ASSIGN_OR_RETURN(
          placed, Tensor::Create(dtype, layout.global_shape(), max_job_bytes));
    }
    Tensor& out = *placed;
    for (size_t d = 0; d < results.size(); ++d) {
      if (!plan.IsOutputRepresentative(o, d)) continue;
      std::optional<Tensor>& block = results[d]->blocks[o];
      if (!block.has_value()) continue;  // placed by its sink
      BlockRegion region(layout.global_shape(), layout.block_shape(),
                         layout.BlockOrigin(d), ItemSize(dtype));
      region.CopyIn(block->data(), 0, region.num_bytes(), out.data());
      block.reset();
    }
    outputs[o].data = std::move(placed);
  }
  return outputs;
}

}  // namespace shardmap
