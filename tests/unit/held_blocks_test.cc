// Tests of worker/store/held_blocks and the store's reporting methods: a worker
// reports every version of every block it holds with its array's layout
// (also after a restart from its --state-dir), and drops exactly the
// (name, version) blocks the coordinator names, in memory and on disk.
#include "worker/store/held_blocks.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "wire/proto_convert.h"

namespace shardmap {
namespace {

namespace fs = std::filesystem;

// Device `device`'s [4] block of a float32 [8] array split P('x') over
// x=2, at `version`.
ResidentStore::Block Block(uint64_t version, int64_t device) {
  Tensor t(DType::kFloat32, {4});
  for (size_t i = 0; i < t.num_bytes(); ++i) {
    t.data()[i] = static_cast<uint8_t>(version * 13 + i);
  }
  ResidentStore::Block b;
  b.version = version;
  b.device = device;
  b.box = Box{{device * 4}, {4}};
  b.data = std::make_shared<const Tensor>(std::move(t));
  b.layout = ResidentStore::ArrayLayout{ArrayMeta{DType::kFloat32, {8}},
                                        *Mesh::Create({{"x", 2}}),
                                        PartitionSpec({{"x"}})};
  return b;
}

class HeldBlocksTest : public ::testing::Test {
 protected:
  HeldBlocksTest() {
    spdlog::set_level(spdlog::level::err);
    std::string tmpl =
        (fs::temp_directory_path() / "held_blocks_test.XXXXXX").string();
    EXPECT_NE(mkdtemp(tmpl.data()), nullptr) << std::strerror(errno);
    dir_ = tmpl;
  }
  ~HeldBlocksTest() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::unique_ptr<ResidentStore> Reopen() {
    auto store = std::make_unique<ResidentStore>(dir_);
    EXPECT_TRUE(store->LoadDirectory().ok());
    return store;
  }
  std::string dir_;
};

TEST_F(HeldBlocksTest, ReportsEveryVersionWithItsLayout) {
  ResidentStore store(dir_);
  store.Put("p", Block(1, 0));
  store.Put("p", Block(2, 0));
  store.Put("m/q", Block(7, 1));
  std::vector<v1::HeldBlock> held = HeldBlocks(store);
  ASSERT_EQ(held.size(), 3u);
  EXPECT_EQ(held[0].name(), "m/q");
  EXPECT_EQ(held[0].version(), 7u);
  EXPECT_EQ(held[0].device(), 1);
  EXPECT_EQ(held[1].name(), "p");
  EXPECT_EQ(held[1].version(), 1u);
  EXPECT_EQ(held[2].version(), 2u);
  for (const v1::HeldBlock& b : held) {
    ASSERT_TRUE(b.has_header()) << b.name();
    absl::StatusOr<ArrayMeta> meta = HeaderFromProto(b.header(), b.name());
    ASSERT_TRUE(meta.ok()) << meta.status();
    EXPECT_EQ(meta->shape, (Shape{8}));
    EXPECT_EQ(*MeshFromProto(b.mesh()), *Mesh::Create({{"x", 2}}));
    EXPECT_EQ(SpecFromProto(b.spec()), PartitionSpec({{"x"}}));
  }
}

TEST_F(HeldBlocksTest, LayoutSurvivesARestartFromTheDirectory) {
  {
    ResidentStore store(dir_);
    store.Put("p", Block(3, 1));
  }
  std::unique_ptr<ResidentStore> store = Reopen();
  std::vector<v1::HeldBlock> held = HeldBlocks(*store);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].version(), 3u);
  EXPECT_EQ(held[0].device(), 1);
  ASSERT_TRUE(held[0].has_mesh());
  EXPECT_EQ(*MeshFromProto(held[0].mesh()), *Mesh::Create({{"x", 2}}));
  EXPECT_EQ(SpecFromProto(held[0].spec()), PartitionSpec({{"x"}}));
  EXPECT_EQ(HeaderFromProto(held[0].header(), "p")->shape, (Shape{8}));
}

TEST_F(HeldBlocksTest, AMalformedLayoutOnDiskIsLeftOut) {
  {
    ResidentStore store(dir_);
    store.Put("p", Block(3, 1));
  }
  const fs::path file = fs::path(dir_) / "arrays" / "p" / "current.json";
  nlohmann::json meta;
  std::ifstream(file) >> meta;
  meta["mesh"] = 5;  // not a mesh
  std::ofstream(file) << meta.dump();
  // The worker starts, and reports the block without a layout.
  std::unique_ptr<ResidentStore> store = Reopen();
  std::vector<v1::HeldBlock> held = HeldBlocks(*store);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].version(), 3u);
  EXPECT_FALSE(held[0].has_mesh());
  EXPECT_FALSE(held[0].has_header());
}

TEST_F(HeldBlocksTest, DropsExactlyTheNamedVersions) {
  ResidentStore store(dir_);
  store.Put("p", Block(1, 0));
  store.Put("p", Block(2, 0));
  store.Put("q", Block(5, 0));
  v1::HeldBlock p1, q5, unknown;
  p1.set_name("p");
  p1.set_version(1);
  q5.set_name("q");
  q5.set_version(5);
  unknown.set_name("r");
  unknown.set_version(9);
  DropHeldBlocks({p1, q5, unknown}, &store);
  EXPECT_FALSE(store.Find("p", 1).ok());
  EXPECT_TRUE(store.Find("p", 2).ok());
  EXPECT_FALSE(store.Find("q", 5).ok());
  // On disk too: a restart brings back only p version 2.
  std::unique_ptr<ResidentStore> again = Reopen();
  std::vector<v1::HeldBlock> held = HeldBlocks(*again);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].name(), "p");
  EXPECT_EQ(held[0].version(), 2u);
}

TEST_F(HeldBlocksTest, DroppingTheNewestKeepsTheOtherOnDisk) {
  ResidentStore store(dir_);
  store.Put("p", Block(1, 0));
  store.Put("p", Block(2, 0));
  v1::HeldBlock p2;
  p2.set_name("p");
  p2.set_version(2);
  DropHeldBlocks({p2}, &store);
  EXPECT_TRUE(store.Find("p", 1).ok());
  std::unique_ptr<ResidentStore> again = Reopen();
  ASSERT_TRUE(again->Find("p", 1).ok());
  EXPECT_FALSE(again->Find("p", 2).ok());
}

}  // namespace
}  // namespace shardmap
