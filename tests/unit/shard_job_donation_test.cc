// Tests of a worker's donated arguments (ResidentSource.donate): the
// stored block handed to the function without a copy, a copy when it is
// not donated or something else still holds it, and the versions before
// the one a job reads dropped (tests/unit/shard_job_fixture.h).
#include <gtest/gtest.h>

#include <memory>

#include "tests/unit/shard_job_fixture.h"

namespace shardmap {
namespace {

class DonationTest : public ShardJobTest {
 protected:
  DonationTest() {
    // in_place(x) = x + 1, computed in x's own buffer; it records where
    // that buffer is.
    EXPECT_TRUE(
        registry_
            .Register(
                sdk::Function("in_place", 1)
                    .Kernel(
                        [this](sdk::Context&, const auto& args)
                            -> absl::StatusOr<std::vector<sdk::TensorView>> {
                          seen_ = static_cast<const uint8_t*>(args[0].data());
                          float* x = args[0].template data_as<float>();
                          for (int64_t i = 0; i < args[0].num_elements(); ++i) {
                            x[i] += 1;
                          }
                          return args;  // handed back without a copy
                        }))
            .ok());
  }

  // Holds `values` as version `version` of "p" (one device); returns
  // where its data is.
  const uint8_t* Hold(uint64_t version, const std::vector<float>& values) {
    ResidentStore::Block block;
    block.version = version;
    block.box = Box{{0}, {static_cast<int64_t>(values.size())}};
    block.data = std::make_shared<Tensor>(Floats(values));
    const uint8_t* data = block.data->data();
    EXPECT_TRUE(store_->Put("p", std::move(block)).ok());
    return data;
  }

  // A job of `function` over "p" at `version` (4 floats), donated or
  // not, storing its output as "p" version `version` + 1.
  v1::ShardJob UpdateJob(uint64_t version, bool donate,
                         const std::string& function = "in_place") {
    v1::ShardJob header = Header("job-d", next_ticket_++, {}, function);
    *header.mutable_args(0) = HeaderToProto(DType::kFloat32, {4});
    v1::ResidentSource* source = header.add_resident_args();
    source->set_name("p");
    source->set_version(version);
    *source->mutable_header() = HeaderToProto(DType::kFloat32, {4});
    *source->mutable_mesh() = MeshToProto(*Mesh::Parse("x=1"));
    source->add_holders(peers_.my_address());
    source->set_donate(donate);
    StoreOutput(&header, "p");
    header.mutable_resident_outputs(0)->set_version(version + 1);
    return header;
  }

  // Runs `header` and commits it.
  absl::Status RunAndCommit(const v1::ShardJob& header) {
    FakeShardStream stream;
    v1::ShardRequest request;
    *request.mutable_job() = header;
    stream.Push(request);
    Decide(stream, true);
    return RunJob(stream);
  }

  absl::Status Update(uint64_t version, bool donate) {
    return RunAndCommit(UpdateJob(version, donate));
  }

  const uint8_t* seen_ = nullptr;
  uint64_t next_ticket_ = 0;
};

TEST_F(DonationTest, ADonatedBlockGoesToTheFunctionWithoutACopy) {
  const uint8_t* stored = Hold(5, {1, 2, 3, 4});
  ASSERT_TRUE(Update(5, /*donate=*/true).ok());
  EXPECT_EQ(seen_, stored);
  EXPECT_TRUE(Holds("p", 6, {2, 3, 4, 5}));
  // The donated version is gone: one copy of the array is held.
  EXPECT_EQ(store_->Find("p", 5).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Bytes(), 4 * sizeof(float));
}

TEST_F(DonationTest, AnArgumentNotDonatedIsACopy) {
  const uint8_t* stored = Hold(5, {1, 2, 3, 4});
  ASSERT_TRUE(Update(5, /*donate=*/false).ok());
  EXPECT_NE(seen_, stored);
  EXPECT_TRUE(Holds("p", 5, {1, 2, 3, 4}));  // kept until the next write
  EXPECT_TRUE(Holds("p", 6, {2, 3, 4, 5}));
}

TEST_F(DonationTest, ADonatedBlockSomethingElseHoldsIsCopied) {
  const uint8_t* stored = Hold(5, {1, 2, 3, 4});
  absl::StatusOr<ResidentStore::Block> reader = store_->Find("p", 5);
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(Update(5, /*donate=*/true).ok());
  EXPECT_NE(seen_, stored);
  EXPECT_EQ(Values(*reader->data), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_TRUE(Holds("p", 6, {2, 3, 4, 5}));
}

TEST_F(DonationTest, ReadingAVersionDropsTheOnesBeforeIt) {
  Hold(4, {0, 1, 2, 3});
  Hold(5, {1, 2, 3, 4});
  ASSERT_TRUE(Holds("p", 4, {0, 1, 2, 3}));
  ASSERT_TRUE(Update(5, /*donate=*/false).ok());
  // Version 4 is superseded everywhere: the job was planned against 5.
  EXPECT_EQ(store_->Find("p", 4).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Holds("p", 5, {1, 2, 3, 4}));
  EXPECT_TRUE(Holds("p", 6, {2, 3, 4, 5}));
}

TEST_F(DonationTest, AFailedDonatedJobLeavesNoVersionOfIt) {
  Hold(5, {1, 2, 3, 4});
  // The function fails after the block was taken for it.
  EXPECT_EQ(RunAndCommit(UpdateJob(5, /*donate=*/true, "refuse")).code(),
            absl::StatusCode::kFailedPrecondition);
  // No old block is left to be served as current (the coordinator marks
  // the array lost and has the name dropped).
  EXPECT_EQ(store_->Find("p", 5).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_->All().empty());
}

}  // namespace
}  // namespace shardmap
