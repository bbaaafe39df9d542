// Tests of core/replication: which mesh axes a spec replicates over, and
// FindDivergence on hand-made per-device digests (equal digests stand for
// equal copies), against the pairs a reader works out from the mesh.
#include "core/replication.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace shardmap {
namespace {

Mesh M(const char* text) { return *Mesh::Parse(text); }
PartitionSpec P(const char* text) { return *PartitionSpec::Parse(text); }

void ExpectPair(const std::optional<Divergence>& v, int64_t device,
                int64_t other, const std::string& axis) {
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->device, device);
  EXPECT_EQ(v->other, other);
  EXPECT_EQ(v->axis, axis);
}

TEST(ReplicatedAxesTest, AxesTheSpecLeavesOut) {
  EXPECT_EQ(ReplicatedAxes(M("x=4"), P("P()")),
            (std::vector<std::string>{"x"}));
  EXPECT_TRUE(ReplicatedAxes(M("x=4"), P("P('x')")).empty());
  EXPECT_EQ(ReplicatedAxes(M("x=2,y=3"), P("P('x')")),
            (std::vector<std::string>{"y"}));
  EXPECT_TRUE(ReplicatedAxes(M("x=2,y=3"), P("P(('y', 'x'))")).empty());
  // An axis of size 1 holds one copy: nothing to compare along it.
  EXPECT_TRUE(ReplicatedAxes(M("x=4,y=1"), P("P('x')")).empty());
  // The in_spec None: the whole value on every device.
  EXPECT_EQ(ReplicatedAxes(M("x=2,y=2"), PartitionSpec::Unsplit()),
            (std::vector<std::string>{"x", "y"}));
}

TEST(FindDivergenceTest, EqualCopiesPass) {
  EXPECT_FALSE(FindDivergence(M("x=4"), P("P()"), {7, 7, 7, 7}).has_value());
  // P('x') over x=2,y=2: devices (x, y) = 0:(0,0) 1:(0,1) 2:(1,0) 3:(1,1);
  // copies pair up along y: {0, 1} and {2, 3}.
  EXPECT_FALSE(
      FindDivergence(M("x=2,y=2"), P("P('x')"), {5, 5, 9, 9}).has_value());
  // Every device its own block: nothing is compared.
  EXPECT_FALSE(FindDivergence(M("x=4"), P("P('x')"), {1, 2, 3, 4}).has_value());
}

TEST(FindDivergenceTest, NamesTheAxisAndTheDevices) {
  ExpectPair(FindDivergence(M("x=4"), P("P()"), {1, 2, 3, 4}), 0, 1, "x");

  // Only device 3's copy differs.
  ExpectPair(FindDivergence(M("x=4"), P("P()"), {1, 1, 1, 4}), 0, 3, "x");

  // P('x') over x=2,y=2: block x=1 has copies 2 and 3 (along y).
  ExpectPair(FindDivergence(M("x=2,y=2"), P("P('x')"), {5, 5, 9, 8}), 2, 3,
             "y");
}

TEST(FindDivergenceTest, SeveralAxesNameTheOneWhereTheValueChanges) {
  // P() over x=2,y=2; device 3 = (1,1) differs from 0 = (0,0) along both
  // axes. Device 2 = (1,0) equals 0, so the change is between 2 and 3,
  // along y ...
  ExpectPair(FindDivergence(M("x=2,y=2"), P("P()"), {5, 5, 5, 6}), 2, 3, "y");
  // ... and where the value varies with x only, the pair is along x.
  ExpectPair(FindDivergence(M("x=2,y=2"), P("P()"), {5, 5, 6, 6}), 0, 2, "x");
}

TEST(FindDivergenceTest, WrongNumberOfDigestsFindsNothing) {
  EXPECT_FALSE(FindDivergence(M("x=4"), P("P()"), {1, 2}).has_value());
}

}  // namespace
}  // namespace shardmap
