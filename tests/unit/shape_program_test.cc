// Tests of wire/shape_program: keyword arguments written as Python
// literals into a native function's shape program.
#include "wire/shape_program.h"

#include <gtest/gtest.h>

namespace shardmap {
namespace {

TEST(ShapeProgramTest, WritesJsonAsPython) {
  EXPECT_EQ(PythonLiteral(nullptr), "None");
  EXPECT_EQ(PythonLiteral(true), "True");
  EXPECT_EQ(PythonLiteral(false), "False");
  EXPECT_EQ(PythonLiteral(3), "3");
  EXPECT_EQ(PythonLiteral(-2.5), "-2.5");
  EXPECT_EQ(PythonLiteral("it's"), "'it\\'s'");
  EXPECT_EQ(PythonLiteral(nlohmann::json::array({"x"})), "('x',)");
  EXPECT_EQ(PythonLiteral(nlohmann::json::parse("[[0, 1], [1, 0]]")),
            "((0, 1), (1, 0))");
}

TEST(ShapeProgramTest, FillsEveryPlaceholder) {
  auto source = RenderShapeProgram(
      "lambda x: all_gather(x, {axes}, axis={axis}, tiled={tiled})",
      nlohmann::json::parse(R"({"axes": ["x", "y"], "axis": 1,
                                "tiled": true})"));
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ(*source, "lambda x: all_gather(x, ('x', 'y'), axis=1, tiled=True)");
}

TEST(ShapeProgramTest, NamesWhatIsMissing) {
  auto missing =
      RenderShapeProgram("lambda x: psum(x, {axes})", nlohmann::json::object());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("'axes'"), std::string::npos);
  EXPECT_FALSE(RenderShapeProgram("lambda x: {axes", {{"axes", "x"}}).ok());
}

}  // namespace
}  // namespace shardmap
