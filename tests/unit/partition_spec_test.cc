// Tests of core/partition_spec: parsing the Python text form, JAX's repr
// (SEMANTICS P8), canonicalization (P1) and validation against a mesh and
// a rank (P4, P5, P6).
#include "core/partition_spec.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

using Entries = std::vector<PartitionSpec::Entry>;

PartitionSpec MustParse(absl::string_view text) {
  absl::StatusOr<PartitionSpec> p = PartitionSpec::Parse(text);
  EXPECT_TRUE(p.ok()) << text << ": " << p.status();
  return p.ok() ? *std::move(p) : PartitionSpec(Entries{{"PARSE_FAILED"}});
}

Mesh MustMesh(absl::string_view text) { return *Mesh::Parse(text); }

TEST(PartitionSpecParseTest, NameAndNone) {
  const PartitionSpec p = MustParse("P('x', None)");
  EXPECT_FALSE(p.unsplit());
  EXPECT_EQ(p.entries(), (Entries{{"x"}, {}}));
  EXPECT_EQ(p.MentionedAxes(), (std::vector<std::string>{"x"}));
  EXPECT_TRUE(p.Mentions("x"));
  EXPECT_FALSE(p.Mentions("y"));
  EXPECT_FALSE(p.Mentions("None"));
}

TEST(PartitionSpecParseTest, TupleEntry) {
  const PartitionSpec p = MustParse("P(('x','y'))");
  EXPECT_EQ(p.entries(), (Entries{{"x", "y"}}));
  // The tuple's own order, not sorted.
  EXPECT_EQ(MustParse("P(('y', 'x'), 'z')").entries(),
            (Entries{{"y", "x"}, {"z"}}));
  EXPECT_EQ(MustParse("P(('y', 'x'), 'z')").MentionedAxes(),
            (std::vector<std::string>{"y", "x", "z"}));
  EXPECT_EQ(MustParse("P(('a','b','c'),)").entries(),
            (Entries{{"a", "b", "c"}}));
}

TEST(PartitionSpecParseTest, OneNameTupleIsTheName) {
  EXPECT_EQ(MustParse("P(('x',))"), MustParse("P('x')"));
  EXPECT_EQ(MustParse("P(('x',))").entries(), (Entries{{"x"}}));
  EXPECT_EQ(MustParse("P(('x'), None)"), MustParse("P('x', None)"));
}

TEST(PartitionSpecParseTest, EmptyTupleIsNone) {
  EXPECT_EQ(MustParse("P(())").entries(), (Entries{{}}));
  EXPECT_EQ(MustParse("P((), 'x')"), MustParse("P(None, 'x')"));
}

TEST(PartitionSpecParseTest, EmptySpec) {
  const PartitionSpec p = MustParse("P()");
  EXPECT_FALSE(p.unsplit());
  EXPECT_TRUE(p.entries().empty());
  EXPECT_EQ(p, PartitionSpec());
  EXPECT_TRUE(p.MentionedAxes().empty());
}

TEST(PartitionSpecParseTest, NoneIsUnsplit) {
  const PartitionSpec p = MustParse("None");
  EXPECT_TRUE(p.unsplit());
  EXPECT_TRUE(p.entries().empty());
  EXPECT_EQ(p, PartitionSpec::Unsplit());
  EXPECT_FALSE(p == PartitionSpec());  // None is not P()
  EXPECT_EQ(MustParse("  None  "), PartitionSpec::Unsplit());
}

TEST(PartitionSpecParseTest, LongNameQuotesBareNamesAndWhitespace) {
  const Entries expected = {{"x"}, {}, {"y", "z"}};
  EXPECT_EQ(MustParse("PartitionSpec('x', None, ('y', 'z'))").entries(),
            expected);
  EXPECT_EQ(MustParse("P(\"x\", None, (\"y\", \"z\"))").entries(), expected);
  EXPECT_EQ(MustParse("P(x, None, (y, z))").entries(), expected);
  EXPECT_EQ(MustParse(" P ( 'x' ,\tNone ,\n( 'y' , 'z' ) ) ").entries(),
            expected);
  EXPECT_EQ(MustParse("P(x,None,(y,z))").entries(), expected);
  EXPECT_EQ(MustParse("P(data_0, None)").entries(), (Entries{{"data_0"}, {}}));
}

TEST(PartitionSpecParseTest, LongName) {
  EXPECT_EQ(MustParse("PartitionSpec('x')"), MustParse("P('x')"));
  EXPECT_EQ(MustParse("PartitionSpec()"), PartitionSpec());
  EXPECT_EQ(MustParse("PartitionSpec(('a', 'b'), None)").entries(),
            (Entries{{"a", "b"}, {}}));
}

TEST(PartitionSpecParseTest, TrailingCommas) {
  EXPECT_EQ(MustParse("P('x',)").entries(), (Entries{{"x"}}));
  EXPECT_EQ(MustParse("P('x', None,)").entries(), (Entries{{"x"}, {}}));
  EXPECT_EQ(MustParse("P(('x', 'y',),)").entries(), (Entries{{"x", "y"}}));
  EXPECT_EQ(MustParse("P(None,)").entries(), (Entries{{}}));
}

// SEMANTICS P8: JAX's repr.
TEST(PartitionSpecToStringTest, MatchesJaxRepr) {
  EXPECT_EQ(MustParse("P('i')").ToString(), "P('i',)");
  EXPECT_EQ(MustParse("P('i','j')").ToString(), "P('i', 'j')");
  EXPECT_EQ(MustParse("P()").ToString(), "P()");
  EXPECT_EQ(MustParse("P(('x','y'))").ToString(), "P(('x', 'y'),)");
  EXPECT_EQ(MustParse("P(None)").ToString(), "P(None,)");
  EXPECT_EQ(MustParse("P('x', None)").ToString(), "P('x', None)");
  EXPECT_EQ(MustParse("P(('x', 'y'), None, 'z')").ToString(),
            "P(('x', 'y'), None, 'z')");
  EXPECT_EQ(MustParse("None").ToString(), "None");
  EXPECT_EQ(PartitionSpec(Entries{{"a"}, {"b", "c", "d"}}).ToString(),
            "P('a', ('b', 'c', 'd'))");
}

TEST(PartitionSpecToStringTest, ReprParsesBack) {
  for (absl::string_view text :
       {"P('i')", "P('i','j')", "P()", "P(('x','y'))", "P(None)",
        "P(('x', 'y'), None, 'z')", "None", "P(None, None)"}) {
    const PartitionSpec p = MustParse(text);
    EXPECT_EQ(MustParse(p.ToString()), p) << text;
  }
}

TEST(PartitionSpecParseTest, MalformedTextReportsPosition) {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  struct Case {
    const char* text;
    const char* position;
    const char* what;
  };
  const Case cases[] = {
      {"P('x'", "at position 5", "expected ',' or ')'"},
      {"P(", "at position 2", "expected ')' to close P("},
      {"Q('x')", "at position 0",
       "expected P(...), PartitionSpec(...), None or Infer"},
      {"", "at position 0", "expected P(...)"},
      {"P('x' 'y')", "at position 6", "expected ',' or ')'"},
      {"P((('x',),))", "at position 3", "cannot contain a nested tuple"},
      {"P(('x', ('y',)))", "at position 8", "cannot contain a nested tuple"},
      {"P('x',) extra", "at position 8",
       "unexpected text after the closing ')'"},
      {"P('x)", "at position 2", "unterminated quoted axis name"},
      {"P(\"x', None)", "at position 2", "unterminated quoted axis name"},
      {"P('')", "at position 2", "empty axis name"},
      {"P('x', '')", "at position 7", "empty axis name"},
      {"P(('x'", "at position 6", "expected ',' or ')' in the tuple"},
      {"P(('x',", "at position 7", "expected ')' to close the tuple"},
      {"P 'x'", "at position 2", "expected '(' after P"},
      {"None None", "at position 5", "unexpected text after None"},
      {"P(,)", "at position 2", "expected an axis name, None or a tuple"},
      {"P(('x', None))", "", "None inside a tuple of axis names"},
      // Found by fuzz/spec_mesh_fuzzer: a quoted name holding the other
      // quote was accepted and printed back as text that does not parse.
      {"P(\"i''\")", "at position 2", "axis name 'i''' is not an identifier"},
      {"P('a b')", "at position 2", "axis name 'a b' is not an identifier"},
      {"P(('x', 1))", "at position 8", "axis name '1' is not an identifier"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const absl::Status s = PartitionSpec::Parse(c.text).status();
    EXPECT_TRUE(
        StatusIs(s, kInvalid,
                 {absl::StrCat("malformed PartitionSpec \"", c.text, "\""),
                  c.position, c.what}));
  }
}

// --- Validate ---------------------------------------------------------------

TEST(PartitionSpecValidateTest, AcceptsGoodSpecs) {
  const Mesh mesh = MustMesh("x=2,y=4");
  EXPECT_TRUE(MustParse("P('x', 'y')").Validate(mesh, 2, "in_specs", "a").ok());
  EXPECT_TRUE(
      MustParse("P(('y', 'x'))").Validate(mesh, 3, "in_specs", "a").ok());
  EXPECT_TRUE(MustParse("P()").Validate(mesh, 0, "in_specs", "a").ok());
  EXPECT_TRUE(MustParse("P(None)").Validate(mesh, 1, "in_specs", "a").ok());
  EXPECT_TRUE(
      MustParse("P(None, 'x')").Validate(mesh, 2, "in_specs", "a").ok());
  // None (unsplit) fits any rank, including scalars.
  EXPECT_TRUE(PartitionSpec::Unsplit().Validate(mesh, 0, "in_specs", "a").ok());
  EXPECT_TRUE(PartitionSpec::Unsplit().Validate(mesh, 5, "in_specs", "a").ok());
}

TEST(PartitionSpecValidateTest, UnknownAxis) {
  const Mesh mesh = MustMesh("x=2,y=4");
  const absl::Status s =
      MustParse("P('x', 'k')").Validate(mesh, 2, "in_specs[0]", "args[0]");
  EXPECT_TRUE(StatusIs(s, absl::StatusCode::kInvalidArgument,
                       {"in_specs[0] is P('x', 'k')", "mesh axis 'k'",
                        "the mesh has axes ('x', 'y')"}));
  // Inside a tuple too.
  EXPECT_TRUE(StatusIs(
      MustParse("P(('y', 'z'))").Validate(mesh, 1, "out_specs", "output 0"),
      absl::StatusCode::kInvalidArgument,
      {"out_specs is P(('y', 'z'),)", "mesh axis 'z'", "('x', 'y')"}));
}

TEST(PartitionSpecValidateTest, DuplicateAxis) {
  const Mesh mesh = MustMesh("x=2,y=4");
  EXPECT_TRUE(StatusIs(
      MustParse("P('x', 'x')").Validate(mesh, 2, "in_specs[1]", "args[1]"),
      absl::StatusCode::kInvalidArgument,
      {"in_specs[1] is P('x', 'x')", "duplicate entries for mesh axis 'x'"}));
  EXPECT_TRUE(StatusIs(
      MustParse("P(('x','y'), 'x')").Validate(mesh, 2, "in_specs", "args[0]"),
      absl::StatusCode::kInvalidArgument,
      {"P(('x', 'y'), 'x')", "duplicate entries for mesh axis 'x'"}));
  EXPECT_TRUE(StatusIs(
      MustParse("P(('y','x','y'))").Validate(mesh, 1, "in_specs", "args[0]"),
      absl::StatusCode::kInvalidArgument,
      {"duplicate entries for mesh axis 'y'"}));
}

TEST(PartitionSpecValidateTest, TooLongForRank) {
  const Mesh mesh = MustMesh("i=4,j=2");
  const absl::Status s =
      MustParse("P('i', 'j')").Validate(mesh, 1, "in_specs[0]", "args[0]");
  EXPECT_TRUE(StatusIs(s, absl::StatusCode::kInvalidArgument,
                       {"in_specs[0] is P('i', 'j')", "has length 2",
                        "args[0] has rank 1", "rank 1", "(and 1 < 2)"}));
  EXPECT_FALSE(absl::StrContains(s.message(), "scalar"));
  // Trailing Nones count (SEMANTICS P6).
  EXPECT_TRUE(StatusIs(
      MustParse("P('i', None)").Validate(mesh, 1, "in_specs", "args[0]"),
      absl::StatusCode::kInvalidArgument, {"has length 2", "rank 1"}));
}

TEST(PartitionSpecValidateTest, ScalarHint) {
  const Mesh mesh = MustMesh("i=4");
  EXPECT_TRUE(
      StatusIs(MustParse("P('i')").Validate(mesh, 0, "in_specs[0]", "args[0]"),
               absl::StatusCode::kInvalidArgument,
               {"has length 1", "rank 0", "(and 0 < 1)",
                "for scalar values (rank 0) use P()"}));
  // P(None) on a scalar is an error too; use P().
  EXPECT_TRUE(
      StatusIs(MustParse("P(None)").Validate(mesh, 0, "in_specs[0]", "args[0]"),
               absl::StatusCode::kInvalidArgument,
               {"has length 1", "for scalar values (rank 0) use P()"}));
}

}  // namespace
}  // namespace shardmap
