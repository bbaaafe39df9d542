// Test helper for the job link tests (shard_link_test.cc,
// link_choice_test.cc): a worker that serves links only, with a scripted
// call body in place of the worker's job code, and the calls the tests
// make to it over gRPC on 127.0.0.1:0.
#ifndef SHARDMAP_TESTS_UNIT_LINK_WORKER_H_
#define SHARDMAP_TESTS_UNIT_LINK_WORKER_H_

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/change_signal.h"
#include "core/device_threads.h"
#include "rpc/channel_cache.h"
#include "server/grpc_worker_connector.h"
#include "tests/unit/fake_worker_server.h"
#include "worker/shard_link_service.h"

namespace shardmap {

// A worker that serves links only. A call's job names what it does:
// "echo" returns the bytes of its chunks as one output chunk; "fail"
// fails; "wait" waits until the call is cancelled (bounded).
class LinkWorker {
 public:
  LinkWorker() : service_(this) {
    server_ = StartLocalServer(&service_, &address_);
  }
  ~LinkWorker() { Stop(); }
  void Stop() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
    server_.reset();
  }

  const std::string& address() const { return address_; }
  int links() const { return links_started.load(); }
  std::atomic<int> links_started{0};  // RunShards calls
  std::atomic<int> saw_cancel{0};
  std::atomic<int> running{0};
  // Echo calls may run inline (ShardLinkReactor::RunsInline).
  std::atomic<bool> echo_inline{false};
  absl::Mutex mu;
  std::vector<std::string> traces ABSL_GUARDED_BY(mu);
  // The threads calls were offered to RunsInline on, and echo calls ran on.
  std::vector<std::thread::id> offer_threads ABSL_GUARDED_BY(mu);
  std::vector<std::thread::id> run_threads ABSL_GUARDED_BY(mu);

 private:
  absl::Status Run(ShardStream* stream, absl::Time deadline,
                   const std::string& trace) {
    {
      absl::MutexLock lock(&mu);
      traces.push_back(trace);
    }
    v1::ShardRequest request;
    if (!stream->Read(&request) || !request.has_job()) {
      return absl::InternalError("no job header");
    }
    const std::string what = request.job().function();
    if (what == "fail") {
      return absl::InvalidArgumentError("argument x: scripted failure");
    }
    if (what == "wait") {
      ++running;
      while (!stream->cancelled() &&
             absl::Now() < deadline + absl::Seconds(5)) {
        absl::SleepFor(absl::Milliseconds(2));
      }
      if (stream->cancelled()) ++saw_cancel;
      return absl::CancelledError("cancelled");
    }
    {
      absl::MutexLock lock(&mu);
      run_threads.push_back(std::this_thread::get_id());
    }
    std::string bytes;
    for (const v1::ArrayChunk& c : request.job().chunks()) bytes += c.data();
    while (stream->Read(&request)) bytes += request.chunk().data();
    v1::ShardResponse outputs;
    outputs.mutable_outputs();
    if (!stream->Write(outputs)) return absl::CancelledError("gone");
    v1::ShardResponse chunk;
    chunk.mutable_chunk()->set_data(bytes);
    stream->WriteLast(chunk);
    return absl::OkStatus();
  }

  class Service final
      : public v1::Worker::WithCallbackMethod_RunShards<v1::Worker::Service> {
   public:
    explicit Service(LinkWorker* worker) : worker_(worker) {}
    grpc::ServerBidiReactor<v1::ShardLinkRequest, v1::ShardLinkResponse>*
    RunShards(grpc::CallbackServerContext*) override {
      ++worker_->links_started;
      return new ShardLinkReactor(
          &worker_->threads_, nullptr,
          [w = worker_](ShardStream* s, absl::Time d, const std::string& t) {
            return w->Run(s, d, t);
          },
          [w = worker_](const v1::ShardRequest& first) {
            absl::MutexLock lock(&w->mu);
            w->offer_threads.push_back(std::this_thread::get_id());
            return w->echo_inline.load() && first.job().function() == "echo";
          });
    }

   private:
    LinkWorker* const worker_;
  };

  DeviceThreads threads_;  // outlives the server's reactors
  Service service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

inline v1::ShardRequest Job(const std::string& what) {
  v1::ShardRequest r;
  r.mutable_job()->set_function(what);
  return r;
}

inline v1::ShardRequest Chunk(const std::string& data) {
  v1::ShardRequest r;
  r.mutable_chunk()->set_data(data);
  return r;
}

// Waits (bounded: 30 s) until `count` is at least 1; its value then.
inline int Eventually(const std::atomic<int>& count) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (count.load() == 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  return count.load();
}

// Opens a small call to `worker` that waits until it is cancelled, and
// returns it once the worker runs it.
inline std::unique_ptr<ShardChannel> StartWaitingCall(
    WorkerConnector& connector, LinkWorker& worker) {
  auto ch =
      connector.OpenSmall(worker.address(), absl::Now() + absl::Seconds(60));
  EXPECT_TRUE(ch->WriteLast(Job("wait")));
  EXPECT_EQ(Eventually(worker.running), 1);
  return ch;
}

// Reads `ch` to its end: the bytes of its chunks, or its error; an echo's
// answer must hold exactly one ShardOutputs (`outputs`, if not null, gets
// how many came).
inline absl::StatusOr<std::string> ReadAll(ShardChannel& ch,
                                           int* outputs = nullptr) {
  std::string back;
  v1::ShardResponse response;
  int seen = 0;
  while (ch.Read(&response)) {
    if (response.has_outputs()) ++seen;
    back += response.chunk().data();
  }
  if (outputs != nullptr) *outputs = seen;
  absl::Status s = ch.Finish();
  if (!s.ok()) return s;
  return back;
}

// Runs an echo call of `data` (in two chunks); returns what came back.
inline absl::StatusOr<std::string> Echo(WorkerConnector& connector,
                                        const std::string& address,
                                        const std::string& data) {
  auto ch = connector.OpenSmall(address, absl::Now() + absl::Seconds(30));
  const size_t half = data.size() / 2;
  if (!ch->Write(Job("echo")) || !ch->Write(Chunk(data.substr(0, half))) ||
      !ch->WriteLast(Chunk(data.substr(half)))) {
    return ch->Finish();
  }
  int outputs = 0;
  absl::StatusOr<std::string> back = ReadAll(*ch, &outputs);
  if (back.ok() && outputs != 1) {
    return absl::InternalError("expected one ShardOutputs");
  }
  return back;
}

// An echo call on `ch` (from OpenSmall or OpenSmallIfUp) whose header
// carries its data and ends its half; what came back.
inline absl::StatusOr<std::string> EchoInOneMessage(
    std::unique_ptr<ShardChannel> ch, const std::string& data) {
  v1::ShardRequest job = Job("echo");
  job.mutable_job()->add_chunks()->set_data(data);
  if (!ch->WriteLast(job)) return ch->Finish();
  return ReadAll(*ch);
}

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_LINK_WORKER_H_
