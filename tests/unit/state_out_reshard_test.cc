// Tests of a state stored back in another sharding inside its job
// (worker/state_out_reshard.h, ResidentStore::Expose): two devices of x=2,
// each with its own store (in a --state-dir), resharding through fake
// peers that read each other's stores. A job whose resharding succeeds
// commits the state in its out spec; one whose resharding fails (a peer
// cannot be read) leaves the previous version as it was, in memory and on
// disk, and the new one nowhere. References are plain vectors.
#include "worker/state_out_reshard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "tests/unit/status_matchers.h"
#include "tests/unit/temp_dir.h"
#include "wire/proto_convert.h"
#include "worker/job_residents.h"
#include "worker/store/block_fetch.h"

namespace shardmap {
namespace {

constexpr uint64_t kOld = 10;
constexpr uint64_t kNew = 11;
const std::vector<float> kBefore = {1, 2, 3, 4};
const std::vector<float> kAfter = {10, 20, 30, 40};

Tensor Floats(const std::vector<float>& v) {
  Tensor t(DType::kFloat32, {static_cast<int64_t>(v.size())});
  std::memcpy(t.data(), v.data(), v.size() * sizeof(float));
  return t;
}

std::vector<float> Values(const Tensor& t) {
  std::vector<float> v(t.num_elements());
  std::memcpy(v.data(), t.data(), t.num_bytes());
  return v;
}

// Device d's store, read by the others at address "wD". A read of an
// address in `unreadable` fails as a lost worker would.
class FakePeers final : public JobPeers {
 public:
  FakePeers(std::string me, std::map<std::string, ResidentStore*> stores,
            std::string unreadable = "")
      : me_(std::move(me)),
        stores_(std::move(stores)),
        unreadable_(std::move(unreadable)) {}
  uint64_t incarnation() const override { return 0; }
  std::string my_address() const override { return me_; }
  std::unique_ptr<PeerTransport> Open(const v1::ShardJob&,
                                      const Link&) override {
    return nullptr;
  }
  absl::StatusOr<std::string> ReadBlock(const std::string& address,
                                        const v1::ReadBlockRequest& request,
                                        absl::Time) override {
    if (address == unreadable_) {
      return absl::UnavailableError("worker " + address + " is gone");
    }
    return ReadLocalBox(*stores_.at(address), request);
  }

 private:
  const std::string me_;
  const std::map<std::string, ResidentStore*> stores_;
  const std::string unreadable_;
};

// Both devices must arrive before either goes on.
class TwoWayBarrier {
 public:
  absl::Status Wait() {
    absl::MutexLock lock(&mu_);
    ++arrived_;
    mu_.Await(absl::Condition(
        +[](int* n) { return *n >= 2; }, &arrived_));
    return absl::OkStatus();
  }

 private:
  absl::Mutex mu_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
};

class StateOutReshardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int d = 0; d < 2; ++d) {
      stores_.push_back(std::make_unique<ResidentStore>(dirs_[d].path()));
      // The state's previous version, P('x'): two elements per device.
      ResidentStore::Block b;
      b.version = kOld;
      b.device = d;
      b.box = Box{{2 * d}, {2}};
      b.layout =
          ResidentStore::ArrayLayout{ArrayMeta{DType::kFloat32, {4}}, mesh_,
                                     *PartitionSpec::Parse("P('x')")};
      b.data = std::make_shared<Tensor>(
          Floats({kBefore[2 * d], kBefore[2 * d + 1]}));
      ASSERT_TRUE(stores_[d]->Put("st", b).ok());
    }
  }

  // Device d's header: state 'buffer' bound to "st", read P('x'), written
  // at kNew and stored back as P().
  v1::ShardJob Header(int d) const {
    v1::ShardJob h;
    h.set_job_id("job-7");
    h.set_device_id(d);
    *h.mutable_mesh() = MeshToProto(mesh_);
    h.add_device_addresses("w0");
    h.add_device_addresses("w1");
    v1::StateSlot* slot = h.add_states();
    slot->set_slot("buffer");
    v1::ResidentSource* src = slot->mutable_source();
    src->set_name("st");
    src->set_version(kOld);
    *src->mutable_header() = HeaderToProto(DType::kFloat32, {4});
    *src->mutable_mesh() = MeshToProto(mesh_);
    *src->mutable_spec() = SpecToProto(*PartitionSpec::Parse("P('x')"));
    src->add_holders("w0");
    src->add_holders("w1");
    *src->mutable_job_spec() = src->spec();
    slot->set_write(true);
    slot->set_write_version(kNew);
    *h.add_state_out_specs() = SpecToProto(PartitionSpec());
    return h;
  }

  // Runs device d's resharding and, if it succeeds, stages its writes, as
  // ShardJob does after the function left `value` in the slot.
  absl::Status Device(int d, const std::vector<float>& value,
                      const std::string& unreadable) {
    FakePeers peers(absl::StrCat("w", d),
                    {{"w0", stores_[0].get()}, {"w1", stores_[1].get()}},
                    unreadable);
    std::map<std::string, Tensor> states;
    states["buffer"] = Floats(value);
    StateReshardHooks hooks;
    hooks.barrier = [this] { return barrier_.Wait(); };
    const v1::ShardJob header = Header(d);
    absl::Status s =
        ReshardWrittenStates(header, mesh_, d, peers, *stores_[d], hooks,
                             absl::InfiniteFuture(), &states);
    if (!s.ok()) return s;
    std::vector<Tensor> outputs;
    return StageWrites(header, mesh_, d, outputs, &states, *stores_[d]);
  }

  // Both devices at once; their statuses.
  std::vector<absl::Status> RunJob(const std::string& unreadable_by_1) {
    std::vector<absl::Status> ended(2);
    std::thread t0([&] { ended[0] = Device(0, {10, 20}, ""); });
    std::thread t1([&] { ended[1] = Device(1, {30, 40}, unreadable_by_1); });
    t0.join();
    t1.join();
    return ended;
  }

  const Mesh mesh_ = *Mesh::Parse("x=2");
  TempDir dirs_[2] = {TempDir("reshard0"), TempDir("reshard1")};
  std::vector<std::unique_ptr<ResidentStore>> stores_;
  TwoWayBarrier barrier_;
};

TEST_F(StateOutReshardTest, ASuccessfulJobCommitsTheStateInItsOutSpec) {
  const std::vector<absl::Status> ended = RunJob("");
  for (int d = 0; d < 2; ++d) {
    ASSERT_TRUE(ended[d].ok()) << ended[d];
    // Before the commit only the exposed block of the job's sharding is
    // readable; nothing is stored.
    absl::StatusOr<ResidentStore::Block> b = stores_[d]->Find("st", kNew);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->box.shape, Shape{2});
    ASSERT_EQ(stores_[d]->AllVersions().size(), 1u);
    EXPECT_EQ(stores_[d]->AllVersions()[0].second.version, kOld);
  }
  for (int d = 0; d < 2; ++d) ASSERT_TRUE(stores_[d]->Commit("job-7").ok());
  for (int d = 0; d < 2; ++d) {
    absl::StatusOr<ResidentStore::Block> b = stores_[d]->Find("st", kNew);
    ASSERT_TRUE(b.ok()) << b.status();
    // P(): every device holds the whole new value.
    EXPECT_EQ(b->box.shape, Shape{4});
    EXPECT_EQ(Values(*b->data), kAfter);
    ASSERT_TRUE(b->layout.has_value());
    EXPECT_EQ(b->layout->spec.ToString(), "P()");
  }
  // After a restart the directory has the new version.
  ResidentStore restarted(dirs_[1].path());
  ASSERT_TRUE(restarted.LoadDirectory().ok());
  absl::StatusOr<ResidentStore::Block> b = restarted.Find("st", kNew);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(Values(*b->data), kAfter);
}

TEST_F(StateOutReshardTest, AFailedReshardLeavesThePreviousVersionAlone) {
  // Device 1 cannot read device 0's new block: the job fails and every
  // device drops what it wrote (ShardJob aborts on every way out).
  const std::vector<absl::Status> ended = RunJob("w0");
  EXPECT_TRUE(
      StatusIs(ended[1], absl::StatusCode::kUnavailable,
               {"storing state 'buffer' (st) as P()",
                "reading resident array 'st' from worker w0", "w0 is gone"}));
  for (int d = 0; d < 2; ++d) stores_[d]->Abort("job-7");
  for (int d = 0; d < 2; ++d) {
    // The new version is nowhere, exposed or staged.
    EXPECT_FALSE(stores_[d]->Find("st", kNew).ok());
    ASSERT_TRUE(stores_[d]->Commit("job-7").ok());  // nothing left to commit
    EXPECT_FALSE(stores_[d]->Find("st", kNew).ok());
    // The previous version is intact, and the only one held.
    absl::StatusOr<ResidentStore::Block> b = stores_[d]->Find("st", kOld);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(Values(*b->data),
              (std::vector<float>{kBefore[2 * d], kBefore[2 * d + 1]}));
    const auto versions = stores_[d]->AllVersions();
    ASSERT_EQ(versions.size(), 1u);
    EXPECT_EQ(versions[0].second.version, kOld);
    // And so is the directory.
    ResidentStore restarted(dirs_[d].path());
    ASSERT_TRUE(restarted.LoadDirectory().ok());
    const auto loaded = restarted.AllVersions();
    ASSERT_EQ(loaded.size(), 1u);
    EXPECT_EQ(loaded[0].second.version, kOld);
    EXPECT_EQ(Values(*loaded[0].second.data),
              (std::vector<float>{kBefore[2 * d], kBefore[2 * d + 1]}));
  }
}

TEST(ResidentStoreExposeTest, AnExposedBlockIsReadableButNeverStoredOrListed) {
  ResidentStore store;
  ResidentStore::Block b;
  b.version = 5;
  b.box = Box{{0}, {2}};
  b.data = std::make_shared<Tensor>(Floats({1, 2}));
  store.Expose("job-1", "st", b);
  absl::StatusOr<ResidentStore::Block> found = store.Find("st", 5);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(Values(*found->data), (std::vector<float>{1, 2}));
  EXPECT_TRUE(store.All().empty());
  EXPECT_TRUE(store.AllVersions().empty());
  EXPECT_EQ(store.Bytes(), 0u);
  ASSERT_TRUE(store.Commit("job-1").ok());
  EXPECT_FALSE(store.Find("st", 5).ok());
  store.Expose("job-2", "st", b);
  store.Abort("job-2");
  EXPECT_FALSE(store.Find("st", 5).ok());
}

TEST_F(StateOutReshardTest, ABlockOfAnotherShapeIsRefusedBeforeAnyRead) {
  FakePeers peers("w0", {{"w0", stores_[0].get()}});
  std::map<std::string, Tensor> states;
  states["buffer"] = Floats({1, 2, 3});
  StateReshardHooks hooks;
  hooks.barrier = [] {
    return absl::InternalError("the barrier must not be reached");
  };
  EXPECT_TRUE(
      StatusIs(ReshardWrittenStates(Header(0), mesh_, 0, peers, *stores_[0],
                                    hooks, absl::InfiniteFuture(), &states),
               absl::StatusCode::kInvalidArgument,
               {"state 'buffer' (st) must keep its block float32[2]",
                "the function left float32[3]"}));
}

}  // namespace
}  // namespace shardmap
