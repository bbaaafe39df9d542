// What the job queue's integration tests share: a cluster that runs one job
// at a time; a RunJob call made by hand (identity of float32[4] over x=2,
// whose JobSpec goes at once and whose argument only when asked, so a job
// can hold a turn for as long as a test needs); and a bounded wait for the
// coordinator to report how many jobs run and wait.
//
// Not thread-safe: one thread per call.
#ifndef SHARDMAP_TESTS_INTEGRATION_JOB_QUEUE_UTIL_H_
#define SHARDMAP_TESTS_INTEGRATION_JOB_QUEUE_UTIL_H_

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/shard_client.h"
#include "rpc/channel.h"
#include "shardmap/v1/coordinator.grpc.pb.h"
#include "tests/integration/test_cluster.h"
#include "tests/unit/wait_until.h"
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
  // Complete, as a check: the job ran and gave its argument back.
  ::testing::AssertionResult CompletesAsIdentity() {
    std::vector<float> values;
    const grpc::Status s = Complete(&values);
    if (!s.ok()) {
      return ::testing::AssertionFailure()
             << "the job failed: " << s.error_message();
    }
    if (values != std::vector<float>{1, 2, 3, 4}) {
      return ::testing::AssertionFailure()
             << "the job gave back " << values.size()
             << " floats, not its argument (1, 2, 3, 4)";
    }
    return ::testing::AssertionSuccess();
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

// Two workers, one job at a time.
inline TestCluster::Options OneJobAtATime() {
  TestCluster::Options options;
  options.num_workers = 2;
  options.max_concurrent_jobs = 1;
  return options;
}

// Waits (WaitUntil's bound) until the coordinator reports `running` jobs
// running and `waiting` waiting; false if it never does.
inline bool WaitForJobs(const ShardClient& client, int running, int waiting) {
  return WaitUntil([&] {
    auto s = client.Status();
    return s.ok() && s->jobs_running() == running &&
           s->jobs_waiting() == waiting;
  });
}

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_INTEGRATION_JOB_QUEUE_UTIL_H_
