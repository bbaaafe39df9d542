// Test helper shared by the job runner's unit tests: a small planned job
// (identity over a 1-D mesh), its workers, and float tensors.
#ifndef SHARDMAP_TESTS_UNIT_TEST_JOBS_H_
#define SHARDMAP_TESTS_UNIT_TEST_JOBS_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/planner.h"
#include "server/resident_index.h"
#include "server/worker_pool.h"
#include "wire/proto_convert.h"
#include "wire/signature.h"

namespace shardmap {

// identity over x=`devices` on a float32[per_device * devices] split
// P('x'), its output by `out_spec`, stored as `store_as` unless empty
// (planned against `index`, or an empty one).
inline JobPlan IdentityPlan(int devices, const char* out_spec = "P('x')",
                            const std::string& store_as = "",
                            const ResidentIndex* index = nullptr,
                            int64_t per_device = 2) {
  v1::JobSpec spec;
  spec.set_function("identity");
  *spec.mutable_mesh() =
      MeshToProto(*Mesh::Create({{"x", static_cast<int64_t>(devices)}}));
  *spec.add_args() = HeaderToProto(DType::kFloat32, {devices * per_device});
  *spec.add_in_specs() = SpecToProto(*PartitionSpec::Parse("P('x')"));
  *spec.add_out_specs() = SpecToProto(*PartitionSpec::Parse(out_spec));
  if (!store_as.empty()) spec.add_resident_outputs(store_as);
  const ResidentIndex empty([](const std::string&) { return true; });
  auto plan = PlanJob(
      spec,
      [](const std::string&) {
        return absl::StatusOr<v1::FunctionSignature>(
            Signature("identity", 1).proto());
      },
      index != nullptr ? index : &empty);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : JobPlan();
}

// Workers w0, w1, ... at 127.0.0.1:5000, 5001, ... (incarnations 100,
// 101, ...).
inline std::vector<WorkerPool::Worker> TestWorkers(int n) {
  std::vector<WorkerPool::Worker> workers;
  for (int i = 0; i < n; ++i) {
    WorkerPool::Worker w;
    w.id = absl::StrCat("w", i);
    w.address = absl::StrCat("127.0.0.1:", 5000 + i);
    w.incarnation = 100 + i;
    workers.push_back(w);
  }
  return workers;
}

// A float32 vector holding `values`, and back.
inline Tensor Floats(const std::vector<float>& values) {
  Tensor t =
      *Tensor::Create(DType::kFloat32, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.data_as<float>()[i] = values[i];
  return t;
}
inline std::vector<float> FloatValues(const Tensor& t) {
  return std::vector<float>(t.data_as<float>(),
                            t.data_as<float>() + t.num_elements());
}

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_TEST_JOBS_H_
