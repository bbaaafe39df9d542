// Tests of worker/store/resident_store: staging and committing, the two versions
// kept, dropping, and blocks kept in a directory across a restart.
#include "worker/store/resident_store.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "tests/unit/status_matchers.h"
#include "tests/unit/temp_dir.h"
#include "tests/unit/wait_until.h"

namespace shardmap {
namespace {

namespace fs = std::filesystem;

// A block of `shape` at `origin` whose bytes are a pattern seeded by
// `seed`.
ResidentStore::Block MakeBlock(uint64_t version, int64_t device,
                               std::vector<int64_t> origin, Shape shape,
                               int seed, DType dtype = DType::kFloat32) {
  Tensor t(dtype, shape);
  for (size_t i = 0; i < t.num_bytes(); ++i) {
    t.data()[i] = static_cast<uint8_t>(seed * 31 + i * 7);
  }
  ResidentStore::Block b;
  b.version = version;
  b.device = device;
  b.box = Box{std::move(origin), std::move(shape)};
  b.data = std::make_shared<const Tensor>(std::move(t));
  return b;
}

std::string Bytes(const ResidentStore::Block& b) {
  return std::string(reinterpret_cast<const char*>(b.data->data()),
                     b.data->num_bytes());
}

void ExpectSameBlock(const ResidentStore::Block& got,
                     const ResidentStore::Block& want) {
  EXPECT_EQ(got.version, want.version);
  EXPECT_EQ(got.device, want.device);
  EXPECT_EQ(got.box.origin, want.box.origin);
  EXPECT_EQ(got.box.shape, want.box.shape);
  ASSERT_NE(got.data, nullptr);
  EXPECT_EQ(got.data->dtype(), want.data->dtype());
  EXPECT_EQ(got.data->shape(), want.data->shape());
  EXPECT_EQ(Bytes(got), Bytes(want));
}

bool Has(const ResidentStore& s, const std::string& name, uint64_t version) {
  return s.Find(name, version).ok();
}

TEST(ResidentStoreTest, FindUnknownIsNotFound) {
  ResidentStore store;
  EXPECT_TRUE(StatusIs(store.Find("p", 3).status(), absl::StatusCode::kNotFound,
                       {"'p'", "version 3"}));
  EXPECT_TRUE(store.Put("p", MakeBlock(1, 0, {0}, {4}, 1)).ok());
  EXPECT_TRUE(StatusIs(store.Find("p", 3).status(), absl::StatusCode::kNotFound,
                       {"'p'", "version 3"}));
  EXPECT_TRUE(store.All().size() == 1);
}

TEST(ResidentStoreTest, PutThenFind) {
  ResidentStore store;
  const ResidentStore::Block b = MakeBlock(4, 2, {8, 0}, {4, 3}, 9);
  EXPECT_TRUE(store.Put("model/w", b).ok());
  absl::StatusOr<ResidentStore::Block> got = store.Find("model/w", 4);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameBlock(*got, b);
  // The data is shared, not copied.
  EXPECT_EQ(got->data.get(), b.data.get());
}

TEST(ResidentStoreTest, StagedBlockIsInvisibleUntilCommit) {
  ResidentStore store;
  store.Stage("job1", "p", MakeBlock(1, 0, {0}, {4}, 1));
  store.Stage("job1", "q", MakeBlock(1, 0, {0}, {2}, 2));
  EXPECT_FALSE(Has(store, "p", 1));
  EXPECT_FALSE(Has(store, "q", 1));
  EXPECT_TRUE(store.All().empty());
  // Another job's commit does not apply it.
  EXPECT_TRUE(store.Commit("job2").ok());
  EXPECT_FALSE(Has(store, "p", 1));
  EXPECT_TRUE(store.Commit("job1").ok());
  EXPECT_TRUE(Has(store, "p", 1));
  EXPECT_TRUE(Has(store, "q", 1));
  EXPECT_EQ(store.All().size(), 2u);
  // Committing again changes nothing.
  EXPECT_TRUE(store.Commit("job1").ok());
  EXPECT_EQ(store.All().size(), 2u);
}

TEST(ResidentStoreTest, AbortDropsStagedBlocks) {
  ResidentStore store;
  EXPECT_TRUE(store.Put("p", MakeBlock(1, 0, {0}, {4}, 1)).ok());
  store.Stage("job1", "p", MakeBlock(2, 0, {0}, {4}, 2));
  store.Stage("job2", "q", MakeBlock(3, 0, {0}, {4}, 3));
  store.Abort("job1");
  EXPECT_TRUE(store.Commit("job1").ok());
  EXPECT_FALSE(Has(store, "p", 2));
  EXPECT_TRUE(Has(store, "p", 1));
  // The other job's staging is untouched.
  EXPECT_TRUE(store.Commit("job2").ok());
  EXPECT_TRUE(Has(store, "q", 3));
  // Aborting an unknown job is harmless.
  store.Abort("nope");
}

TEST(ResidentStoreTest, KeepsTwoVersions) {
  ResidentStore store;
  EXPECT_TRUE(store.Put("p", MakeBlock(1, 0, {0}, {4}, 1)).ok());
  EXPECT_TRUE(store.Put("p", MakeBlock(2, 0, {0}, {4}, 2)).ok());
  EXPECT_TRUE(Has(store, "p", 1));
  EXPECT_TRUE(Has(store, "p", 2));
  store.Stage("job", "p", MakeBlock(3, 0, {0}, {4}, 3));
  EXPECT_TRUE(store.Commit("job").ok());
  EXPECT_FALSE(Has(store, "p", 1));
  EXPECT_TRUE(Has(store, "p", 2));
  EXPECT_TRUE(Has(store, "p", 3));
  // All gives the newest.
  std::vector<std::pair<std::string, ResidentStore::Block>> all = store.All();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].first, "p");
  EXPECT_EQ(all[0].second.version, 3u);
  // Another name does not evict p's versions.
  EXPECT_TRUE(store.Put("q", MakeBlock(4, 0, {0}, {4}, 4)).ok());
  EXPECT_TRUE(Has(store, "p", 2));
}

TEST(ResidentStoreTest, Drop) {
  ResidentStore store;
  EXPECT_TRUE(store.Put("p", MakeBlock(1, 0, {0}, {4}, 1)).ok());
  EXPECT_TRUE(store.Put("p", MakeBlock(2, 0, {0}, {4}, 2)).ok());
  EXPECT_TRUE(store.Put("q", MakeBlock(1, 1, {4}, {4}, 3)).ok());
  EXPECT_TRUE(store.Drop("p").ok());
  EXPECT_FALSE(Has(store, "p", 1));
  EXPECT_FALSE(Has(store, "p", 2));
  EXPECT_TRUE(Has(store, "q", 1));
  EXPECT_TRUE(store.Drop("nope").ok());
  std::vector<std::pair<std::string, ResidentStore::Block>> all = store.All();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].first, "q");
  EXPECT_EQ(all[0].second.device, 1);
}

TEST(ResidentStoreTest, AllListsNewestOfEachName) {
  ResidentStore store;
  EXPECT_TRUE(store.Put("b", MakeBlock(5, 0, {0}, {2}, 1)).ok());
  EXPECT_TRUE(store.Put("a", MakeBlock(1, 0, {0}, {2}, 2)).ok());
  EXPECT_TRUE(store.Put("a", MakeBlock(2, 0, {0}, {2}, 3)).ok());
  std::vector<std::pair<std::string, ResidentStore::Block>> all = store.All();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, "a");
  EXPECT_EQ(all[0].second.version, 2u);
  EXPECT_EQ(all[1].first, "b");
  EXPECT_EQ(all[1].second.version, 5u);
}

TEST(ResidentStoreTest, LoadDirectoryWithoutDirectoryLoadsNothing) {
  ResidentStore store;
  absl::StatusOr<int> n = store.LoadDirectory();
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0);
}

class ResidentStoreDirTest : public ::testing::Test {
 protected:
  ResidentStoreDirTest() { spdlog::set_level(spdlog::level::err); }

  // A new store on the same directory, loaded; `loaded` is what
  // LoadDirectory returned.
  std::unique_ptr<ResidentStore> Reopen(int* loaded) {
    auto store = std::make_unique<ResidentStore>(dir_);
    absl::StatusOr<int> n = store->LoadDirectory();
    EXPECT_TRUE(n.ok()) << n.status();
    *loaded = n.ok() ? *n : -1;
    return store;
  }

  // Puts a directory (not empty) where `name`'s metadata goes: it can
  // then be neither replaced nor removed. Returns the metadata's path.
  fs::path BlockMetadata(const std::string& name) {
    const fs::path meta = fs::path(dir_) / "arrays" / name / "current.json";
    fs::remove(meta);
    fs::create_directories(meta / "x");
    return meta;
  }

  TempDir tmp_{"resident_store_test"};
  const std::string dir_ = tmp_.path();
};

TEST_F(ResidentStoreDirTest, EmptyDirectoryLoadsNothing) {
  int loaded = -1;
  Reopen(&loaded);
  EXPECT_EQ(loaded, 0);
}

TEST_F(ResidentStoreDirTest, PutSurvivesARestart) {
  const ResidentStore::Block w = MakeBlock(7, 3, {4, 0}, {2, 3}, 5);
  const ResidentStore::Block c =
      MakeBlock(2, 1, {0, 8, 16}, {1, 2, 4}, 6, DType::kInt64);
  {
    ResidentStore store(dir_);
    EXPECT_TRUE(store.Put("model/w", w).ok());
    EXPECT_TRUE(store.Put("counts", c).ok());
  }
  int loaded = -1;
  auto store = Reopen(&loaded);
  EXPECT_EQ(loaded, 2);
  absl::StatusOr<ResidentStore::Block> got = store->Find("model/w", 7);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameBlock(*got, w);
  got = store->Find("counts", 2);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameBlock(*got, c);
}

TEST_F(ResidentStoreDirTest, ScalarSurvivesARestart) {
  const ResidentStore::Block s = MakeBlock(3, 0, {}, {}, 8, DType::kFloat64);
  {
    ResidentStore store(dir_);
    EXPECT_TRUE(store.Put("step", s).ok());
  }
  int loaded = -1;
  auto store = Reopen(&loaded);
  EXPECT_EQ(loaded, 1);
  absl::StatusOr<ResidentStore::Block> got = store->Find("step", 3);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameBlock(*got, s);
}

TEST_F(ResidentStoreDirTest, CommittedBlockIsKeptButStagedIsNot) {
  const ResidentStore::Block p = MakeBlock(1, 0, {0}, {4}, 1);
  {
    ResidentStore store(dir_);
    store.Stage("job1", "p", p);
    store.Stage("job2", "q", MakeBlock(1, 0, {0}, {4}, 2));
    EXPECT_TRUE(store.Commit("job1").ok());
    store.Abort("job2");
  }
  int loaded = -1;
  auto store = Reopen(&loaded);
  EXPECT_EQ(loaded, 1);
  EXPECT_TRUE(Has(*store, "p", 1));
  EXPECT_FALSE(Has(*store, "q", 1));
}

TEST_F(ResidentStoreDirTest, OnlyTheNewestVersionIsKeptOnDisk) {
  const ResidentStore::Block v2 = MakeBlock(2, 0, {0}, {4}, 2);
  {
    ResidentStore store(dir_);
    EXPECT_TRUE(store.Put("p", MakeBlock(1, 0, {0}, {4}, 1)).ok());
    EXPECT_TRUE(store.Put("p", v2).ok());
  }
  int n_files = 0;
  for (const auto& e :
       fs::directory_iterator(fs::path(dir_) / "arrays" / "p")) {
    (void)e;
    ++n_files;
  }
  EXPECT_EQ(n_files, 2);  // current.json and v2.npy
  int loaded = -1;
  auto store = Reopen(&loaded);
  EXPECT_EQ(loaded, 1);
  EXPECT_FALSE(Has(*store, "p", 1));
  absl::StatusOr<ResidentStore::Block> got = store->Find("p", 2);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameBlock(*got, v2);
}

TEST_F(ResidentStoreDirTest, DropRemovesFromDisk) {
  {
    ResidentStore store(dir_);
    EXPECT_TRUE(store.Put("model/w", MakeBlock(1, 0, {0}, {4}, 1)).ok());
    EXPECT_TRUE(store.Put("model/b", MakeBlock(1, 0, {0}, {4}, 2)).ok());
    EXPECT_TRUE(store.Drop("model/w").ok());
  }
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "arrays" / "model" / "w"));
  int loaded = -1;
  auto store = Reopen(&loaded);
  EXPECT_EQ(loaded, 1);
  EXPECT_FALSE(Has(*store, "model/w", 1));
  EXPECT_TRUE(Has(*store, "model/b", 1));
}

TEST_F(ResidentStoreDirTest, DropLeavesLongerNamesBelowIt) {
  // "a" and "a/b" are distinct arrays even though one's name is a prefix
  // path of the other's.
  {
    ResidentStore store(dir_);
    EXPECT_TRUE(store.Put("a", MakeBlock(1, 0, {0}, {4}, 1)).ok());
    EXPECT_TRUE(store.Put("a/b", MakeBlock(2, 0, {0}, {4}, 2)).ok());
    EXPECT_TRUE(store.Drop("a").ok());
    EXPECT_TRUE(Has(store, "a/b", 2));
  }
  int loaded = -1;
  auto store = Reopen(&loaded);
  EXPECT_EQ(loaded, 1);
  EXPECT_FALSE(Has(*store, "a", 1));
  EXPECT_TRUE(Has(*store, "a/b", 2));
}

TEST_F(ResidentStoreDirTest, NamesThatLookLikeFilesDoNotClash) {
  // "a/v2.npy" as a name must not collide with version 2 of "a" on disk.
  {
    ResidentStore store(dir_);
    EXPECT_TRUE(store.Put("a", MakeBlock(2, 0, {0}, {4}, 1)).ok());
    EXPECT_TRUE(store.Put("a/v2.npy", MakeBlock(3, 0, {0}, {4}, 2)).ok());
    EXPECT_TRUE(store.Put("a/current.json", MakeBlock(4, 0, {0}, {4}, 3)).ok());
  }
  int loaded = -1;
  auto store = Reopen(&loaded);
  EXPECT_EQ(loaded, 3);
  EXPECT_TRUE(Has(*store, "a", 2));
  EXPECT_TRUE(Has(*store, "a/v2.npy", 3));
  EXPECT_TRUE(Has(*store, "a/current.json", 4));
}

// One bad array costs that array only: the worker starts with the others
// and lists the bad one with its file and reason.
void ExpectOneBad(ResidentStore& store, const std::string& path,
                  const std::string& reason) {
  std::vector<ResidentStore::BadArray> bad = store.BadArrays();
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].path, path);
  EXPECT_TRUE(absl::StrContains(bad[0].reason, reason)) << bad[0].reason;
}

TEST_F(ResidentStoreDirTest, MalformedMetadataSkipsThatArrayOnly) {
  {
    ResidentStore store(dir_);
    EXPECT_TRUE(store.Put("good", MakeBlock(1, 0, {0}, {4}, 1)).ok());
  }
  const fs::path d = fs::path(dir_) / "arrays" / "broken";
  fs::create_directories(d);
  std::ofstream(d / "current.json") << "{not json";
  int loaded = -1;
  auto store = Reopen(&loaded);
  EXPECT_EQ(loaded, 1);
  EXPECT_TRUE(Has(*store, "good", 1));
  ExpectOneBad(*store, (d / "current.json").string(), "not JSON");
}

TEST_F(ResidentStoreDirTest, EmptyMetadataSkipsThatArrayOnly) {
  {
    ResidentStore store(dir_);
    EXPECT_TRUE(store.Put("good", MakeBlock(1, 0, {0}, {4}, 1)).ok());
    EXPECT_TRUE(store.Put("bad", MakeBlock(2, 0, {0}, {4}, 2)).ok());
  }
  const fs::path meta = fs::path(dir_) / "arrays" / "bad" / "current.json";
  std::ofstream(meta, std::ios::trunc).flush();
  int loaded = -1;
  auto store = Reopen(&loaded);
  EXPECT_EQ(loaded, 1);
  EXPECT_TRUE(Has(*store, "good", 1));
  EXPECT_FALSE(Has(*store, "bad", 2));
  ExpectOneBad(*store, meta.string(), "empty");
}

TEST_F(ResidentStoreDirTest, MissingDataFileSkipsThatArrayOnly) {
  {
    ResidentStore store(dir_);
    EXPECT_TRUE(store.Put("p", MakeBlock(1, 0, {0}, {4}, 1)).ok());
    EXPECT_TRUE(store.Put("q", MakeBlock(1, 0, {0}, {4}, 2)).ok());
  }
  const fs::path data = fs::path(dir_) / "arrays" / "p" / "v1.npy";
  ASSERT_TRUE(fs::remove(data));
  int loaded = -1;
  auto store = Reopen(&loaded);
  EXPECT_EQ(loaded, 1);
  EXPECT_TRUE(Has(*store, "q", 1));
  ExpectOneBad(*store, data.string(), "does not exist");
}

TEST_F(ResidentStoreDirTest, TruncatedDataFileSkipsThatArrayOnly) {
  {
    ResidentStore store(dir_);
    EXPECT_TRUE(store.Put("p", MakeBlock(1, 0, {0}, {64}, 1)).ok());
    EXPECT_TRUE(store.Put("q/r", MakeBlock(3, 1, {4}, {4}, 2)).ok());
  }
  const fs::path data = fs::path(dir_) / "arrays" / "p" / "v1.npy";
  fs::resize_file(data, fs::file_size(data) - 10);
  int loaded = -1;
  auto store = Reopen(&loaded);
  EXPECT_EQ(loaded, 1);
  EXPECT_TRUE(Has(*store, "q/r", 3));
  EXPECT_FALSE(Has(*store, "p", 1));
  ExpectOneBad(*store, data.string(), "truncated");
}

TEST_F(ResidentStoreDirTest, MetadataWithABadNameIsSkipped) {
  // Metadata that names "" or "../x" (edited, or from an older version)
  // is refused, whatever directory it sits in.
  for (const std::string& name :
       {std::string(""), std::string("../x"), std::string(300, 'n')}) {
    const fs::path d = fs::path(dir_) / "arrays" / "odd";
    fs::create_directories(d);
    std::ofstream(d / "current.json", std::ios::trunc) << nlohmann::json{
        {"name", name},
        {"version", 1},
        {"device", 0},
        {"origin", {0}},
        {"file", "v1.npy"}}.dump();
    int loaded = -1;
    auto store = Reopen(&loaded);
    EXPECT_EQ(loaded, 0);
    ExpectOneBad(*store, (d / "current.json").string(), "");
  }
}

TEST_F(ResidentStoreDirTest, LongNamesArePersisted) {
  // Four segments of 250 bytes: 1003 bytes, over a file name's limit.
  std::string name;
  for (char c : {'a', 'b', 'c', 'd'}) {
    if (!name.empty()) name += '/';
    name += std::string(250, c);
  }
  const ResidentStore::Block b = MakeBlock(5, 0, {0}, {4}, 7);
  {
    ResidentStore store(dir_);
    ASSERT_TRUE(store.Put(name, b).ok());
    ASSERT_TRUE(store.Put("short", MakeBlock(1, 0, {0}, {4}, 8)).ok());
  }
  int loaded = -1;
  auto store = Reopen(&loaded);
  EXPECT_EQ(loaded, 2);
  absl::StatusOr<ResidentStore::Block> got = store->Find(name, 5);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameBlock(*got, b);
  EXPECT_TRUE(store->BadArrays().empty());
  // Dropping it leaves nothing of it behind, and the other array.
  EXPECT_TRUE(store->Drop(name).ok());
  EXPECT_TRUE(fs::exists(fs::path(dir_) / "arrays" / "short"));
  int n_dirs = 0;
  for (const auto& e : fs::directory_iterator(fs::path(dir_) / "arrays")) {
    (void)e;
    ++n_dirs;
  }
  EXPECT_EQ(n_dirs, 1);
}

TEST_F(ResidentStoreDirTest, NamesThatBreakTheRulesAreRefused) {
  ResidentStore store(dir_);
  for (const std::string& name : {std::string(""), std::string("a/../b"),
                                  std::string(256, 'x'), std::string("a\nb")}) {
    EXPECT_TRUE(StatusIs(store.Put(name, MakeBlock(1, 0, {0}, {4}, 1)),
                         absl::StatusCode::kInvalidArgument, {}))
        << name;
    EXPECT_TRUE(
        StatusIs(store.Drop(name), absl::StatusCode::kInvalidArgument, {}));
  }
  EXPECT_TRUE(store.All().empty());
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "arrays"));
}

TEST_F(ResidentStoreDirTest, AFailedPersistStoresNothing) {
  {
    ResidentStore store(dir_);
    EXPECT_TRUE(store.Put("p", MakeBlock(1, 0, {0}, {4}, 1)).ok());
  }
  // "q"'s directory cannot be made: a file stands where it would go.
  fs::create_directories(fs::path(dir_) / "arrays");
  std::ofstream(fs::path(dir_) / "arrays" / "q") << "in the way";
  ResidentStore store(dir_);
  ASSERT_TRUE(store.LoadDirectory().ok());
  store.Stage("job", "p", MakeBlock(2, 0, {0}, {4}, 2));
  store.Stage("job", "q", MakeBlock(2, 0, {0}, {4}, 3));
  const std::string q = (fs::path(dir_) / "arrays" / "q").string();
  EXPECT_TRUE(StatusIs(
      store.Commit("job"), absl::StatusCode::kInternal,
      {"cannot create directory " + q + ": ", std::strerror(ENOTDIR)}));
  // Neither block is stored, in memory or on disk: "p" is still version 1.
  EXPECT_FALSE(Has(store, "p", 2));
  EXPECT_FALSE(Has(store, "q", 2));
  EXPECT_TRUE(Has(store, "p", 1));
  int loaded = -1;
  auto reopened = Reopen(&loaded);
  EXPECT_EQ(loaded, 1);
  EXPECT_TRUE(Has(*reopened, "p", 1));
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "arrays" / "p" / "v2.npy"));
}

TEST_F(ResidentStoreDirTest, AFailedMetadataWriteSwitchesBack) {
  {
    ResidentStore store(dir_);
    EXPECT_TRUE(store.Put("a", MakeBlock(1, 0, {0}, {4}, 1)).ok());
    EXPECT_TRUE(store.Put("b", MakeBlock(1, 0, {0}, {4}, 2)).ok());
  }
  // "b"'s metadata cannot be replaced: a directory is in its place (its
  // data file can be written).
  const fs::path b_meta = BlockMetadata("b");
  ResidentStore store(dir_);
  ASSERT_TRUE(store.LoadDirectory().ok());
  store.Stage("job", "a", MakeBlock(2, 0, {0}, {4}, 3));
  store.Stage("job", "b", MakeBlock(2, 0, {0}, {4}, 4));
  EXPECT_TRUE(StatusIs(store.Commit("job"), absl::StatusCode::kInternal,
                       {b_meta.string()}));
  EXPECT_FALSE(Has(store, "a", 2));
  // "a" is back at version 1 on disk, its new data file gone.
  fs::remove_all(b_meta);
  int loaded = -1;
  auto reopened = Reopen(&loaded);
  EXPECT_EQ(loaded, 1);
  EXPECT_TRUE(Has(*reopened, "a", 1));
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "arrays" / "a" / "v2.npy"));
}

TEST_F(ResidentStoreDirTest, LayoutAndDroppedVersionsSurviveARestart) {
  ResidentStore::Block v1 = MakeBlock(1, 0, {0}, {4}, 1);
  ResidentStore::Block v2 = MakeBlock(2, 0, {0}, {4}, 2);
  v2.layout = ResidentStore::ArrayLayout{ArrayMeta{DType::kFloat32, {8}},
                                         *Mesh::Parse("x=2"),
                                         *PartitionSpec::Parse("P('x')")};
  {
    ResidentStore store(dir_);
    ASSERT_TRUE(store.Put("p", v1).ok());
    ASSERT_TRUE(store.Put("p", v2).ok());
    EXPECT_EQ(store.AllVersions().size(), 2u);
  }
  {
    int loaded = -1;
    auto store = Reopen(&loaded);
    absl::StatusOr<ResidentStore::Block> got = store->Find("p", 2);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(got->layout.has_value());
    EXPECT_EQ(got->layout->meta.shape, (Shape{8}));
    EXPECT_EQ(got->layout->mesh.ToString(), "x=2");
    EXPECT_EQ(got->layout->spec.ToString(), "P('x',)");
  }
  {
    // Dropping the newest of two versions leaves the older on disk;
    // dropping the only one removes the array's files.
    ResidentStore store(dir_);
    ASSERT_TRUE(store.LoadDirectory().ok());
    ASSERT_TRUE(store.Put("q", v1).ok());
    ASSERT_TRUE(store.Put("q", v2).ok());
    EXPECT_TRUE(store.DropVersion("q", 2).ok());
    EXPECT_TRUE(Has(store, "q", 1));
    EXPECT_TRUE(store.DropVersion("p", 2).ok());
  }
  int loaded = -1;
  auto store = Reopen(&loaded);
  EXPECT_EQ(loaded, 1);
  EXPECT_TRUE(Has(*store, "q", 1));
  EXPECT_FALSE(Has(*store, "p", 2));
}

// A disk whose Persist waits, inside the store's write, until the test
// lets it go; or fails every write with a given error.
class FakeDisk final : public ResidentDisk {
 public:
  explicit FakeDisk(absl::Status fail = absl::OkStatus())
      : fail_(std::move(fail)) {}
  absl::Status Persist(
      const std::vector<std::pair<std::string, const ResidentBlock*>>&)
      override {
    absl::MutexLock lock(&mu_);
    persisting_ = true;
    auto released = [this]()
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !hold_; };
    // Bounded: a store that blocked its readers fails the test, not hangs.
    mu_.AwaitWithTimeout(absl::Condition(&released), absl::Seconds(60));
    persisting_ = false;
    return fail_;
  }
  absl::Status Remove(const std::string&) override { return fail_; }
  void Load(std::vector<Loaded>*, std::vector<Bad>*) const override {}

  void Hold() {
    absl::MutexLock lock(&mu_);
    hold_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    hold_ = false;
  }
  bool persisting() {
    absl::MutexLock lock(&mu_);
    return persisting_;
  }

 private:
  const absl::Status fail_;
  absl::Mutex mu_;
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  bool persisting_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(ResidentStoreDiskTest, ReadsGoOnWhileACommitIsPersisted) {
  auto owned = std::make_unique<FakeDisk>();
  FakeDisk* disk = owned.get();
  ResidentStore store(std::move(owned));
  ASSERT_TRUE(store.Put("p", MakeBlock(1, 0, {0}, {4}, 1)).ok());
  disk->Hold();
  store.Stage("job", "p", MakeBlock(2, 0, {0}, {4}, 2));
  absl::Status committed = absl::UnknownError("not yet");
  std::thread commit([&] { committed = store.Commit("job"); });
  ASSERT_TRUE(WaitUntil([&] { return disk->persisting(); }));
  // The commit is inside its persist: every read answers, on a thread of
  // its own, so a store that blocked it fails here instead of hanging.
  std::atomic<bool> read{false};
  std::thread reader([&] {
    EXPECT_TRUE(Has(store, "p", 1));
    EXPECT_FALSE(Has(store, "p", 2));  // not stored before it is persisted
    EXPECT_EQ(store.All().size(), 1u);
    EXPECT_EQ(store.Bytes(), 16u);
    store.Stage("job2", "q", MakeBlock(1, 0, {0}, {4}, 3));
    read = true;
  });
  const bool answered = WaitUntil([&] { return read.load(); });
  disk->Release();
  reader.join();
  commit.join();
  EXPECT_TRUE(answered) << "a read waited for a persist";
  EXPECT_TRUE(committed.ok()) << committed;
  EXPECT_TRUE(Has(store, "p", 2));
}

TEST(ResidentStoreDiskTest, EveryWriteReturnsTheDisksError) {
  const absl::Status full = absl::ResourceExhaustedError(
      "cannot write /state/arrays/p/v2.npy: No space left on device");
  ResidentStore store(std::make_unique<FakeDisk>(full));
  store.Stage("job", "p", MakeBlock(2, 0, {0}, {4}, 2));
  EXPECT_EQ(store.Commit("job"), full);
  EXPECT_FALSE(Has(store, "p", 2));
  EXPECT_EQ(store.Put("p", MakeBlock(3, 0, {0}, {4}, 3)), full);
  EXPECT_FALSE(Has(store, "p", 3));
  EXPECT_EQ(store.Drop("p"), full);
  EXPECT_EQ(store.DropVersion("p", 3), absl::OkStatus());  // not held
}

TEST_F(ResidentStoreDirTest, AFailedRemoveNamesTheFile) {
  ResidentStore store(dir_);
  ASSERT_TRUE(store.Put("p", MakeBlock(1, 0, {0}, {4}, 1)).ok());
  ASSERT_TRUE(store.Put("p", MakeBlock(2, 0, {0}, {4}, 2)).ok());
  const fs::path meta = BlockMetadata("p");
  EXPECT_TRUE(StatusIs(store.DropVersion("p", 2), absl::StatusCode::kInternal,
                       {meta.string()}));
  EXPECT_FALSE(Has(store, "p", 2));  // dropped in memory anyway
  EXPECT_TRUE(StatusIs(store.Drop("p"), absl::StatusCode::kInternal,
                       {"cannot remove " + meta.string()}));
  EXPECT_FALSE(Has(store, "p", 1));
}

}  // namespace
}  // namespace shardmap
