// A resident array written on other workers than the ones holding it (the
// devices go to workers in registration order, which a coordinator restart
// reshuffles), then the coordinator restarts again and the former holders
// register first (docs/RELIABILITY.md scenario 32). The job runs through
// the real commit (server/resident_commit) against fake workers; what each
// worker keeps is a real worker store (worker/store/resident_store), which
// applies the drops the coordinator sent; the restarted index is rebuilt
// from the stores' reports in registration order. The former holders must
// not bring the older version back: it would be served, and a write would
// build on it, until the new holders report.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/resident_index.h"
#include "tests/unit/job_runner_fixture.h"
#include "worker/store/resident_store.h"

namespace shardmap {
namespace {

class RestartAfterMoveTest : public JobRunnerFixture {
 protected:
  // Has worker `w` keep device `device`'s block of the float32 [4] array
  // `name`, P('x') over x=2, at `version` (as its commit would).
  void Hold(int w, const std::string& name, uint64_t version, int device) {
    ResidentStore::Block b;
    b.version = version;
    b.device = device;
    b.box = Box{{2 * device}, {2}};
    b.data = std::make_shared<const Tensor>(Block(device));
    b.layout = ResidentStore::ArrayLayout{ArrayMeta{DType::kFloat32, {4}},
                                          *Mesh::Create({{"x", 2}}),
                                          *PartitionSpec::Parse("P('x')")};
    ASSERT_TRUE(Store(w).Put(name, std::move(b)).ok());
  }
  ResidentStore& Store(int w) { return stores_[all_[w].address]; }
  // What the workers do with the coordinator's DropArray calls.
  void ApplyDrops() {
    for (const WorkerPool::Worker& w : all_) {
      for (const auto& [name, version] : connector_.Drops(w.address)) {
        ResidentStore& store = stores_[w.address];
        ASSERT_TRUE(
            (version == 0 ? store.Drop(name) : store.Drop(name, version)).ok());
      }
    }
  }
  // Worker `w` registers with `index`, reporting every block it keeps.
  void Register(ResidentIndex& index, int w) {
    std::vector<ReportedBlock> held;
    for (const auto& [name, block] : Store(w).AllVersions()) {
      ReportedBlock b;
      b.name = name;
      b.version = block.version;
      b.device = block.device;
      b.meta = block.layout->meta;
      b.mesh = block.layout->mesh;
      b.spec = block.layout->spec;
      held.push_back(std::move(b));
    }
    index.Report(all_[w].id, all_[w].address, held);
  }
  // Writes "A" with a job on workers `first` and `first` + 1, as their
  // commit keeps it; returns the version written.
  uint64_t WriteOn(int first) {
    workers_ = {all_[first], all_[first + 1]};
    const JobPlan plan = IdentityPlan(2, "P('x')", "A", &index_);
    AnswerAll(plan, 2);
    JobRunner runner(JobRunner::Options{}, &connector_, &index_);
    auto out = Run(runner, plan, 2);
    EXPECT_TRUE(out.ok()) << out.status();
    const uint64_t version = index_.Find("A")->version;
    Hold(first, "A", version, 0);
    Hold(first + 1, "A", version, 1);
    return version;
  }

  // The coordinator restarts: workers `first` register, then `last`.
  // Until `last` have, "A" is not served (its version before `written`
  // would be stale); then it is, at `written`. Returns it.
  ResidentArray Restart(const std::vector<int>& first,
                        const std::vector<int>& last, uint64_t written) {
    for (int w : first) Register(restarted_, w);
    auto early = restarted_.Find("A");
    EXPECT_FALSE(early.ok())
        << "stale: version " << early->version << " served after version "
        << written << " was committed";
    for (int w : last) Register(restarted_, w);
    auto a = restarted_.Find("A");
    EXPECT_TRUE(a.ok()) << a.status();
    if (!a.ok()) return ResidentArray();
    EXPECT_EQ(a->version, written);
    return *a;
  }

  const std::vector<WorkerPool::Worker> all_ = TestWorkers(4);
  std::map<std::string, ResidentStore> stores_;
  ResidentIndex restarted_{[](const std::string&) { return true; }};
};

TEST_F(RestartAfterMoveTest, FormerHoldersRegisteringFirstBringNothingBack) {
  // "A" written twice on workers 0 and 1: each keeps both versions.
  for (int i = 0; i < 2; ++i) {
    const uint64_t v = Resident("A");
    Hold(0, "A", v, 0);
    Hold(1, "A", v, 1);
  }
  // The next write places it on workers 2 and 3.
  const uint64_t written = WriteOn(2);
  ApplyDrops();

  // The coordinator restarts; workers 0 and 1 register first.
  Restart({0, 1}, {2, 3}, written);
}

TEST_F(RestartAfterMoveTest, AHolderShiftedToAnotherDeviceKeepsOnlyTheNew) {
  const uint64_t old = Resident("A");  // on workers 0 and 1
  Hold(0, "A", old, 0);
  Hold(1, "A", old, 1);
  // Now on workers 1 and 2: worker 1 holds device 0 of the new version
  // next to device 1 of the old one.
  const uint64_t written = WriteOn(1);
  ApplyDrops();

  EXPECT_EQ(Restart({0, 1}, {2}, written).addresses,
            (std::vector<std::string>{all_[1].address, all_[2].address}));
}

}  // namespace
}  // namespace shardmap
