// Tests of ResidentIndex::Report (server/resident_rebuild.cc): after a
// coordinator restart the index is rebuilt from the blocks workers report
// one registration at a time; complete arrays come back as they were,
// incomplete ones are lost naming the missing devices, and blocks nobody
// can use are handed back to be dropped. Versions never repeat one a
// worker holds.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/resident_index.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

using Drops = std::set<std::pair<std::string, uint64_t>>;

Drops DropsOf(const ResidentIndex::Outcome& outcome) {
  Drops out;
  for (const ReportedBlock& b : outcome.drop) out.emplace(b.name, b.version);
  return out;
}

class ResidentRebuildTest : public ::testing::Test {
 protected:
  // Device `device`'s block of an int32 [8, 4] array sharded P('x') over
  // x=`devices`, as a worker reports it.
  static ReportedBlock Block(const std::string& name, uint64_t version,
                             int64_t device, int devices = 2) {
    ReportedBlock b;
    b.name = name;
    b.version = version;
    b.device = device;
    b.meta = ArrayMeta{DType::kInt32, {8, 4}};
    b.mesh = *Mesh::Create({{"x", devices}});
    b.spec = PartitionSpec({{"x"}});
    return b;
  }

  ResidentIndex::Outcome Report(const std::string& id,
                                std::vector<ReportedBlock> blocks) {
    {
      absl::MutexLock lock(&mu_);
      live_.insert(id);
    }
    return index_.Report(id, absl::StrCat(id, ":1"), blocks);
  }
  void Kill(const std::string& id) {
    absl::MutexLock lock(&mu_);
    live_.erase(id);
  }

  absl::Mutex mu_;
  std::set<std::string> live_ ABSL_GUARDED_BY(mu_);
  uint64_t now_ = 1000;  // the fake wall clock, in microseconds
  ResidentIndex index_{[this](const std::string& id) {
                         absl::MutexLock lock(&mu_);
                         return live_.count(id) > 0;
                       },
                       [this] { return now_; }};
};

TEST_F(ResidentRebuildTest, ArrayComesBackOnceEveryDeviceIsReported) {
  ResidentIndex::Outcome w0 = Report("w0", {Block("p", 500, 0)});
  EXPECT_EQ(w0.taken, 1);
  EXPECT_TRUE(w0.drop.empty());
  // Listed, lost, naming the device nobody reported yet.
  std::vector<v1::ResidentInfo> listed = index_.List("");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(listed[0].lost());
  EXPECT_EQ(listed[0].version(), 500u);
  EXPECT_TRUE(StatusIs(index_.Find("p").status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"'p'", "lost", "device 1 (of 2, version 500)"}));

  EXPECT_EQ(Report("w1", {Block("p", 500, 1)}).taken, 1);
  absl::StatusOr<ResidentArray> p = index_.Find("p");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->version, 500u);
  EXPECT_EQ(p->meta.dtype, DType::kInt32);
  EXPECT_EQ(p->meta.shape, (Shape{8, 4}));
  EXPECT_EQ(p->mesh, *Mesh::Create({{"x", 2}}));
  EXPECT_EQ(p->spec, PartitionSpec({{"x"}}));
  EXPECT_EQ(p->worker_ids, (std::vector<std::string>{"w0", "w1"}));
  EXPECT_EQ(p->addresses, (std::vector<std::string>{"w0:1", "w1:1"}));
  EXPECT_FALSE(index_.List("")[0].lost());
}

TEST_F(ResidentRebuildTest, LostNamesEveryMissingDevice) {
  Report("w0", {Block("p", 500, 2, 4)});
  EXPECT_TRUE(StatusIs(index_.Find("p").status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"devices 0, 1, 3 (of 4"}));
  // A holder that reported and left makes it lost by that worker.
  Report("w1", {Block("p", 500, 0, 4), Block("p", 500, 1, 4)});
  Report("w3", {Block("p", 500, 3, 4)});
  EXPECT_TRUE(index_.Find("p").ok());
  Kill("w3");
  EXPECT_TRUE(StatusIs(index_.Find("p").status(),
                       absl::StatusCode::kFailedPrecondition, {"worker w3"}));
  // It comes back at another id, and is the holder again.
  EXPECT_EQ(Report("w7", {Block("p", 500, 3, 4)}).taken, 1);
  EXPECT_TRUE(index_.Find("p").ok());
}

TEST_F(ResidentRebuildTest, OlderVersionsAreDroppedOnceANewerOneIsComplete) {
  // Both workers kept the previous version too.
  ResidentIndex::Outcome w0 =
      Report("w0", {Block("p", 400, 0), Block("p", 500, 0)});
  EXPECT_TRUE(w0.drop.empty());  // 500 is not complete yet
  ResidentIndex::Outcome w1 =
      Report("w1", {Block("p", 400, 1), Block("p", 500, 1)});
  EXPECT_EQ(DropsOf(w1), (Drops{{"p", 400}}));
  ASSERT_TRUE(index_.Find("p").ok());
  EXPECT_EQ(index_.Find("p")->version, 500u);
  // w0's old block, reported again at its next registration, is dropped.
  EXPECT_EQ(DropsOf(Report("w0", {Block("p", 400, 0), Block("p", 500, 0)})),
            (Drops{{"p", 400}}));
}

// A write whose commit failed on w1 after w0 applied it (and the
// coordinator restarted before w0 dropped it again): w0 reports the
// unpublished version 500 besides 400, w1 only 400. Whichever registers
// first, 400 comes back whole and none of its blocks is dropped.
TEST_F(ResidentRebuildTest, AnIncompleteNewerVersionDoesNotDropTheOlderOne) {
  ResidentIndex::Outcome w0 =
      Report("w0", {Block("p", 400, 0), Block("p", 500, 0)});
  EXPECT_TRUE(w0.drop.empty());
  // Until w1 reports, neither version is complete: lost, naming what the
  // newest misses.
  EXPECT_TRUE(StatusIs(index_.Find("p").status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"device 1 (of 2, version 500)"}));
  ResidentIndex::Outcome w1 = Report("w1", {Block("p", 400, 1)});
  EXPECT_EQ(w1.taken, 1);
  EXPECT_TRUE(w1.drop.empty());
  absl::StatusOr<ResidentArray> p = index_.Find("p");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->version, 400u);
  EXPECT_EQ(p->worker_ids, (std::vector<std::string>{"w0", "w1"}));
  ASSERT_EQ(index_.List("").size(), 1u);
  EXPECT_FALSE(index_.List("")[0].lost());
  EXPECT_EQ(index_.List("")[0].version(), 400u);
  // The next write is above both.
  EXPECT_GT(index_.NextVersion(), 500u);
}

TEST_F(ResidentRebuildTest, AnIncompleteNewerVersionReportedLastLosesToo) {
  EXPECT_TRUE(Report("w1", {Block("p", 400, 1)}).drop.empty());
  ResidentIndex::Outcome w0 =
      Report("w0", {Block("p", 400, 0), Block("p", 500, 0)});
  EXPECT_EQ(w0.taken, 2);
  EXPECT_TRUE(w0.drop.empty());
  absl::StatusOr<ResidentArray> p = index_.Find("p");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->version, 400u);
  EXPECT_EQ(p->worker_ids, (std::vector<std::string>{"w0", "w1"}));
}

TEST_F(ResidentRebuildTest, ANewerVersionWinsOnceItIsComplete) {
  // 500 was written on w0 and w2; w1 still has 400 from before.
  Report("w0", {Block("p", 400, 0), Block("p", 500, 0)});
  Report("w1", {Block("p", 400, 1)});
  ASSERT_EQ(index_.Find("p")->version, 400u);
  ResidentIndex::Outcome w2 = Report("w2", {Block("p", 500, 1)});
  EXPECT_EQ(w2.taken, 1);
  absl::StatusOr<ResidentArray> p = index_.Find("p");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->version, 500u);
  EXPECT_EQ(p->worker_ids, (std::vector<std::string>{"w0", "w2"}));
  // 400 is superseded for good: reported again, it is dropped.
  EXPECT_EQ(DropsOf(Report("w1", {Block("p", 400, 1)})), (Drops{{"p", 400}}));
  EXPECT_EQ(index_.Find("p")->version, 500u);
}

TEST_F(ResidentRebuildTest, NewerReportedVersionReplacesAnOlderOne) {
  // w0 reports first, with an older version only (it missed the last
  // write); w1's newer one wins even though it arrives later.
  Report("w0", {Block("p", 400, 0)});
  ResidentIndex::Outcome w1 =
      Report("w1", {Block("p", 400, 1), Block("p", 500, 0, 1)});
  EXPECT_EQ(w1.taken, 1);
  EXPECT_EQ(DropsOf(w1), (Drops{{"p", 400}}));
  absl::StatusOr<ResidentArray> p = index_.Find("p");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->version, 500u);
  EXPECT_EQ(p->worker_ids, (std::vector<std::string>{"w1"}));
  // w0's old block, reported again at its next registration, is dropped.
  EXPECT_EQ(DropsOf(Report("w0", {Block("p", 400, 0)})), (Drops{{"p", 400}}));
}

TEST_F(ResidentRebuildTest, VersionsContinuePastEveryReportedOne) {
  // The clock is behind the versions a previous lifetime issued.
  now_ = 10;
  Report("w0", {Block("p", 500, 0), Block("q", 900, 0, 1)});
  const uint64_t v = index_.NextVersion();
  EXPECT_GT(v, 900u);
  EXPECT_GT(index_.NextVersion(), v);
  // And never below the clock.
  now_ = 5000;
  EXPECT_GE(index_.NextVersion(), 5000u);
}

TEST_F(ResidentRebuildTest, ARestartedIndexIssuesHigherVersions) {
  const uint64_t before = index_.NextVersion();
  now_ += 1;  // the restart takes at least a microsecond
  ResidentIndex restarted([](const std::string&) { return true; },
                          [this] { return now_; });
  EXPECT_GT(restarted.NextVersion(), before);
}

TEST_F(ResidentRebuildTest, APutDuringTheRebuildWins) {
  Report("w0", {Block("p", 500, 0)});
  // A client writes p while w1 has not reported yet.
  ResidentArray fresh;
  fresh.name = "p";
  fresh.meta = ArrayMeta{DType::kInt32, {8, 4}};
  fresh.mesh = *Mesh::Create({{"x", 2}});
  fresh.spec = PartitionSpec({{"x"}});
  fresh.worker_ids = {"w0", "w2"};
  fresh.addresses = {"w0:1", "w2:1"};
  fresh.version = index_.NextVersion();
  ASSERT_GT(fresh.version, 500u);
  Report("w2", {});
  index_.Commit(fresh);
  // w1's block of the old version comes in: dropped, never stale.
  ResidentIndex::Outcome w1 = Report("w1", {Block("p", 500, 1)});
  EXPECT_EQ(w1.taken, 0);
  EXPECT_EQ(DropsOf(w1), (Drops{{"p", 500}}));
  absl::StatusOr<ResidentArray> p = index_.Find("p");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->version, fresh.version);
  EXPECT_EQ(p->worker_ids, (std::vector<std::string>{"w0", "w2"}));
}

TEST_F(ResidentRebuildTest, ADeletedArrayDoesNotComeBack) {
  Report("w0", {Block("p", 500, 0)});
  ASSERT_TRUE(index_.Remove("p").ok());
  ResidentIndex::Outcome w1 = Report("w1", {Block("p", 500, 1)});
  EXPECT_EQ(w1.taken, 0);
  EXPECT_EQ(DropsOf(w1), (Drops{{"p", 500}}));
  EXPECT_TRUE(StatusIs(index_.Find("p").status(), absl::StatusCode::kNotFound,
                       {"'p'"}));
  EXPECT_TRUE(index_.List("").empty());
}

TEST_F(ResidentRebuildTest, VersionsBeingCommittedAreLeftAlone) {
  // A job of this coordinator has the workers commit version v of a new
  // name; one of them registers again before the index commits it.
  const uint64_t v = index_.NextVersion();
  ResidentIndex::Outcome w0 = Report("w0", {Block("n", v, 0)});
  EXPECT_EQ(w0.taken, 0);
  EXPECT_TRUE(w0.drop.empty());
  EXPECT_TRUE(index_.List("").empty());
}

TEST_F(ResidentRebuildTest, BlocksThatDoNotFitAreIgnored) {
  Report("w0", {Block("p", 500, 0)});
  ReportedBlock other = Block("p", 500, 1);
  other.meta->shape = {8, 5};
  ReportedBlock bad_name = Block("a//b", 500, 0);
  ReportedBlock bad_device = Block("p", 500, 7);
  ReportedBlock no_layout;  // an older worker's: nothing to rebuild from
  no_layout.name = "r";
  no_layout.version = 500;
  ResidentIndex::Outcome w1 =
      Report("w1", {other, bad_name, bad_device, no_layout});
  EXPECT_EQ(w1.taken, 0);
  EXPECT_TRUE(w1.drop.empty());
  std::vector<v1::ResidentInfo> listed = index_.List("");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].name(), "p");
  EXPECT_TRUE(listed[0].lost());
}

}  // namespace
}  // namespace shardmap
