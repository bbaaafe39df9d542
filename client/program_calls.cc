// ShardClient's calls that carry a job's spec without its data, and the
// expression program registry: JobSpecOf, Plan, RegisterProgram,
// UnregisterProgram.
#include <grpcpp/grpcpp.h>

#include "client/shard_client.h"
#include "rpc/grpc_status.h"
#include "wire/proto_convert.h"

namespace shardmap {

namespace {

void AddRules(const std::vector<TreeRule>& rules,
              google::protobuf::RepeatedPtrField<v1::TreeRule>* out) {
  for (const TreeRule& r : rules) {
    v1::TreeRule* p = out->Add();
    p->set_filter(r.filter);
    *p->mutable_spec() = SpecToProto(r.spec);
  }
}

void AddTrees(const JobRequest::Trees& t, v1::JobSpec* spec) {
  if (t.args) *spec->mutable_arg_tree() = *t.args;
  if (t.in_specs) *spec->mutable_in_spec_tree() = *t.in_specs;
  if (t.outputs) *spec->mutable_out_tree() = *t.outputs;
  if (t.out_specs) *spec->mutable_out_spec_tree() = *t.out_specs;
  AddRules(t.in_rules, spec->mutable_in_rules());
  AddRules(t.out_rules, spec->mutable_out_rules());
  AddRules(t.state_rules, spec->mutable_state_rules());
}

}  // namespace

v1::JobSpec JobSpecOf(const JobRequest& job,
                      const std::optional<Mesh>& default_mesh) {
  v1::JobSpec result;
  v1::JobSpec* spec = &result;
  spec->set_function(job.function);
  if (job.mesh.has_value()) {
    *spec->mutable_mesh() = MeshToProto(*job.mesh);
  } else if (default_mesh.has_value()) {
    *spec->mutable_mesh() = MeshToProto(*default_mesh);
  }
  for (const std::string& a : job.axis_names) spec->add_axis_names(a);
  for (const std::string& a : job.auto_axes) spec->add_auto_axes(a);
  for (size_t i = 0; i < job.args.size(); ++i) {
    const Tensor* t = job.args[i];
    *spec->add_args() = t != nullptr ? HeaderToProto(t->dtype(), t->shape())
                                     : v1::ArrayHeader();
  }
  for (const std::string& name : job.resident_args)
    spec->add_resident_args(name);
  for (const std::string& name : job.resident_outputs) {
    spec->add_resident_outputs(name);
  }
  spec->set_overwrite(job.overwrite);
  for (int i : job.donate_args) spec->add_donate_args(i);
  for (const JobRequest::State& st : job.states) {
    v1::StateBinding* b = spec->add_states();
    b->set_slot(st.slot);
    b->set_name(st.name);
    if (st.spec.has_value()) *b->mutable_spec() = SpecToProto(*st.spec);
    if (st.out_spec.has_value()) {
      *b->mutable_out_spec() = SpecToProto(*st.out_spec);
    }
  }
  AddTrees(job.trees, spec);
  for (const auto& s : job.in_specs) *spec->add_in_specs() = SpecToProto(s);
  for (const auto& s : job.out_specs) *spec->add_out_specs() = SpecToProto(s);
  spec->set_kwargs_json(job.kwargs_json);
  spec->set_no_check_rep(!job.check_rep);
  spec->set_program(job.program);
  return result;
}

absl::StatusOr<v1::PlanResponse> ShardClient::Plan(
    const JobRequest& job) const {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + job.timeout));
  v1::PlanRequest request;
  *request.mutable_spec() = JobSpecOf(job, options_.default_mesh);
  v1::PlanResponse response;
  grpc::Status s = stub_->Plan(&context, request, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return response;
}

absl::StatusOr<v1::RegisterProgramResponse> ShardClient::RegisterProgram(
    const std::string& name, const std::string& source, bool replace) const {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::RegisterProgramRequest request;
  request.set_name(name);
  request.set_source(source);
  request.set_replace(replace);
  v1::RegisterProgramResponse response;
  grpc::Status s = stub_->RegisterProgram(&context, request, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return response;
}

absl::Status ShardClient::UnregisterProgram(const std::string& name) const {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::UnregisterProgramRequest request;
  request.set_name(name);
  v1::UnregisterProgramResponse response;
  grpc::Status s = stub_->UnregisterProgram(&context, request, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return absl::OkStatus();
}

}  // namespace shardmap
