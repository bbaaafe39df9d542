// A RunJob call made by hand for the integration tests: identity of
// float32[4] over x=2, whose JobSpec goes at once and whose argument only
// when asked, so a job can hold a turn for as long as a test needs.
//
// Not thread-safe: one thread per call.
#ifndef SHARDMAP_TESTS_INTEGRATION_RAW_JOB_H_
#define SHARDMAP_TESTS_INTEGRATION_RAW_JOB_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rpc/channel.h"
#include "shardmap/v1/coordinator.grpc.pb.h"
#include "wire/proto_convert.h"

namespace shardmap {

class RawJob {
 public:
  RawJob(const std::string& address, absl::Duration timeout)
      : stub_(v1::Coordinator::NewStub(MakeChannel(address))) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    stream_ = stub_->RunJob(&context_);
    v1::RunJobRequest spec;
    v1::JobSpec* s = spec.mutable_spec();
    s->set_function("identity");
    *s->mutable_mesh() = MeshToProto(*Mesh::Parse("x=2"));
    *s->add_args() = HeaderToProto(DType::kFloat32, {4});
    *s->add_in_specs() = SpecToProto(*PartitionSpec::Parse("P('x')"));
    *s->add_out_specs() = SpecToProto(*PartitionSpec::Parse("P('x')"));
    stream_->Write(spec);
  }
  // Sends the argument (1, 2, 3, 4) and ends the call: its status, and in
  // `values` the output it got back.
  grpc::Status Complete(std::vector<float>* values) {
    const std::vector<float> x = {1, 2, 3, 4};
    v1::RunJobRequest chunk;
    chunk.mutable_chunk()->set_data(
        std::string(reinterpret_cast<const char*>(x.data()), 16));
    stream_->Write(chunk);
    stream_->WritesDone();
    return Drain(values);
  }
  grpc::Status Cancel() {
    context_.TryCancel();
    return Drain(nullptr);
  }
  // The status of a call the server ended by itself.
  grpc::Status Drain(std::vector<float>* values) {
    v1::RunJobResponse response;
    while (stream_->Read(&response)) {
      if (values != nullptr && response.has_chunk()) {
        const std::string& d = response.chunk().data();
        const float* f = reinterpret_cast<const float*>(d.data());
        values->insert(values->end(), f, f + d.size() / sizeof(float));
      }
    }
    return stream_->Finish();
  }

 private:
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<
      grpc::ClientReaderWriter<v1::RunJobRequest, v1::RunJobResponse>>
      stream_;
};

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_INTEGRATION_RAW_JOB_H_
