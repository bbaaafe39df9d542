#include "server/plan_report.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/status_util.h"
#include "program/dtypes.h"
#include "server/sharding_picture.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

std::string Bytes(int64_t n) {
  if (n < 0) return "unknown";
  if (n < 1024) return absl::StrCat(n, " B");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = -1;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return absl::StrFormat("%.1f %s (%d B)", v, units[u], n);
}

std::string Count(int64_t n) {
  return n < 0 ? "unknown" : absl::StrFormat("%d", n);
}

// One array's lines: role, global type, spec, block type, picture.
std::string ArrayText(const Mesh& mesh, const v1::PlannedArray& a, DType dtype,
                      const BlockLayout& layout) {
  std::string line = absl::StrFormat("  %-10s %-18s %-22s block %s", a.role(),
                                     ShapeString(dtype, layout.global_shape()),
                                     SpecFromProto(a.spec()).ToString(),
                                     ShapeString(dtype, layout.block_shape()));
  if (!a.resident_name().empty()) {
    absl::StrAppend(&line, "  (resident '", a.resident_name(), "')");
  }
  return absl::StrCat(line, "\n", ShardingPicture(mesh, layout, "    "));
}

// For a partial-manual job: which axes are manual, which auto.
std::string ManualAxesLine(const JobPlan& plan) {
  if (plan.manual_axes.empty()) return "";
  std::vector<std::string> autos;
  for (const MeshAxis& a : plan.mesh.axes()) {
    if (std::find(plan.manual_axes.begin(), plan.manual_axes.end(), a.name) ==
        plan.manual_axes.end()) {
      autos.push_back(a.name);
    }
  }
  return absl::StrCat("manual axes ", absl::StrJoin(plan.manual_axes, ","),
                      "; auto axes ", absl::StrJoin(autos, ","),
                      " (the work is repeated along them)\n");
}

}  // namespace

absl::StatusOr<v1::PlanResponse> ReportPlan(
    const JobPlan& plan, const std::vector<std::string>& arg_labels,
    const std::vector<std::string>& out_labels) {
  v1::PlanResponse r;
  const bool program = plan.program != nullptr;
  r.set_function(plan.function.name());
  *r.mutable_mesh() = MeshToProto(plan.mesh);
  std::string text = absl::StrCat(
      plan.function.program().empty() ? "function " : "program ",
      plan.function.name(), " on mesh ", plan.mesh.ToString(), " (",
      plan.mesh.num_devices(), " devices)\n", ManualAxesLine(plan), "inputs\n");
  int64_t scatter = 0;
  for (size_t i = 0; i < plan.args.size(); ++i) {
    const ArgPlan& a = plan.args[i];
    v1::PlannedArray* p = r.add_inputs();
    p->set_role(i < arg_labels.size() ? arg_labels[i]
                                      : absl::StrCat("args[", i, "]"));
    *p->mutable_global() = HeaderToProto(a.meta.dtype, a.meta.shape);
    *p->mutable_block() = HeaderToProto(a.meta.dtype, a.layout.block_shape());
    *p->mutable_spec() = SpecToProto(a.spec);
    if (a.resident.has_value()) {
      p->set_resident_name(a.resident->name);
    } else {
      scatter += NumElements(a.layout.block_shape()) * ItemSize(a.meta.dtype);
    }
    absl::StrAppend(&text, ArrayText(plan.mesh, *p, a.meta.dtype, a.layout));
  }
  absl::StrAppend(&text, "outputs\n");
  int64_t gather = program ? 0 : -1;
  for (size_t o = 0; o < plan.out_specs.size(); ++o) {
    v1::PlannedArray* p = r.add_outputs();
    p->set_role(o < out_labels.size() ? out_labels[o]
                                      : absl::StrCat("output ", o));
    *p->mutable_spec() = SpecToProto(plan.out_specs[o]);
    p->set_resident_name(plan.StoredAs(o));
    if (!program) {
      absl::StrAppend(&text, "  ", p->role(), "  ",
                      plan.out_specs[o].ToString(),
                      "  (shape known when it runs: the function declares "
                      "no shape program)\n");
      continue;
    }
    const program::ValueType& t =
        plan.program->instrs[plan.program->outputs[o]].type;
    const DType dtype = program::StorageOf(t.elem);
    SHARD_ASSIGN_OR_RETURN(
        BlockLayout layout,
        BlockLayout::FromBlockShape(plan.mesh, plan.out_specs[o], t.shape,
                                    p->role(), "its block"));
    *p->mutable_global() = HeaderToProto(dtype, layout.global_shape());
    *p->mutable_block() = HeaderToProto(dtype, t.shape);
    if (plan.StoredAs(o).empty()) {
      gather += NumElements(t.shape) * ItemSize(dtype);
    }
    absl::StrAppend(&text, ArrayText(plan.mesh, *p, dtype, layout));
  }
  int64_t flops = -1, sent = -1, received = -1, peak = -1;
  if (program) {
    flops = sent = received = 0;
    for (const program::Instr& in : plan.program->instrs) {
      flops += in.flops;
      sent += in.bytes_sent;
      received += in.bytes_received;
    }
    peak = plan.program->peak_bytes;
  }
  r.set_flops_per_device(flops);
  r.set_collective_bytes_sent(sent);
  r.set_collective_bytes_received(received);
  r.set_scatter_bytes_per_device(scatter);
  r.set_gather_bytes_per_device(gather);
  r.set_peak_bytes_per_device(peak);
  absl::StrAppend(&text, "per device\n", "  operations              ",
                  Count(flops), "\n", "  collectives             sent ",
                  Bytes(sent), ", received ", Bytes(received), "\n",
                  "  scatter (coordinator->) ", Bytes(scatter), "\n",
                  "  gather (->coordinator)  ", Bytes(gather),
                  gather > 0 ? " from each device that returns a block" : "",
                  "\n", "  peak memory             ", Bytes(peak), "\n");
  r.set_text(std::move(text));
  return r;
}

}  // namespace shardmap
