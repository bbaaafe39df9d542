// Tests of worker/resident_store: staging and committing, the two versions
// kept, dropping, and blocks kept in a directory across a restart.
#include "worker/resident_store.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/status_matchers.h"

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
  store.Put("p", MakeBlock(1, 0, {0}, {4}, 1));
  EXPECT_TRUE(StatusIs(store.Find("p", 3).status(), absl::StatusCode::kNotFound,
                       {"'p'", "version 3"}));
  EXPECT_TRUE(store.All().size() == 1);
}

TEST(ResidentStoreTest, PutThenFind) {
  ResidentStore store;
  const ResidentStore::Block b = MakeBlock(4, 2, {8, 0}, {4, 3}, 9);
  store.Put("model/w", b);
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
  store.Commit("job2");
  EXPECT_FALSE(Has(store, "p", 1));
  store.Commit("job1");
  EXPECT_TRUE(Has(store, "p", 1));
  EXPECT_TRUE(Has(store, "q", 1));
  EXPECT_EQ(store.All().size(), 2u);
  // Committing again changes nothing.
  store.Commit("job1");
  EXPECT_EQ(store.All().size(), 2u);
}

TEST(ResidentStoreTest, AbortDropsStagedBlocks) {
  ResidentStore store;
  store.Put("p", MakeBlock(1, 0, {0}, {4}, 1));
  store.Stage("job1", "p", MakeBlock(2, 0, {0}, {4}, 2));
  store.Stage("job2", "q", MakeBlock(3, 0, {0}, {4}, 3));
  store.Abort("job1");
  store.Commit("job1");
  EXPECT_FALSE(Has(store, "p", 2));
  EXPECT_TRUE(Has(store, "p", 1));
  // The other job's staging is untouched.
  store.Commit("job2");
  EXPECT_TRUE(Has(store, "q", 3));
  // Aborting an unknown job is harmless.
  store.Abort("nope");
}

TEST(ResidentStoreTest, KeepsTwoVersions) {
  ResidentStore store;
  store.Put("p", MakeBlock(1, 0, {0}, {4}, 1));
  store.Put("p", MakeBlock(2, 0, {0}, {4}, 2));
  EXPECT_TRUE(Has(store, "p", 1));
  EXPECT_TRUE(Has(store, "p", 2));
  store.Stage("job", "p", MakeBlock(3, 0, {0}, {4}, 3));
  store.Commit("job");
  EXPECT_FALSE(Has(store, "p", 1));
  EXPECT_TRUE(Has(store, "p", 2));
  EXPECT_TRUE(Has(store, "p", 3));
  // All gives the newest.
  std::vector<std::pair<std::string, ResidentStore::Block>> all = store.All();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].first, "p");
  EXPECT_EQ(all[0].second.version, 3u);
  // Another name does not evict p's versions.
  store.Put("q", MakeBlock(4, 0, {0}, {4}, 4));
  EXPECT_TRUE(Has(store, "p", 2));
}

TEST(ResidentStoreTest, Drop) {
  ResidentStore store;
  store.Put("p", MakeBlock(1, 0, {0}, {4}, 1));
  store.Put("p", MakeBlock(2, 0, {0}, {4}, 2));
  store.Put("q", MakeBlock(1, 1, {4}, {4}, 3));
  store.Drop("p");
  EXPECT_FALSE(Has(store, "p", 1));
  EXPECT_FALSE(Has(store, "p", 2));
  EXPECT_TRUE(Has(store, "q", 1));
  store.Drop("nope");
  std::vector<std::pair<std::string, ResidentStore::Block>> all = store.All();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].first, "q");
  EXPECT_EQ(all[0].second.device, 1);
}

TEST(ResidentStoreTest, AllListsNewestOfEachName) {
  ResidentStore store;
  store.Put("b", MakeBlock(5, 0, {0}, {2}, 1));
  store.Put("a", MakeBlock(1, 0, {0}, {2}, 2));
  store.Put("a", MakeBlock(2, 0, {0}, {2}, 3));
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
  ResidentStoreDirTest() {
    spdlog::set_level(spdlog::level::err);
    std::string tmpl =
        (fs::temp_directory_path() / "resident_store_test.XXXXXX").string();
    char* d = mkdtemp(tmpl.data());
    EXPECT_NE(d, nullptr) << std::strerror(errno);
    dir_ = tmpl;
  }
  ~ResidentStoreDirTest() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A new store on the same directory, loaded; `loaded` is what
  // LoadDirectory returned.
  std::unique_ptr<ResidentStore> Reopen(int* loaded) {
    auto store = std::make_unique<ResidentStore>(dir_);
    absl::StatusOr<int> n = store->LoadDirectory();
    EXPECT_TRUE(n.ok()) << n.status();
    *loaded = n.ok() ? *n : -1;
    return store;
  }

  std::string dir_;
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
    store.Put("model/w", w);
    store.Put("counts", c);
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
    store.Put("step", s);
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
    store.Commit("job1");
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
    store.Put("p", MakeBlock(1, 0, {0}, {4}, 1));
    store.Put("p", v2);
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
    store.Put("model/w", MakeBlock(1, 0, {0}, {4}, 1));
    store.Put("model/b", MakeBlock(1, 0, {0}, {4}, 2));
    store.Drop("model/w");
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
    store.Put("a", MakeBlock(1, 0, {0}, {4}, 1));
    store.Put("a/b", MakeBlock(2, 0, {0}, {4}, 2));
    store.Drop("a");
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
    store.Put("a", MakeBlock(2, 0, {0}, {4}, 1));
    store.Put("a/v2.npy", MakeBlock(3, 0, {0}, {4}, 2));
    store.Put("a/current.json", MakeBlock(4, 0, {0}, {4}, 3));
  }
  int loaded = -1;
  auto store = Reopen(&loaded);
  EXPECT_EQ(loaded, 3);
  EXPECT_TRUE(Has(*store, "a", 2));
  EXPECT_TRUE(Has(*store, "a/v2.npy", 3));
  EXPECT_TRUE(Has(*store, "a/current.json", 4));
}

TEST_F(ResidentStoreDirTest, MalformedMetadataNamesTheFile) {
  const fs::path d = fs::path(dir_) / "arrays" / "broken";
  fs::create_directories(d);
  std::ofstream(d / "current.json") << "{not json";
  ResidentStore store(dir_);
  EXPECT_TRUE(StatusIs(store.LoadDirectory().status(),
                       absl::StatusCode::kDataLoss,
                       {(d / "current.json").string()}));
}

TEST_F(ResidentStoreDirTest, MissingDataFileNamesTheFile) {
  {
    ResidentStore store(dir_);
    store.Put("p", MakeBlock(1, 0, {0}, {4}, 1));
  }
  const fs::path data = fs::path(dir_) / "arrays" / "p" / "v1.npy";
  ASSERT_TRUE(fs::remove(data));
  ResidentStore store(dir_);
  EXPECT_TRUE(StatusIs(store.LoadDirectory().status(),
                       absl::StatusCode::kNotFound, {data.string()}));
}

}  // namespace
}  // namespace shardmap
