// Tests of the fan-out itself (server/device_fanout.h), both ways (a
// thread per device, and serial calls on the calling thread), with fake
// workers (tests/unit/fake_shard_channel.h): with a thread per device the
// job's own work (`meanwhile`) runs while the calls wait, and its check
// aborts them; serially the calling thread watches while it waits and
// does the job's own work after the calls, unless an answer comes in
// pieces, which hands that work and the watching to a pooled thread;
// answers are read as they come, so a device that fails cancels one still
// waiting before it. The job runner's tests cover the rest, both ways.
#include "server/device_fanout.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/unit/fake_shard_channel.h"
#include "tests/unit/test_jobs.h"

namespace shardmap {
namespace {

class DeviceFanoutTest : public ::testing::TestWithParam<bool> {
 protected:
  DeviceFanout::Options FanoutOptions() const {
    DeviceFanout::Options options;
    options.small = true;
    options.serial = GetParam();
    options.liveness_poll = absl::Milliseconds(1);
    return options;
  }
  // Each call sends one message and reads until its stream ends.
  static DeviceFanout::Call Calls() {
    DeviceFanout::Call call;
    call.send = [](int64_t d, ShardChannel& ch) -> absl::StatusOr<bool> {
      v1::ShardRequest request;
      request.mutable_job()->set_device_id(d);
      return ch.WriteLast(request);
    };
    call.receive = [](int64_t, const absl::StatusOr<bool>& sent,
                      ShardChannel& ch) -> absl::StatusOr<DeviceResult> {
      if (!sent.ok()) return sent.status();
      v1::ShardResponse response;
      while (ch.Read(&response)) {
      }
      const absl::Status s = ch.Finish();
      if (!s.ok()) return s;
      return DeviceResult{};
    };
    return call;
  }

  std::vector<WorkerPool::Worker> workers_ = TestWorkers(2);
  FakeWorkerConnector connector_;
  DeviceThreads threads_;
};

// Device 1's answer comes in pieces: its first read answers, its second
// waits until the stream is cancelled. The job's own work runs while
// device 1 waits, and its check aborts the call; with a thread per device
// it runs on the calling thread, serially on a pooled one.
TEST_P(DeviceFanoutTest, TheJobsOwnWorkRunsWhileAnAnswerComesInAndCanAbortIt) {
  FakeWorkerScript waits;
  waits.responses.resize(1);
  waits.block_read = 1;  // after its first piece, only when cancelled
  connector_.Script(workers_[1].address, waits);
  DeviceFanout fanout(FanoutOptions(), &threads_, &connector_, workers_,
                      connector_.Now() + absl::Seconds(10));
  std::atomic<bool> client_left{false};
  bool saw_the_wait = false;
  std::thread::id own_work;
  fanout.Run(
      Calls(), [&] { return client_left.load(); },
      [&](const std::function<void()>& watch) {
        own_work = std::this_thread::get_id();
        saw_the_wait = connector_.WaitFor(
            [&] {
              connector_.AssertHeld();
              return connector_.WaitingLocked(workers_[1].address) == 1 &&
                     connector_.FinishedLocked(workers_[0].address) == 1;
            },
            absl::Seconds(20));
        client_left = true;
        watch();
      });
  EXPECT_TRUE(saw_the_wait);
  EXPECT_EQ(fanout.results()[1].status().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(fanout.results()[0].ok()) << fanout.results()[0].status();
  EXPECT_EQ(own_work == std::this_thread::get_id(), !GetParam());
  fanout.Finish(false);
}

// Device 0 does not answer until cancelled. The client leaving aborts it
// at the next poll: with a thread per device the watching does, serially
// the calling thread while it waits. Serially the job's own work then
// runs on the calling thread, after the calls.
TEST_P(DeviceFanoutTest, AClientThatLeavesWhileAllWaitAbortsTheCalls) {
  FakeWorkerScript waits;
  waits.block_read = 0;  // answers only when cancelled
  connector_.Script(workers_[0].address, waits);
  DeviceFanout fanout(FanoutOptions(), &threads_, &connector_, workers_,
                      connector_.Now() + absl::Seconds(10));
  std::atomic<bool> client_left{false};
  std::thread leave([&] {
    EXPECT_TRUE(connector_.WaitFor([&] {
      connector_.AssertHeld();
      return connector_.WaitingLocked(workers_[0].address) == 1 &&
             connector_.FinishedLocked(workers_[1].address) == 1;
    }));
    client_left = true;
  });
  std::thread::id own_work;
  bool calls_returned_first = false;
  fanout.Run(
      Calls(), [&] { return client_left.load(); },
      [&](const std::function<void()>& watch) {
        own_work = std::this_thread::get_id();
        calls_returned_first = connector_.Waiting(workers_[0].address) == 0;
        // Threads: wait here, watched, until the abort reaches device 0.
        while (!GetParam() && connector_.Waiting(workers_[0].address) > 0) {
          watch();
          absl::SleepFor(absl::Milliseconds(1));  // polls; decides nothing
        }
      });
  leave.join();
  EXPECT_EQ(fanout.results()[0].status().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(fanout.results()[1].ok()) << fanout.results()[1].status();
  EXPECT_EQ(own_work, std::this_thread::get_id());
  if (GetParam()) EXPECT_TRUE(calls_returned_first);
  fanout.Finish(false);
}

TEST_P(DeviceFanoutTest, ADeviceThatFailsCancelsOneWaitingBeforeIt) {
  FakeWorkerScript waits;
  waits.block_read = 0;
  connector_.Script(workers_[0].address, waits);
  FakeWorkerScript fails;
  fails.finish = absl::InvalidArgumentError("kwarg 'scale' is not a number");
  connector_.Script(workers_[1].address, fails);
  DeviceFanout fanout(FanoutOptions(), &threads_, &connector_, workers_,
                      connector_.Now() + absl::Seconds(10));
  fanout.Run(Calls(), nullptr);
  EXPECT_EQ(fanout.results()[1].status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fanout.results()[0].status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(connector_.Waiting(workers_[0].address), 0);
  fanout.Finish(false);
}

INSTANTIATE_TEST_SUITE_P(Calls, DeviceFanoutTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Serial" : "Threads";
                         });

}  // namespace
}  // namespace shardmap
