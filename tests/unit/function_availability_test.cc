// Tests of server/function_availability: which workers offer a function,
// and the refusal of a job whose mesh has workers without it or with
// another signature of it; and WorkerPool keeping each worker's own set.
#include "server/function_availability.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "server/worker_pool.h"
#include "tests/unit/status_matchers.h"
#include "wire/signature.h"

namespace shardmap {
namespace {

v1::FunctionSignature Sig(const std::string& name, int arity,
                          const std::string& origin) {
  v1::FunctionSignature s = Signature(name, arity).proto();
  s.set_origin(origin);
  return s;
}

WorkerPool::Worker W(const std::string& id,
                     std::vector<v1::FunctionSignature> fns) {
  WorkerPool::Worker w;
  w.id = id;
  w.address = "127.0.0.1:" + id.substr(1);
  auto map = std::make_shared<std::map<std::string, v1::FunctionSignature>>();
  for (auto& f : fns) (*map)[f.name()] = f;
  w.functions = map;
  return w;
}

TEST(FunctionAvailabilityTest, SameFunctionFromDifferentPathsIsOk) {
  EXPECT_TRUE(CheckFunctionOnWorkers(
                  "ln", {W("w0", {Sig("ln", 3, "plugin /a/libln.so")}),
                         W("w1", {Sig("ln", 3, "plugin /b/libln.so")})})
                  .ok());
}

TEST(FunctionAvailabilityTest, MissingOnSomeWorkersNamesThem) {
  EXPECT_TRUE(StatusIs(
      CheckFunctionOnWorkers("ln", {W("w0", {Sig("ln", 3, "plugin /a.so")}),
                                    W("w1", {}), W("w2", {})}),
      absl::StatusCode::kFailedPrecondition,
      {"'ln'", "missing on workers w1 (127.0.0.1:1), w2 (127.0.0.1:2)"}));
}

TEST(FunctionAvailabilityTest, DifferentSignaturesNameEachWorker) {
  EXPECT_TRUE(StatusIs(
      CheckFunctionOnWorkers("ln", {W("w0", {Sig("ln", 3, "plugin /a.so")}),
                                    W("w1", {Sig("ln", 2, "plugin /b.so")})}),
      absl::StatusCode::kFailedPrecondition,
      {"different signatures", "w0 (127.0.0.1:0) has ln(x, y, z)",
       "[plugin /a.so]", "w1 (127.0.0.1:1) has ln(x, y)"}));
}

TEST(FunctionAvailabilityTest, ListingGroupsWorkersBySignature) {
  std::vector<v1::FunctionSignature> all = FunctionsOfWorkers(
      {W("w0", {Sig("ln", 3, "plugin /a.so"), Sig("add", 2, "builtin")}),
       W("w1", {Sig("ln", 3, "plugin /a.so"), Sig("add", 2, "builtin")}),
       W("w2", {Sig("ln", 2, "plugin /old.so"), Sig("add", 2, "builtin")})});
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].name(), "add");
  EXPECT_EQ(all[0].workers_size(), 3);
  EXPECT_EQ(all[1].name(), "ln");
  EXPECT_EQ(all[1].origin(), "plugin /a.so");
  EXPECT_EQ(std::vector<std::string>(all[1].workers().begin(),
                                     all[1].workers().end()),
            (std::vector<std::string>{"127.0.0.1:0", "127.0.0.1:1"}));
  EXPECT_EQ(all[2].origin(), "plugin /old.so");
  EXPECT_EQ(all[2].workers_size(), 1);
}

TEST(FunctionAvailabilityTest, PoolKeepsEachWorkersOwnFunctions) {
  WorkerPool pool(WorkerPool::Options{});
  ASSERT_TRUE(pool.Register("127.0.0.1:1", 1, {Sig("add", 2, "builtin")}).ok());
  ASSERT_TRUE(
      pool.Register("127.0.0.1:2", 2,
                    {Sig("add", 2, "builtin"), Sig("ln", 3, "plugin /a.so")})
          .ok());
  auto workers = pool.Acquire(2);
  ASSERT_TRUE(workers.ok()) << workers.status();
  EXPECT_TRUE(CheckFunctionOnWorkers("add", *workers).ok());
  EXPECT_TRUE(StatusIs(CheckFunctionOnWorkers("ln", *workers),
                       absl::StatusCode::kFailedPrecondition,
                       {"missing on worker w0 (127.0.0.1:1)"}));
  std::vector<v1::FunctionSignature> listed = pool.Functions();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[1].name(), "ln");
  EXPECT_EQ(listed[1].workers_size(), 1);
}

}  // namespace
}  // namespace shardmap
