// Tests of server/resident_index: name validation, write checks, versions,
// commit/find/remove, listings with the lost flag, and rebinding the
// blocks of a restarted worker. The rebuild after a coordinator restart
// is in resident_rebuild_test.cc.
#include "server/resident_index.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

// Blocks without their arrays' layouts (name, version, device), as an
// older worker reports them.
std::vector<ReportedBlock> Bare(
    const std::vector<std::tuple<std::string, uint64_t, int64_t>>& held) {
  std::vector<ReportedBlock> out;
  for (const auto& [name, version, device] : held) {
    ReportedBlock b;
    b.name = name;
    b.version = version;
    b.device = device;
    out.push_back(std::move(b));
  }
  return out;
}

class ResidentIndexTest : public ::testing::Test {
 protected:
  // An array of `devices` blocks held by w0, w1, ... at 10.0.0.<d>:5000.
  static Mesh Line() { return *Mesh::Create({{"x", 2}}); }
  static PartitionSpec ByX() { return PartitionSpec({{"x"}}); }

  ResidentArray MakeArray(const std::string& name, uint64_t version,
                          int devices = 2, Shape shape = {8, 4},
                          DType dtype = DType::kFloat32) {
    ResidentArray a;
    a.name = name;
    a.meta.dtype = dtype;
    a.meta.shape = std::move(shape);
    a.mesh = *Mesh::Create({{"x", devices}});
    a.spec = PartitionSpec({{"x"}});
    for (int d = 0; d < devices; ++d) {
      a.worker_ids.push_back(absl::StrCat("w", d));
      a.addresses.push_back(absl::StrCat("10.0.0.", d, ":5000"));
    }
    a.version = version;
    return a;
  }

  void Kill(const std::string& id) {
    absl::MutexLock lock(&mu_);
    live_.erase(id);
  }
  void Revive(const std::string& id) {
    absl::MutexLock lock(&mu_);
    live_.insert(id);
  }

  absl::Mutex mu_;
  std::set<std::string> live_ ABSL_GUARDED_BY(mu_) = {"w0", "w1", "w2", "w3"};
  ResidentIndex index_{[this](const std::string& id) {
    absl::MutexLock lock(&mu_);
    return live_.count(id) > 0;
  }};
};

TEST(ResidentIndexNameTest, AcceptsPaths) {
  for (const char* name : {"a", "params", "model/layer_0/w", "x.y-z_1", "A/B/C",
                           "v1.0", "...a", "a..b", "-", "_/.hidden"}) {
    EXPECT_TRUE(ResidentIndex::ValidateName(name).ok())
        << name << ": " << ResidentIndex::ValidateName(name);
  }
}

TEST(ResidentIndexNameTest, RejectsEmptySegments) {
  EXPECT_TRUE(StatusIs(ResidentIndex::ValidateName(""),
                       absl::StatusCode::kInvalidArgument, {"needs a name"}));
  for (const char* name : {"/a", "a/", "a//b", "/", "//"}) {
    EXPECT_TRUE(StatusIs(ResidentIndex::ValidateName(name),
                         absl::StatusCode::kInvalidArgument,
                         {"non-empty segments", name}))
        << name;
  }
}

TEST(ResidentIndexNameTest, RejectsDotSegments) {
  for (const char* name : {"..", ".", "a/..", "../a", "a/./b", "a/../b"}) {
    EXPECT_TRUE(StatusIs(ResidentIndex::ValidateName(name),
                         absl::StatusCode::kInvalidArgument,
                         {"non-empty segments"}))
        << name;
  }
}

TEST(ResidentIndexNameTest, RejectsBadCharacters) {
  for (const std::string& c : std::vector<std::string>{
           " ", "\\", ":", "*", "?", "$", "\n", "é", std::string(1, '\0')}) {
    const std::string name = "a/b" + c + "c";
    EXPECT_TRUE(StatusIs(ResidentIndex::ValidateName(name),
                         absl::StatusCode::kInvalidArgument,
                         {"has the character", "use letters"}))
        << name;
  }
  EXPECT_TRUE(StatusIs(ResidentIndex::ValidateName("my array"),
                       absl::StatusCode::kInvalidArgument,
                       {"'my array'", "' '"}));
}

TEST_F(ResidentIndexTest, CheckWriteNewNameIsOk) {
  EXPECT_TRUE(index_
                  .CheckWrite("fresh", ArrayMeta{DType::kInt32, {3}}, Line(),
                              ByX(), false)
                  .ok());
}

TEST_F(ResidentIndexTest, CheckWriteRejectsMalformedName) {
  EXPECT_TRUE(
      StatusIs(index_.CheckWrite("a//b", ArrayMeta{DType::kFloat32, {1}},
                                 Line(), ByX(), true),
               absl::StatusCode::kInvalidArgument, {"a//b"}));
}

TEST_F(ResidentIndexTest, CheckWriteSameShapeIsOk) {
  index_.Commit(MakeArray("p", 1));
  EXPECT_TRUE(index_
                  .CheckWrite("p", ArrayMeta{DType::kFloat32, {8, 4}}, Line(),
                              ByX(), false)
                  .ok());
}

TEST_F(ResidentIndexTest, CheckWriteOtherShapeNeedsOverwrite) {
  index_.Commit(MakeArray("p", 1));
  EXPECT_TRUE(
      StatusIs(index_.CheckWrite("p", ArrayMeta{DType::kFloat32, {4, 8}},
                                 Line(), ByX(), false),
               absl::StatusCode::kFailedPrecondition,
               {"'p'", "float32[8,4]", "float32[4,8]", "--overwrite"}));
  EXPECT_TRUE(index_
                  .CheckWrite("p", ArrayMeta{DType::kFloat32, {4, 8}}, Line(),
                              ByX(), true)
                  .ok());
}

TEST_F(ResidentIndexTest, CheckWriteOtherDTypeNeedsOverwrite) {
  index_.Commit(MakeArray("p", 1));
  EXPECT_TRUE(StatusIs(index_.CheckWrite("p", ArrayMeta{DType::kInt64, {8, 4}},
                                         Line(), ByX(), false),
                       absl::StatusCode::kFailedPrecondition,
                       {"float32[8,4]", "int64[8,4]"}));
  EXPECT_TRUE(index_
                  .CheckWrite("p", ArrayMeta{DType::kInt64, {8, 4}}, Line(),
                              ByX(), true)
                  .ok());
  // A scalar against a vector.
  EXPECT_TRUE(StatusIs(index_.CheckWrite("p", ArrayMeta{DType::kFloat32, {}},
                                         Line(), ByX(), false),
                       absl::StatusCode::kFailedPrecondition,
                       {"float32[8,4]", "float32[]"}));
}

TEST_F(ResidentIndexTest, CheckWriteOtherShardingNeedsOverwrite) {
  index_.Commit(MakeArray("p", 1));  // float32[8,4], P('x') over x=2
  const ArrayMeta meta{DType::kFloat32, {8, 4}};
  // The same layout written out in full is the same sharding.
  EXPECT_TRUE(
      index_.CheckWrite("p", meta, Line(), PartitionSpec({{"x"}, {}}), false)
          .ok());
  EXPECT_TRUE(StatusIs(
      index_.CheckWrite("p", meta, Line(), PartitionSpec({{}, {"x"}}), false),
      absl::StatusCode::kFailedPrecondition,
      {"'p'", "P('x',)", "P(None, 'x')", "--overwrite"}));
  EXPECT_TRUE(StatusIs(index_.CheckWrite("p", meta, *Mesh::Create({{"y", 2}}),
                                         PartitionSpec({{"y"}}), false),
                       absl::StatusCode::kFailedPrecondition, {"x=2", "y=2"}));
  EXPECT_TRUE(
      StatusIs(index_.CheckWrite("p", meta, Line(), PartitionSpec(), false),
               absl::StatusCode::kFailedPrecondition, {"P()"}));
  EXPECT_TRUE(
      index_.CheckWrite("p", meta, Line(), PartitionSpec({{}, {"x"}}), true)
          .ok());
}

TEST_F(ResidentIndexTest, NextVersionIncreases) {
  uint64_t last = index_.NextVersion();
  EXPECT_GT(last, 0u);
  for (int i = 0; i < 100; ++i) {
    const uint64_t v = index_.NextVersion();
    EXPECT_GT(v, last);
    last = v;
  }
}

TEST_F(ResidentIndexTest, NextVersionIsUniqueAcrossThreads) {
  std::vector<std::vector<uint64_t>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) got[t].push_back(index_.NextVersion());
    });
  }
  for (std::thread& th : threads) th.join();
  std::set<uint64_t> all;
  for (const auto& g : got) all.insert(g.begin(), g.end());
  EXPECT_EQ(all.size(), 2000u);
}

TEST_F(ResidentIndexTest, CommitFindRemove) {
  EXPECT_TRUE(StatusIs(index_.Find("p").status(), absl::StatusCode::kNotFound,
                       {"'p'"}));
  index_.Commit(MakeArray("p", 3));
  absl::StatusOr<ResidentArray> a = index_.Find("p");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->name, "p");
  EXPECT_EQ(a->version, 3u);
  EXPECT_EQ(a->meta.shape, (Shape{8, 4}));
  EXPECT_EQ(a->worker_ids, (std::vector<std::string>{"w0", "w1"}));
  EXPECT_EQ(a->addresses[1], "10.0.0.1:5000");
  EXPECT_EQ(a->mesh.num_devices(), 2);
  EXPECT_EQ(a->spec, PartitionSpec({{"x"}}));

  // A commit replaces the entry.
  index_.Commit(MakeArray("p", 4, 3, {6}, DType::kInt32));
  a = index_.Find("p");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->version, 4u);
  EXPECT_EQ(a->meta.dtype, DType::kInt32);
  EXPECT_EQ(a->worker_ids.size(), 3u);
  EXPECT_EQ(index_.All().size(), 1u);

  absl::StatusOr<ResidentArray> removed = index_.Remove("p");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->version, 4u);
  EXPECT_TRUE(StatusIs(index_.Find("p").status(), absl::StatusCode::kNotFound,
                       {"'p'"}));
  EXPECT_TRUE(StatusIs(index_.Remove("p").status(), absl::StatusCode::kNotFound,
                       {"'p'"}));
  EXPECT_TRUE(index_.All().empty());
}

using Superseded = ResidentIndex::Superseded;

TEST_F(ResidentIndexTest, CommitOnTheSameHoldersLeavesThemTheirPrevious) {
  EXPECT_TRUE(index_.Commit(MakeArray("p", 1)).empty());
  // Each keeps version 1 beside its block of version 2 for the same
  // device: nothing to drop.
  EXPECT_TRUE(index_.Commit(MakeArray("p", 2)).empty());
}

TEST_F(ResidentIndexTest, CommitElsewhereNamesTheFormerHolders) {
  index_.Commit(MakeArray("p", 1));  // devices 0, 1 on 10.0.0.0, 10.0.0.1
  ResidentArray moved = MakeArray("p", 2);
  moved.addresses = {"10.0.0.2:5000", "10.0.0.3:5000"};
  // Neither holds a block of version 2: every version of it goes.
  EXPECT_EQ(
      index_.Commit(moved),
      (std::vector<Superseded>{{"10.0.0.0:5000", 0}, {"10.0.0.1:5000", 0}}));
}

TEST_F(ResidentIndexTest, CommitShiftedByOneDropsExactlyTheOldVersion) {
  index_.Commit(MakeArray("p", 1));
  ResidentArray shifted = MakeArray("p", 2);
  shifted.addresses = {"10.0.0.1:5000", "10.0.0.2:5000"};
  // 10.0.0.1 held device 1 of version 1 and now holds device 0 of version
  // 2: it drops version 1 only.
  EXPECT_EQ(
      index_.Commit(shifted),
      (std::vector<Superseded>{{"10.0.0.0:5000", 0}, {"10.0.0.1:5000", 1}}));
  // Another sharding on the same workers: device 0's block is another
  // block, so the old one goes.
  ResidentArray resharded = MakeArray("p", 3, 2, {8, 4});
  resharded.addresses = shifted.addresses;
  resharded.spec = PartitionSpec();
  EXPECT_EQ(
      index_.Commit(resharded),
      (std::vector<Superseded>{{"10.0.0.1:5000", 2}, {"10.0.0.2:5000", 2}}));
}

TEST_F(ResidentIndexTest, CommitOverARebuiltArrayNamesEveryReportedHolder) {
  // After a restart: version 5 is complete on w0, w1; w2 also holds a
  // block of a newer version 6 that was never complete.
  auto block = [](uint64_t version, int64_t device) {
    ReportedBlock b;
    b.name = "p";
    b.version = version;
    b.device = device;
    b.meta = ArrayMeta{DType::kFloat32, {8, 4}};
    b.mesh = *Mesh::Create({{"x", 2}});
    b.spec = PartitionSpec({{"x"}});
    return b;
  };
  index_.Report("w0", "10.0.0.0:5000", {block(5, 0)});
  index_.Report("w1", "10.0.0.1:5000", {block(5, 1)});
  index_.Report("w2", "10.0.0.2:5000", {block(6, 0)});
  ASSERT_EQ(index_.Find("p")->version, 5u);
  ResidentArray next = MakeArray("p", 7);
  next.addresses = {"10.0.0.0:5000", "10.0.0.3:5000"};
  EXPECT_EQ(
      index_.Commit(next),
      (std::vector<Superseded>{{"10.0.0.1:5000", 0}, {"10.0.0.2:5000", 0}}));
}

TEST_F(ResidentIndexTest, FindOfLostArrayNamesTheWorker) {
  index_.Commit(MakeArray("p", 1, 3));
  Kill("w1");
  EXPECT_TRUE(StatusIs(index_.Find("p").status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"'p'", "lost", "worker w1"}));
  // It is still listed and can be removed.
  EXPECT_EQ(index_.All().size(), 1u);
  Revive("w1");
  EXPECT_TRUE(index_.Find("p").ok());
  Kill("w2");
  EXPECT_TRUE(index_.Remove("p").ok());
}

TEST_F(ResidentIndexTest, MarkLostHoldsUntilANewVersionIsCommitted) {
  index_.Commit(MakeArray("p", 5));
  index_.MarkLost("p", 4, "an older version");  // not the current one
  EXPECT_TRUE(index_.Find("p").ok());
  index_.MarkLost("p", 5, "it was donated to job-3 at version 5");
  EXPECT_TRUE(StatusIs(index_.Find("p").status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"'p'", "lost", "donated to job-3 at version 5"}));
  ASSERT_EQ(index_.List("p").size(), 1u);
  EXPECT_TRUE(index_.List("p")[0].lost());
  // A put (a new version) heals it.
  index_.Commit(MakeArray("p", 6));
  EXPECT_TRUE(index_.Find("p").ok());
  EXPECT_FALSE(index_.List("p")[0].lost());
}

TEST_F(ResidentIndexTest, ListFiltersByPrefixAndMarksLost) {
  index_.Commit(MakeArray("model/a", 1));
  index_.Commit(MakeArray("model/b", 2, 3, {6}, DType::kInt64));
  index_.Commit(MakeArray("other", 3));
  // model/b is held by w0, w1, w2; w2 leaves.
  Kill("w2");

  std::vector<v1::ResidentInfo> all = index_.List("");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].name(), "model/a");
  EXPECT_EQ(all[1].name(), "model/b");
  EXPECT_EQ(all[2].name(), "other");
  EXPECT_FALSE(all[0].lost());
  EXPECT_TRUE(all[1].lost());
  EXPECT_FALSE(all[2].lost());
  EXPECT_EQ(all[1].version(), 2u);
  EXPECT_EQ(all[1].bytes(), 6u * 8u);
  EXPECT_EQ(all[0].bytes(), 32u * 4u);
  ASSERT_EQ(all[1].worker_ids_size(), 3);
  EXPECT_EQ(all[1].worker_ids(2), "w2");

  std::vector<v1::ResidentInfo> model = index_.List("model/");
  ASSERT_EQ(model.size(), 2u);
  EXPECT_EQ(model[0].name(), "model/a");
  EXPECT_EQ(model[1].name(), "model/b");
  EXPECT_EQ(index_.List("model/b").size(), 1u);
  EXPECT_TRUE(index_.List("nothing").empty());

  Revive("w2");
  EXPECT_FALSE(index_.List("model/b")[0].lost());
}

TEST_F(ResidentIndexTest, ReportTakesOverBlocksOfDeadHolders) {
  index_.Commit(MakeArray("p", 5, 2));
  index_.Commit(MakeArray("q", 6, 2));
  Kill("w1");
  EXPECT_FALSE(index_.Find("p").ok());
  // w9 restarted with p's block of device 1 at version 5 and q's at an
  // older version.
  const int n =
      index_.Report("w9", "10.0.0.9:7", Bare({{"p", 5, 1}, {"q", 4, 1}})).taken;
  EXPECT_EQ(n, 1);
  Revive("w9");
  absl::StatusOr<ResidentArray> p = index_.Find("p");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->worker_ids, (std::vector<std::string>{"w0", "w9"}));
  EXPECT_EQ(p->addresses,
            (std::vector<std::string>{"10.0.0.0:5000", "10.0.0.9:7"}));
  EXPECT_EQ(p->version, 5u);
  // q kept its dead holder: the version did not match, and the older
  // block is of no use.
  EXPECT_TRUE(StatusIs(index_.Find("q").status(),
                       absl::StatusCode::kFailedPrecondition, {"w1"}));
}

TEST_F(ResidentIndexTest, ReportLeavesLiveHolders) {
  index_.Commit(MakeArray("p", 5, 2));
  EXPECT_EQ(index_.Report("w9", "x:1", Bare({{"p", 5, 0}, {"p", 5, 1}})).taken,
            0);
  absl::StatusOr<ResidentArray> p = index_.Find("p");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->worker_ids, (std::vector<std::string>{"w0", "w1"}));
  EXPECT_EQ(p->addresses[0], "10.0.0.0:5000");
}

TEST_F(ResidentIndexTest, ReportIgnoresUnknownNamesAndBadDevices) {
  index_.Commit(MakeArray("p", 5, 2));
  Kill("w0");
  Kill("w1");
  EXPECT_EQ(index_
                .Report("w9", "x:1",
                        Bare({{"nope", 5, 0}, {"p", 5, -1}, {"p", 5, 2}}))
                .taken,
            0);
  // Several blocks at once, both devices of a dead pair.
  EXPECT_EQ(index_.Report("w9", "x:1", Bare({{"p", 5, 0}, {"p", 5, 1}})).taken,
            2);
  Revive("w9");
  absl::StatusOr<ResidentArray> p = index_.Find("p");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->worker_ids, (std::vector<std::string>{"w9", "w9"}));
  EXPECT_EQ(p->addresses, (std::vector<std::string>{"x:1", "x:1"}));
}

TEST_F(ResidentIndexTest, ToInfoCarriesTheEntry) {
  const ResidentArray a = MakeArray("t", 9, 2, {2, 3}, DType::kFloat64);
  const v1::ResidentInfo info = ResidentIndex::ToInfo(a, true);
  EXPECT_EQ(info.name(), "t");
  EXPECT_EQ(info.version(), 9u);
  EXPECT_TRUE(info.lost());
  EXPECT_EQ(info.bytes(), 48u);
  EXPECT_EQ(info.worker_ids_size(), 2);
  EXPECT_EQ(info.mesh().axes_size(), 1);
  EXPECT_FALSE(ResidentIndex::ToInfo(a, false).lost());
}

}  // namespace
}  // namespace shardmap
