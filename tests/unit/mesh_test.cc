// Tests of core/mesh: parsing, validation, and the row-major device order
// of SEMANTICS M2 (device id = row-major index of the coordinates over the
// axes in mesh order, as np.arange(n).reshape(sizes)).
#include "core/mesh.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

Mesh MustParse(absl::string_view text) {
  absl::StatusOr<Mesh> m = Mesh::Parse(text);
  EXPECT_TRUE(m.ok()) << text << ": " << m.status();
  return m.ok() ? *std::move(m) : *Mesh::Create({{"unused", 1}});
}

TEST(MeshTest, ParseTwoAxes) {
  const Mesh m = MustParse("data=2,model=4");
  ASSERT_EQ(m.num_axes(), 2);
  EXPECT_EQ(m.axes()[0].name, "data");
  EXPECT_EQ(m.axes()[0].size, 2);
  EXPECT_EQ(m.axes()[1].name, "model");
  EXPECT_EQ(m.axes()[1].size, 4);
  EXPECT_EQ(m.num_devices(), 8);
  EXPECT_EQ(m.ToString(), "data=2,model=4");
  EXPECT_EQ(m.AxisPosition("data"), 0);
  EXPECT_EQ(m.AxisPosition("model"), 1);
  EXPECT_EQ(m.AxisPosition("x"), std::nullopt);
  EXPECT_EQ(m.AxisPosition(""), std::nullopt);
}

TEST(MeshTest, ParseAllowsSpaces) {
  const Mesh m = MustParse("  data = 2 ,\tmodel=4 , _p3 =1 ");
  ASSERT_EQ(m.num_axes(), 3);
  EXPECT_EQ(m.axes()[0].name, "data");
  EXPECT_EQ(m.axes()[1].name, "model");
  EXPECT_EQ(m.axes()[2].name, "_p3");
  EXPECT_EQ(m.axes()[2].size, 1);
  EXPECT_EQ(m.num_devices(), 8);
  EXPECT_EQ(m.ToString(), "data=2,model=4,_p3=1");
}

TEST(MeshTest, ParseSingleAxisAndToStringRoundTrip) {
  for (absl::string_view text : {"x=1", "x=7", "a=2,b=3,c=4", "i=4,j=2"}) {
    const Mesh m = MustParse(text);
    EXPECT_EQ(m.ToString(), text);
  }
}

TEST(MeshTest, ParseErrors) {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_TRUE(StatusIs(Mesh::Parse("").status(), kInvalid,
                       {"malformed mesh ''", "AXIS=SIZE"}));
  EXPECT_TRUE(StatusIs(Mesh::Parse("x").status(), kInvalid,
                       {"malformed mesh 'x'", "got 'x'"}));
  EXPECT_TRUE(StatusIs(Mesh::Parse("x=2,").status(), kInvalid,
                       {"malformed mesh 'x=2,'"}));
  EXPECT_TRUE(
      StatusIs(Mesh::Parse("x=2=3").status(), kInvalid, {"malformed mesh"}));
  EXPECT_TRUE(StatusIs(Mesh::Parse("x=0").status(), kInvalid,
                       {"mesh axis 'x' has size 0", "sizes must be >= 1"}));
  EXPECT_TRUE(StatusIs(Mesh::Parse("x=-1").status(), kInvalid,
                       {"mesh axis 'x' has size -1", "sizes must be >= 1"}));
  EXPECT_TRUE(StatusIs(Mesh::Parse("x=2,x=2").status(), kInvalid,
                       {"mesh axis 'x' appears twice"}));
  EXPECT_TRUE(StatusIs(Mesh::Parse("1x=2").status(), kInvalid,
                       {"mesh axis name '1x' is not an identifier"}));
  EXPECT_TRUE(StatusIs(Mesh::Parse("x-y=2").status(), kInvalid,
                       {"mesh axis name 'x-y' is not an identifier"}));
  EXPECT_TRUE(StatusIs(Mesh::Parse("=2").status(), kInvalid,
                       {"mesh axis name '' is not an identifier"}));
  EXPECT_TRUE(StatusIs(Mesh::Parse("x=abc").status(), kInvalid,
                       {"malformed mesh 'x=abc'", "got 'x=abc'"}));
  EXPECT_TRUE(StatusIs(Mesh::Parse("x=4097").status(), kInvalid,
                       {"mesh has more than 4096 devices"}));
  EXPECT_TRUE(StatusIs(Mesh::Parse("x=64,y=65").status(), kInvalid,
                       {"mesh has more than 4096 devices"}));
  EXPECT_TRUE(
      StatusIs(Mesh::Parse("a=16,b=16,c=16,d=16,e=16,f=16,g=16,h=16").status(),
               kInvalid, {"mesh has more than 4096 devices"}));
  // Exactly at the limit is fine.
  EXPECT_EQ(MustParse("x=64,y=64").num_devices(), Mesh::kMaxDevices);
}

TEST(MeshTest, CreateErrors) {
  EXPECT_TRUE(StatusIs(Mesh::Create({}).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"mesh has no axes"}));
  EXPECT_TRUE(StatusIs(Mesh::Create({{"x", 2}, {"y", 0}}).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"mesh axis 'y' has size 0"}));
  absl::StatusOr<Mesh> ok = Mesh::Create({{"x", 2}, {"y", 3}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->num_devices(), 6);
}

TEST(MeshTest, CoordsAndDeviceIdAreRowMajorThreeAxes) {
  const Mesh m = MustParse("a=2,b=3,c=4");
  ASSERT_EQ(m.num_devices(), 24);
  int64_t expected_id = 0;
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      for (int64_t k = 0; k < 4; ++k) {
        const std::vector<int64_t> coords = {i, j, k};
        EXPECT_EQ(m.Coords(expected_id), coords) << "device " << expected_id;
        EXPECT_EQ(m.DeviceId(coords), expected_id);
        ++expected_id;
      }
    }
  }
  EXPECT_EQ(expected_id, 24);
}

TEST(MeshTest, CoordsAndDeviceIdAreRowMajorTwoAxes) {
  // SEMANTICS §7/§8: axis_index(('i','j')) on (4, 2) = arange(8).reshape(4, 2).
  const Mesh m = MustParse("i=4,j=2");
  int64_t expected_id = 0;
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 2; ++j) {
      EXPECT_EQ(m.Coords(expected_id), (std::vector<int64_t>{i, j}));
      EXPECT_EQ(m.DeviceId({i, j}), expected_id);
      ++expected_id;
    }
  }
  EXPECT_EQ(m.Coords(5), (std::vector<int64_t>{2, 1}));
}

TEST(MeshTest, CoordsOneAxisAndSizeOneAxes) {
  const Mesh one = MustParse("x=5");
  for (int64_t d = 0; d < 5; ++d) {
    EXPECT_EQ(one.Coords(d), (std::vector<int64_t>{d}));
    EXPECT_EQ(one.DeviceId({d}), d);
  }
  const Mesh ones = MustParse("p=1,q=3,r=1");
  for (int64_t d = 0; d < 3; ++d) {
    EXPECT_EQ(ones.Coords(d), (std::vector<int64_t>{0, d, 0}));
    EXPECT_EQ(ones.DeviceId({0, d, 0}), d);
  }
}

// JAX's axis_index lowering (SEMANTICS M2):
// coordinate k = (id // prod(sizes[k+1:])) % sizes[k].
TEST(MeshTest, CoordsMatchAxisIndexFormulaAndAreInverse) {
  for (absl::string_view text :
       {"x=3", "x=2,y=2", "x=1,y=4,z=2", "a=2,b=3,c=2,d=2", "p=4,q=1,r=3"}) {
    SCOPED_TRACE(text);
    const Mesh m = MustParse(text);
    for (int64_t id = 0; id < m.num_devices(); ++id) {
      const std::vector<int64_t> coords = m.Coords(id);
      ASSERT_EQ(coords.size(), m.axes().size());
      for (int k = 0; k < m.num_axes(); ++k) {
        int64_t stride = 1;
        for (int j = k + 1; j < m.num_axes(); ++j) stride *= m.axes()[j].size;
        EXPECT_EQ(coords[k], (id / stride) % m.axes()[k].size)
            << "device " << id << " axis " << k;
      }
      EXPECT_EQ(m.DeviceId(coords), id);
    }
  }
}

TEST(MeshTest, Describe) {
  EXPECT_EQ(MustParse("i=4,j=2").Describe(),
            "shape (4, 2) with corresponding axis names ('i', 'j')");
  EXPECT_EQ(MustParse("x=8").Describe(),
            "shape (8,) with corresponding axis names ('x',)");
  EXPECT_EQ(MustParse("a=1,b=2,c=3").Describe(),
            "shape (1, 2, 3) with corresponding axis names ('a', 'b', 'c')");
}

}  // namespace
}  // namespace shardmap
