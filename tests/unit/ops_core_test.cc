// Tests of the operations pieces in core/: the keepalive policy
// (scenario 19), W3C traceparent parsing, JSON log lines, the drain gate.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "absl/time/clock.h"
#include "ops/logging.h"
#include "rpc/drain_gate.h"
#include "rpc/keepalive.h"
#include "rpc/trace_context.h"

namespace shardmap {
namespace {

// An idle cluster must never be told too_many_pings: the server accepts
// pings at least as often as a client sends them, and never counts
// strikes.
TEST(KeepaliveTest, ServersAcceptWhatIdleClientsSend) {
  const KeepalivePolicy& k = Keepalive();
  EXPECT_LE(k.server_min_ping_ms, k.client_ping_ms);
  EXPECT_EQ(k.server_max_ping_strikes, 0);
  EXPECT_GT(k.client_ping_timeout_ms, 0);
  EXPECT_LE(k.client_ping_timeout_ms, k.client_ping_ms);
}

TEST(TraceparentTest, ParsesAndFormatsVersion00) {
  const std::string text =
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  auto t = Traceparent::Parse(text);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(t->span_id, "00f067aa0ba902b7");
  EXPECT_EQ(t->ToString(), text);
  Traceparent child = t->Child();
  EXPECT_EQ(child.trace_id, t->trace_id);
  EXPECT_NE(child.span_id, t->span_id);
  EXPECT_TRUE(Traceparent::Parse(child.ToString()).has_value());
  Traceparent fresh = Traceparent::New();
  EXPECT_TRUE(Traceparent::Parse(fresh.ToString()).has_value());
  EXPECT_NE(fresh.trace_id, Traceparent::New().trace_id);
}

TEST(TraceparentTest, RefusesMalformed) {
  for (const char* bad : {
           "",
           "00-xyz-01",
           "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
           "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
       }) {
    EXPECT_FALSE(Traceparent::Parse(bad).has_value()) << bad;
  }
}

TEST(JsonLogTest, LineCarriesTheThreadsContext) {
  auto line = nlohmann::json::parse(
      JsonLogLine(1'700'000'000'123'456, "info", "worker", 3, "a \"b\"\n"));
  EXPECT_EQ(line["ts"], "2023-11-14T22:13:20.123456Z");
  EXPECT_EQ(line["level"], "info");
  EXPECT_EQ(line["component"], "worker");
  EXPECT_EQ(line["rank"], 3);
  EXPECT_TRUE(line["job_id"].is_null());
  EXPECT_TRUE(line["trace_id"].is_null());
  EXPECT_EQ(line["msg"], "a \"b\"\n");
  {
    ScopedLogContext ctx(
        {"job-7", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"});
    line = nlohmann::json::parse(
        JsonLogLine(0, "debug", "coordinator", std::nullopt, "x"));
    EXPECT_EQ(line["job_id"], "job-7");
    EXPECT_EQ(line["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    EXPECT_EQ(line["span_id"], "00f067aa0ba902b7");
    EXPECT_TRUE(line["rank"].is_null());
  }
  EXPECT_TRUE(CurrentLogContext().job_id.empty());
  // Other threads keep their own context.
  ScopedLogContext mine({"job-1", "", ""});
  std::thread([] { EXPECT_TRUE(CurrentLogContext().job_id.empty()); }).join();
  EXPECT_EQ(CurrentLogContext().job_id, "job-1");
}

TEST(DrainGateTest, RefusesNewCallsAndWaitsForTheOthers) {
  DrainGate gate("the test server");
  auto first = gate.Enter(nullptr);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(gate.in_flight(), 1);
  gate.StartDrain();
  auto refused = gate.Enter(nullptr);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("the test server is shutting"),
            std::string::npos);
  EXPECT_FALSE(gate.WaitIdle(absl::Now() + absl::Milliseconds(20)));
  std::thread leaver([&] {
    absl::SleepFor(absl::Milliseconds(50));
    first->reset();
  });
  EXPECT_TRUE(gate.WaitIdle(absl::Now() + absl::Seconds(10)));
  leaver.join();
  EXPECT_EQ(gate.in_flight(), 0);
  EXPECT_FALSE(gate.cancelled());
}

TEST(DrainGateTest, CancelsWhatOutlastsTheGrace) {
  DrainGate gate("s");
  auto call = gate.Enter(nullptr);
  ASSERT_TRUE(call.ok());
  std::thread worker([&] {
    // A call that polls cancelled(), as the coordinator's jobs do.
    while (!gate.cancelled()) absl::SleepFor(absl::Milliseconds(1));
    call->reset();
  });
  const absl::Time start = absl::Now();
  EXPECT_EQ(gate.Drain(absl::Milliseconds(30), absl::Seconds(5)), 1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  EXPECT_EQ(gate.in_flight(), 0);
  worker.join();
}

}  // namespace
}  // namespace shardmap
