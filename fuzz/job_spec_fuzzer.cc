// libFuzzer target: validation of a client's request on the coordinator.
// The input is a JobSpec in protobuf text format (readable seeds in
// corpus/job_spec/); the planner (server/planner PlanJob: mesh, function,
// CheckCall on arguments and keyword arguments, specs, collective rules,
// resident arrays) must answer with a plan or a clean error, never crash.
// Functions are the workers' real built-ins; the resident index holds one
// array, "w" float32[8,4] on x=4 as P('x').
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "server/planner.h"
#include "server/resident_index.h"
#include "worker/functions/function_registry.h"

namespace {

using namespace shardmap;

const FunctionRegistry& Registry() {
  static const FunctionRegistry* registry = [] {
    auto* r = new FunctionRegistry;
    RegisterBuiltins(*r);
    RegisterCollectiveBuiltins(*r);
    RegisterStateBuiltins(*r);
    return r;
  }();
  return *registry;
}

ResidentIndex& Index() {
  static ResidentIndex* index = [] {
    auto* i = new ResidentIndex([](const std::string&) { return true; });
    ResidentArray a;
    a.name = "w";
    a.meta = ArrayMeta{DType::kFloat32, {8, 4}};
    a.mesh = *Mesh::Parse("x=4");
    a.spec = *PartitionSpec::Parse("P('x')");
    for (int d = 0; d < 4; ++d) {
      a.worker_ids.push_back("w" + std::to_string(d));
      a.addresses.push_back("127.0.0.1:1");
    }
    a.version = i->NextVersion();
    i->Commit(std::move(a));
    return i;
  }();
  return *index;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  v1::JobSpec spec;
  google::protobuf::TextFormat::Parser parser;
  parser.AllowPartialMessage(true);
  // Silence the parser's error log: malformed text is expected.
  class Quiet : public google::protobuf::io::ErrorCollector {
    void AddError(int, int, const std::string&) override {}
  } quiet;
  parser.RecordErrorsTo(&quiet);
  if (!parser.ParseFromString(
          std::string(reinterpret_cast<const char*>(data), size), &spec)) {
    return 0;
  }
  const FunctionLookup lookup =
      [](const std::string& name) -> absl::StatusOr<v1::FunctionSignature> {
    absl::StatusOr<const FunctionDef*> def = Registry().Find(name);
    if (!def.ok()) return def.status();
    return (*def)->signature;
  };
  absl::StatusOr<JobPlan> plan = PlanJob(spec, lookup, &Index());
  if (!plan.ok()) {
    if (plan.status().message().empty()) {
      std::fprintf(stderr, "job_spec_fuzzer: error without a message: %s\n",
                   plan.status().ToString().c_str());
      std::abort();
    }
    return 0;
  }
  // What the job runner asks of a plan.
  (void)plan->input_bytes();
  (void)plan->reads();
  (void)plan->writes();
  const int64_t devices = plan->mesh.num_devices();
  for (const ArgPlan& a : plan->args) {
    for (int64_t d = 0; d < devices; ++d) {
      (void)a.layout.BlockNumber(d);
      (void)a.layout.BlockOrigin(d);
    }
  }
  for (size_t o = 0; o < plan->out_specs.size(); ++o) {
    for (int64_t d = 0; d < devices; ++d) {
      (void)plan->IsOutputRepresentative(static_cast<int>(o), d);
    }
  }
  return 0;
}
