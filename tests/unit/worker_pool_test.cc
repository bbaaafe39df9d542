// Tests of server/worker_pool with an injected clock: registration,
// heartbeats and expiry, re-registration, acquisition, the function
// catalog, and concurrent use.
#include "server/worker_pool.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <initializer_list>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "tests/unit/fake_clock.h"
#include "tests/unit/status_matchers.h"
#include "wire/signature.h"

namespace shardmap {
namespace {

class WorkerPoolTest : public ::testing::Test {
 protected:
  // The pool logs every join at info level; keep the test output readable.
  WorkerPoolTest() { spdlog::set_level(spdlog::level::warn); }

  WorkerPool::Options MakeOptions() {
    WorkerPool::Options o;
    o.heartbeat_interval = absl::Milliseconds(100);
    o.heartbeat_timeout = absl::Seconds(1);
    o.clock = [this] { return clock_.Now(); };
    return o;
  }

  std::vector<std::string> LiveIds() const {
    std::vector<std::string> ids;
    for (const auto& w : pool_.LiveWorkers()) ids.push_back(w.id);
    return ids;
  }

  std::string MustRegister(const std::string& address, uint64_t incarnation,
                           std::vector<v1::FunctionSignature> fns = {}) {
    absl::StatusOr<std::string> id = pool_.Register(address, incarnation, fns);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : "";
  }

  FakeClock clock_;
  WorkerPool pool_{MakeOptions()};
};

using Ids = std::vector<std::string>;

TEST_F(WorkerPoolTest, RegisterReturnsSequentialIds) {
  EXPECT_EQ(MustRegister("10.0.0.1:5000", 1), "w0");
  EXPECT_EQ(MustRegister("10.0.0.2:5000", 1), "w1");
  EXPECT_EQ(MustRegister("10.0.0.3:5000", 7), "w2");
  EXPECT_EQ(LiveIds(), (Ids{"w0", "w1", "w2"}));
  const std::vector<WorkerPool::Worker> live = pool_.LiveWorkers();
  EXPECT_EQ(live[1].address, "10.0.0.2:5000");
  EXPECT_EQ(live[2].incarnation, 7u);
  EXPECT_EQ(live[0].last_heartbeat, clock_.Now());
  EXPECT_EQ(pool_.heartbeat_interval(), absl::Milliseconds(100));
}

TEST_F(WorkerPoolTest, RemembersWhetherAWorkerTakesInlineChunks) {
  ASSERT_TRUE(pool_.Register("a:1", 1, {}, std::nullopt, true).ok());
  ASSERT_TRUE(pool_.Register("b:1", 2, {}).ok());  // predates the field
  const std::vector<WorkerPool::Worker> live = pool_.LiveWorkers();
  ASSERT_EQ(live.size(), 2u);
  EXPECT_TRUE(live[0].inline_chunks);
  EXPECT_FALSE(live[1].inline_chunks);
}

TEST_F(WorkerPoolTest, RegisterRejectsEmptyAddress) {
  EXPECT_TRUE(StatusIs(pool_.Register("", 1, {}).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"without an address"}));
  EXPECT_TRUE(LiveIds().empty());
  // The failed registration did not use up an id.
  EXPECT_EQ(MustRegister("a:1", 1), "w0");
}

TEST_F(WorkerPoolTest, HeartbeatKeepsWorkerLive) {
  const std::string id = MustRegister("a:1", 5);
  for (int i = 0; i < 10; ++i) {
    clock_.Advance(absl::Milliseconds(900));
    ASSERT_TRUE(pool_.Heartbeat(id, 5).ok()) << i;
    EXPECT_EQ(LiveIds(), Ids{id});
  }
  EXPECT_EQ(pool_.LiveWorkers()[0].last_heartbeat, clock_.Now());
  EXPECT_TRUE(pool_.CheckLive(id).ok());
}

TEST_F(WorkerPoolTest, SilentWorkerExpires) {
  const std::string a = MustRegister("a:1", 1);
  const std::string b = MustRegister("b:1", 1);
  clock_.Advance(absl::Milliseconds(600));
  ASSERT_TRUE(pool_.Heartbeat(b, 1).ok());
  // Exactly at the timeout a worker is still live ("older than").
  clock_.Advance(absl::Milliseconds(400));
  EXPECT_EQ(LiveIds(), (Ids{a, b}));
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(LiveIds(), Ids{b});
  EXPECT_TRUE(StatusIs(pool_.Heartbeat(a, 1), absl::StatusCode::kNotFound,
                       {"unknown worker w0"}));
  EXPECT_TRUE(StatusIs(pool_.CheckLive(a), absl::StatusCode::kUnavailable,
                       {"stopped heartbeating", "left the pool"}));
  EXPECT_TRUE(pool_.CheckLive(b).ok());
  // A late heartbeat does not bring it back.
  EXPECT_EQ(LiveIds(), Ids{b});
  clock_.Advance(absl::Seconds(5));
  EXPECT_TRUE(LiveIds().empty());
  EXPECT_TRUE(StatusIs(pool_.Heartbeat(b, 1), absl::StatusCode::kNotFound,
                       {"unknown worker w1"}));
}

TEST_F(WorkerPoolTest, ExpiredWorkerMustRegisterAgain) {
  const std::string a = MustRegister("a:1", 1);
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(pool_.Heartbeat(a, 1).code(), absl::StatusCode::kNotFound);
  const std::string again = MustRegister("a:1", 1);
  EXPECT_EQ(again, "w1");
  EXPECT_TRUE(pool_.Heartbeat(again, 1).ok());
  EXPECT_EQ(LiveIds(), Ids{again});
}

TEST_F(WorkerPoolTest, ReRegistrationReplacesOldEntry) {
  const std::string a = MustRegister("a:1", 1);
  const std::string b = MustRegister("b:1", 1);
  const std::string a2 = MustRegister("a:1", 2);  // a restarted
  EXPECT_EQ(a2, "w2");
  EXPECT_EQ(LiveIds(), (Ids{b, a2}));
  const std::vector<WorkerPool::Worker> live = pool_.LiveWorkers();
  EXPECT_EQ(live[1].address, "a:1");
  EXPECT_EQ(live[1].incarnation, 2u);
  EXPECT_TRUE(StatusIs(pool_.Heartbeat(a, 1), absl::StatusCode::kNotFound,
                       {"unknown worker w0"}));
  EXPECT_TRUE(pool_.Heartbeat(a2, 2).ok());
}

TEST_F(WorkerPoolTest, StaleIncarnationHeartbeatIsNotFound) {
  const std::string id = MustRegister("a:1", 41);
  EXPECT_TRUE(StatusIs(pool_.Heartbeat(id, 40), absl::StatusCode::kNotFound,
                       {"unknown worker w0"}));
  EXPECT_TRUE(StatusIs(pool_.Heartbeat("w9", 41), absl::StatusCode::kNotFound,
                       {"unknown worker w9"}));
  // A stale heartbeat does not refresh the real one.
  clock_.Advance(absl::Milliseconds(800));
  EXPECT_EQ(pool_.Heartbeat(id, 40).code(), absl::StatusCode::kNotFound);
  clock_.Advance(absl::Milliseconds(300));
  EXPECT_TRUE(LiveIds().empty());
}

TEST_F(WorkerPoolTest, AcquireReportsHowManyAreAlive) {
  EXPECT_TRUE(
      StatusIs(pool_.Acquire(2).status(), absl::StatusCode::kFailedPrecondition,
               {"the mesh has 2 devices but only 0 workers are alive"}));
  MustRegister("a:1", 1);
  EXPECT_TRUE(StatusIs(pool_.Acquire(4).status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"the mesh has 4 devices but only 1 worker is alive",
                        "start more workers or use a smaller mesh"}));
  MustRegister("b:1", 1);
  MustRegister("c:1", 1);
  EXPECT_TRUE(StatusIs(pool_.Acquire(4).status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"only 3 workers are alive"}));

  absl::StatusOr<std::vector<WorkerPool::Worker>> got = pool_.Acquire(2);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].id, "w0");
  EXPECT_EQ((*got)[1].id, "w1");
  got = pool_.Acquire(3);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), 3u);

  // Expired workers do not count.
  clock_.Advance(absl::Milliseconds(700));
  ASSERT_TRUE(pool_.Heartbeat("w2", 1).ok());
  clock_.Advance(absl::Milliseconds(700));
  got = pool_.Acquire(1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].id, "w2");
  EXPECT_TRUE(StatusIs(pool_.Acquire(2).status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"only 1 worker is alive"}));
}

TEST_F(WorkerPoolTest, FindFunction) {
  EXPECT_TRUE(StatusIs(
      pool_.FindFunction("add").status(), absl::StatusCode::kFailedPrecondition,
      {"cannot look up function 'add'", "no worker has registered yet"}));
  EXPECT_TRUE(pool_.Functions().empty());

  MustRegister("a:1", 1,
               {Signature("scale", 1).Kwarg("alpha", "number").proto(),
                Signature("add", 2).SameDType().proto()});
  MustRegister("b:1", 1, {Signature("matmul", 2).proto()});

  absl::StatusOr<v1::FunctionSignature> add = pool_.FindFunction("add");
  ASSERT_TRUE(add.ok()) << add.status();
  EXPECT_EQ(add->name(), "add");
  EXPECT_EQ(add->arity(), 2);
  EXPECT_TRUE(add->same_dtype());
  absl::StatusOr<v1::FunctionSignature> scale = pool_.FindFunction("scale");
  ASSERT_TRUE(scale.ok());
  ASSERT_EQ(scale->kwargs_size(), 1);
  EXPECT_EQ(scale->kwargs(0).name(), "alpha");

  EXPECT_TRUE(StatusIs(
      pool_.FindFunction("mul").status(), absl::StatusCode::kNotFound,
      {"unknown function 'mul'", "known functions: add, matmul, scale"}));

  std::vector<std::string> names;
  for (const auto& f : pool_.Functions()) names.push_back(f.name());
  EXPECT_EQ(names, (Ids{"add", "matmul", "scale"}));
}

// Smoke test for races: 8 threads register, heartbeat, re-register and read
// at once. Every call's result is checked.
TEST_F(WorkerPoolTest, ConcurrentRegisterAndHeartbeat) {
  constexpr int kThreads = 8;
  constexpr int kBeats = 200;
  absl::Notification start;
  std::vector<absl::Status> results(kThreads);
  std::vector<std::string> first_ids(kThreads), second_ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t]() {
      results[t] = [&]() -> absl::Status {
        start.WaitForNotification();
        const std::string address = absl::StrCat("10.0.0.", t, ":7000");
        const std::string fn = absl::StrCat("f", t);
        absl::StatusOr<std::string> id =
            pool_.Register(address, 1, {Signature(fn, 1).proto()});
        if (!id.ok()) return id.status();
        first_ids[t] = *id;
        for (int i = 0; i < kBeats; ++i) {
          if (absl::Status s = pool_.Heartbeat(*id, 1); !s.ok()) return s;
          if (i % 20 == 0) {
            if (pool_.LiveWorkers().empty()) {
              return absl::InternalError("no live workers while registered");
            }
            if (absl::StatusOr<v1::FunctionSignature> f =
                    pool_.FindFunction(fn);
                !f.ok() || f->name() != fn) {
              return absl::InternalError(absl::StrCat(fn, " not found"));
            }
          }
        }
        // Restart: the old id stops working, the new one works.
        absl::StatusOr<std::string> again =
            pool_.Register(address, 2, {Signature(fn, 1).proto()});
        if (!again.ok()) return again.status();
        second_ids[t] = *again;
        if (pool_.Heartbeat(*id, 1).code() != absl::StatusCode::kNotFound) {
          return absl::InternalError("old incarnation still accepted");
        }
        for (int i = 0; i < kBeats; ++i) {
          if (absl::Status s = pool_.Heartbeat(*again, 2); !s.ok()) return s;
        }
        return absl::OkStatus();
      }();
    });
  }
  start.Notify();
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(results[t].ok()) << "thread " << t << ": " << results[t];
  }
  std::set<std::string> all(first_ids.begin(), first_ids.end());
  all.insert(second_ids.begin(), second_ids.end());
  EXPECT_EQ(all.size(), 2u * kThreads);  // every id unique
  for (int i = 0; i < 2 * kThreads; ++i) {
    EXPECT_EQ(all.count(absl::StrCat("w", i)), 1u) << i;
  }
  const std::vector<WorkerPool::Worker> live = pool_.LiveWorkers();
  ASSERT_EQ(live.size(), static_cast<size_t>(kThreads));
  std::set<std::string> live_ids;
  for (const auto& w : live) {
    EXPECT_EQ(w.incarnation, 2u);
    live_ids.insert(w.id);
  }
  EXPECT_EQ(live_ids,
            std::set<std::string>(second_ids.begin(), second_ids.end()));
  EXPECT_EQ(pool_.Functions().size(), static_cast<size_t>(kThreads));
}

// Ranks: device i runs on rank i, whatever the registration order; devices
// no rank claims go to unranked workers in registration order.
TEST_F(WorkerPoolTest, RanksDecideDeviceOrder) {
  ASSERT_TRUE(pool_.Register("r2:1", 1, {}, 2).ok());
  ASSERT_TRUE(pool_.Register("u:1", 1, {}).ok());
  ASSERT_TRUE(pool_.Register("r0:1", 1, {}, 0).ok());
  absl::StatusOr<std::vector<WorkerPool::Worker>> got = pool_.Acquire(3);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<std::string> addresses;
  for (const auto& w : *got) addresses.push_back(w.address);
  EXPECT_EQ(addresses, (Ids{"r0:1", "u:1", "r2:1"}));
  EXPECT_EQ((*got)[2].rank, 2);
  EXPECT_FALSE((*got)[1].rank.has_value());
  // A 2-device mesh needs ranks 0 and 1: the unranked worker takes 1.
  got = pool_.Acquire(2);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[1].address, "u:1");
}

TEST_F(WorkerPoolTest, AcquireNamesMissingRanks) {
  ASSERT_TRUE(pool_.Register("a:1", 1, {}, 0).ok());
  ASSERT_TRUE(pool_.Register("b:1", 1, {}, 1).ok());
  ASSERT_TRUE(pool_.Register("c:1", 1, {}, 3).ok());
  EXPECT_TRUE(StatusIs(pool_.Acquire(4).status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"only 3 workers are alive", "missing rank 2"}));
  ASSERT_TRUE(pool_.Register("d:1", 1, {}, 7).ok());
  EXPECT_TRUE(StatusIs(pool_.Acquire(4).status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"4 workers are alive", "no live worker has rank 2"}));
}

TEST_F(WorkerPoolTest, CheckCompleteCountsExpectedRanks) {
  EXPECT_TRUE(pool_.CheckComplete(0).ok());
  EXPECT_TRUE(StatusIs(pool_.CheckComplete(2), absl::StatusCode::kUnavailable,
                       {"0/2 workers registered"}));
  ASSERT_TRUE(pool_.Register("a:1", 1, {}, 0).ok());
  ASSERT_TRUE(pool_.Register("b:1", 1, {}, 1).ok());
  ASSERT_TRUE(pool_.Register("d:1", 1, {}, 3).ok());
  absl::Status s = pool_.CheckComplete(4);
  EXPECT_TRUE(StatusIs(s, absl::StatusCode::kUnavailable,
                       {"3/4 workers registered, missing rank 2"}))
      << s;
  ASSERT_TRUE(pool_.Register("c:1", 1, {}, 2).ok());
  EXPECT_TRUE(pool_.CheckComplete(4).ok());
  // Rank 2 stops heartbeating: incomplete again.
  clock_.Advance(absl::Milliseconds(900));
  for (const auto& w : pool_.LiveWorkers()) {
    if (w.rank != 2) ASSERT_TRUE(pool_.Heartbeat(w.id, 1).ok());
  }
  clock_.Advance(absl::Milliseconds(200));
  EXPECT_TRUE(StatusIs(pool_.CheckComplete(4), absl::StatusCode::kUnavailable,
                       {"3/4 workers registered, missing rank 2"}));
}

TEST_F(WorkerPoolTest, DuplicateRankIsRejectedNamingTheHolder) {
  const std::string a = MustRegister("a:1", 1);
  ASSERT_TRUE(pool_.Register("a:1", 1, {}, 1).ok());  // a restarts ranked
  absl::StatusOr<std::string> dup = pool_.Register("b:1", 2, {}, 1);
  EXPECT_TRUE(StatusIs(dup.status(), absl::StatusCode::kAlreadyExists,
                       {"rank 1 is held by live worker w1 at a:1"}))
      << dup.status();
  EXPECT_EQ(pool_.LiveWorkers().size(), 1u);
  EXPECT_TRUE(StatusIs(pool_.Register("c:1", 1, {}, -1).status(),
                       absl::StatusCode::kInvalidArgument, {"rank", "-1"}));
  // The holder restarting at its own address replaces itself.
  absl::StatusOr<std::string> again = pool_.Register("a:1", 9, {}, 1);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(pool_.LiveWorkers().size(), 1u);
  EXPECT_EQ(pool_.LiveWorkers()[0].incarnation, 9u);
  // Once the holder is dead, a new worker (another address) takes the rank.
  clock_.Advance(absl::Milliseconds(1001));
  absl::StatusOr<std::string> next = pool_.Register("b:1", 3, {}, 1);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(pool_.LiveWorkers().size(), 1u);
  EXPECT_EQ(pool_.LiveWorkers()[0].address, "b:1");
  EXPECT_EQ(pool_.LiveWorkers()[0].rank, 1);
  (void)a;
}

TEST_F(WorkerPoolTest, DrainingWorkerGetsNoNewJobs) {
  const std::string a = MustRegister("a:1", 1);
  const std::string b = MustRegister("b:1", 1);
  ASSERT_TRUE(pool_.Heartbeat(a, 1, /*draining=*/true).ok());
  absl::StatusOr<std::vector<WorkerPool::Worker>> got = pool_.Acquire(1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].id, b);
  EXPECT_TRUE(StatusIs(pool_.Acquire(2).status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"only 1 worker is alive and 1 shutting down"}));
  // The jobs it runs go on: it is still live.
  EXPECT_TRUE(pool_.CheckLive(a).ok());
  EXPECT_TRUE(StatusIs(pool_.CheckComplete(2), absl::StatusCode::kUnavailable,
                       {"1/2 workers registered (1 shutting down)"}));
  // A later heartbeat without the flag does not undo it.
  ASSERT_TRUE(pool_.Heartbeat(a, 1).ok());
  got = pool_.Acquire(1);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].id, b);
  EXPECT_TRUE(pool_.LiveWorkers()[0].draining);
}

// on_leave names each worker that left the pool (expired) or whose address
// another process took over, and no other (the coordinator evicts the
// channel to exactly those).
TEST(WorkerPoolLeaveTest, OnLeaveNamesExpiredAndReplacedWorkers) {
  FakeClock clock;
  std::vector<std::string> left;
  WorkerPool::Options o;
  o.heartbeat_timeout = absl::Seconds(1);
  o.clock = [&clock] { return clock.Now(); };
  o.on_leave = [&left](const std::string& address) { left.push_back(address); };
  WorkerPool pool(o);
  ASSERT_TRUE(pool.Register("10.0.0.1:5000", 1, {}).ok());
  ASSERT_TRUE(pool.Register("10.0.0.2:5000", 1, {}).ok());
  // The same process registering again (e.g. the coordinator forgot it)
  // keeps its channel; a new process at the address does not.
  ASSERT_TRUE(pool.Register("10.0.0.1:5000", 1, {}).ok());
  EXPECT_TRUE(left.empty());
  ASSERT_TRUE(pool.Register("10.0.0.1:5000", 2, {}).ok());
  EXPECT_EQ(left, std::vector<std::string>{"10.0.0.1:5000"});
  // 10.0.0.2 goes silent; 10.0.0.1 keeps heartbeating.
  clock.Advance(absl::Milliseconds(600));
  auto live = pool.LiveWorkers();
  ASSERT_EQ(live.size(), 2u);
  const std::string id1 =
      live[1].address == "10.0.0.1:5000" ? live[1].id : live[0].id;
  ASSERT_TRUE(pool.Heartbeat(id1, 2).ok());
  clock.Advance(absl::Milliseconds(600));
  EXPECT_EQ(pool.LiveWorkers().size(), 1u);
  EXPECT_EQ(left, (std::vector<std::string>{"10.0.0.1:5000", "10.0.0.2:5000"}));
}

}  // namespace
}  // namespace shardmap
