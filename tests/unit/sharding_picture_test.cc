// Tests of server/sharding_picture: which device each drawn cell names,
// checked against BlockLayout's own block numbering.
#include "server/sharding_picture.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"

namespace shardmap {
namespace {

BlockLayout Layout(const Mesh& mesh, const char* spec, Shape shape) {
  return *BlockLayout::Create(mesh, *PartitionSpec::Parse(spec), shape, "spec",
                              "array");
}

// The picture's cell texts, row by row.
std::vector<std::vector<std::string>> Cells(const std::string& picture) {
  std::vector<std::vector<std::string>> rows;
  for (absl::string_view line : absl::StrSplit(picture, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    if (line.empty() || line[0] != '|') continue;
    std::vector<std::string> row;
    for (absl::string_view cell : absl::StrSplit(line, '|')) {
      std::string text(cell);
      text.erase(0, text.find_first_not_of(' '));
      text.erase(text.find_last_not_of(' ') + 1);
      if (!text.empty()) row.push_back(text);
    }
    rows.push_back(row);
  }
  return rows;
}

TEST(ShardingPictureTest, TwoAxesSplitBothDimensions) {
  Mesh mesh = *Mesh::Parse("x=2,y=2");
  auto cells =
      Cells(ShardingPicture(mesh, Layout(mesh, "P('x', 'y')", {4, 4}), ""));
  // Device (x, y) is number 2x + y and holds block (x, y).
  EXPECT_EQ(cells,
            (std::vector<std::vector<std::string>>{{"0", "1"}, {"2", "3"}}));
}

TEST(ShardingPictureTest, ReplicasShareACell) {
  Mesh mesh = *Mesh::Parse("data=2,model=2");
  auto cells =
      Cells(ShardingPicture(mesh, Layout(mesh, "P('data')", {4, 6}), "  "));
  EXPECT_EQ(cells, (std::vector<std::vector<std::string>>{{"0,1"}, {"2,3"}}));
  auto all = Cells(ShardingPicture(mesh, Layout(mesh, "P()", {3}), ""));
  EXPECT_EQ(all, (std::vector<std::vector<std::string>>{{"0-3"}}));
}

TEST(ShardingPictureTest, TupleAxesAndDeeperDimensions) {
  Mesh mesh = *Mesh::Parse("x=2,y=2");
  auto cells = Cells(
      ShardingPicture(mesh, Layout(mesh, "P(None, ('y', 'x'))", {2, 8}), ""));
  // Block j along dimension 1 is held by the device with y*2 + x == j.
  EXPECT_EQ(cells,
            (std::vector<std::vector<std::string>>{{"0", "2", "1", "3"}}));
  std::string deep =
      ShardingPicture(mesh, Layout(mesh, "P(None, None, 'x')", {2, 2, 4}), "");
  EXPECT_NE(deep.find("dimension 2 in 2"), std::string::npos) << deep;
}

}  // namespace
}  // namespace shardmap
