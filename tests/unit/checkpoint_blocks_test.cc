// Tests of worker/store/checkpoint_blocks: a worker writes and reads checkpoint
// blocks only under the checkpoint directory, at the file it is given
// after checking it, and checks what it reads.
#include "worker/store/checkpoint_blocks.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/digest.h"
#include "core/npy.h"
#include "tests/unit/status_matchers.h"
#include "tests/unit/temp_dir.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

namespace fs = std::filesystem;

class CheckpointBlocksTest : public ::testing::Test {
 protected:
  CheckpointBlocksTest() {
    Tensor t(DType::kFloat32, {4});
    for (int i = 0; i < 4; ++i) t.data_as<float>()[i] = 1.5f * i;
    block_.version = 3;
    block_.box = Box{{0}, {4}};
    block_.data = std::make_shared<const Tensor>(std::move(t));
    EXPECT_TRUE(store_.Put("w", block_).ok());
  }
  v1::SaveBlockRequest Save(const std::string& file) {
    v1::SaveBlockRequest r;
    r.set_name("w");
    r.set_version(3);
    r.set_directory(dir_);
    r.set_file(file);
    return r;
  }
  v1::LoadBlockRequest Load(const std::string& file, uint64_t digest) {
    v1::LoadBlockRequest r;
    r.set_name("w2");
    r.set_version(9);
    r.set_directory(dir_);
    r.set_file(file);
    r.set_digest(digest);
    *r.mutable_mesh() = MeshToProto(*Mesh::Parse("x=1"));
    *r.mutable_header() = HeaderToProto(DType::kFloat32, {4});
    return r;
  }
  TempDir tmp_{"checkpoint_blocks_test"};
  const std::string dir_ = tmp_.path();
  ResidentStore store_;
  ResidentStore::Block block_;
};

TEST_F(CheckpointBlocksTest, SavesAndLoadsUnderTheDirectory) {
  auto digest = SaveCheckpointBlock(store_, Save("blocks/0-0.npy"));
  ASSERT_TRUE(digest.ok()) << digest.status();
  EXPECT_EQ(*digest, Digest(*block_.data));
  auto read = ReadNpy(dir_ + "/blocks/0-0.npy");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->data_as<float>()[3], 4.5f);
  ASSERT_TRUE(
      LoadCheckpointBlock(store_, Load("blocks/0-0.npy", *digest)).ok());
  auto got = store_.Find("w2", 9);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Digest(*got->data), *digest);
}

TEST_F(CheckpointBlocksTest, RefusesPathsOutsideTheDirectory) {
  for (const std::string& file :
       {std::string("/etc/passwd"), std::string("../x.npy"),
        std::string("blocks/../../x.npy"), std::string(""),
        std::string("a\nb.npy")}) {
    EXPECT_TRUE(StatusIs(SaveCheckpointBlock(store_, Save(file)).status(),
                         absl::StatusCode::kInvalidArgument,
                         {"checkpoint block file"}))
        << file;
    EXPECT_TRUE(StatusIs(LoadCheckpointBlock(store_, Load(file, 0)),
                         absl::StatusCode::kInvalidArgument,
                         {"checkpoint block file"}))
        << file;
  }
  v1::SaveBlockRequest relative = Save("b.npy");
  relative.set_directory("ckpt");
  EXPECT_TRUE(StatusIs(SaveCheckpointBlock(store_, relative).status(),
                       absl::StatusCode::kInvalidArgument, {"absolute"}));
  relative.set_directory(dir_ + "/../x");
  EXPECT_TRUE(StatusIs(SaveCheckpointBlock(store_, relative).status(),
                       absl::StatusCode::kInvalidArgument, {"'..'"}));
  v1::SaveBlockRequest old = Save("b.npy");
  old.set_path("/tmp/b.npy");
  EXPECT_TRUE(StatusIs(SaveCheckpointBlock(store_, old).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"'path' is no longer accepted"}));
  EXPECT_FALSE(fs::exists("/tmp/b.npy"));
}

TEST_F(CheckpointBlocksTest, RefusesSymbolicLinks) {
  auto digest = SaveCheckpointBlock(store_, Save("elsewhere/0-0.npy"));
  ASSERT_TRUE(digest.ok()) << digest.status();
  fs::create_symlink(dir_ + "/elsewhere", dir_ + "/blocks");
  EXPECT_TRUE(StatusIs(
      LoadCheckpointBlock(store_, Load("blocks/0-0.npy", *digest)),
      absl::StatusCode::kDataLoss, {dir_ + "/blocks", "symbolic link"}));
  fs::create_symlink(dir_ + "/elsewhere/0-0.npy", dir_ + "/link.npy");
  EXPECT_TRUE(StatusIs(LoadCheckpointBlock(store_, Load("link.npy", *digest)),
                       absl::StatusCode::kDataLoss, {"symbolic link"}));
  EXPECT_TRUE(
      StatusIs(SaveCheckpointBlock(store_, Save("blocks/1-0.npy")).status(),
               absl::StatusCode::kDataLoss, {"symbolic link"}));
}

TEST_F(CheckpointBlocksTest, RefusesAFifoInPlaceOfABlock) {
  auto digest = SaveCheckpointBlock(store_, Save("blocks/0-0.npy"));
  ASSERT_TRUE(digest.ok()) << digest.status();
  ASSERT_EQ(::mkfifo((dir_ + "/blocks/0-1.npy").c_str(), 0600), 0);
  EXPECT_TRUE(
      StatusIs(LoadCheckpointBlock(store_, Load("blocks/0-1.npy", *digest)),
               absl::StatusCode::kDataLoss, {"is not a regular file"}));
}

TEST_F(CheckpointBlocksTest, RefusesDamagedFiles) {
  auto digest = SaveCheckpointBlock(store_, Save("blocks/0-0.npy"));
  ASSERT_TRUE(digest.ok());
  EXPECT_TRUE(StatusIs(LoadCheckpointBlock(store_, Load("blocks/0-0.npy", 1)),
                       absl::StatusCode::kDataLoss,
                       {dir_ + "/blocks/0-0.npy", "checksum"}));
  fs::resize_file(dir_ + "/blocks/0-0.npy", 100);
  EXPECT_TRUE(StatusIs(
      LoadCheckpointBlock(store_, Load("blocks/0-0.npy", *digest)),
      absl::StatusCode::kDataLoss, {dir_ + "/blocks/0-0.npy", "damaged"}));
  EXPECT_TRUE(StatusIs(LoadCheckpointBlock(store_, Load("blocks/9-9.npy", 1)),
                       absl::StatusCode::kNotFound, {"9-9.npy"}));
  EXPECT_FALSE(store_.Find("w2", 9).ok());
}

}  // namespace
}  // namespace shardmap
