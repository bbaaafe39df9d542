// Tests of core/block_math against an independent, naive reference of JAX's
// split (SEMANTICS I4 and P3, the `make_indexer` of shard_map_test.py):
//
//   for device coordinate c, the block index along dim d is
//     sum_i c[a_i] * prod_{j > i} size(a_j)
//   over the axes (a_0, a_1, ...) of spec entry d in the entry's own order,
//   and the block is x[s_d * b_d : (s_d + 1) * b_d for every d], with
//   b_d = shape[d] / prod_i size(a_i).
//
// The reference walks every element of every block with plain index loops;
// it shares nothing with the code under test except the Mesh it is given
// (device d's coordinates come from a nested-loop enumeration here, not
// from Mesh::Coords).
#include "core/block_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace shardmap {
namespace {

using Entries = std::vector<PartitionSpec::Entry>;

::testing::AssertionResult StatusIs(const absl::Status& s,
                                    absl::StatusCode code,
                                    std::initializer_list<std::string> parts) {
  if (s.code() != code) {
    return ::testing::AssertionFailure()
           << "expected code " << absl::StatusCodeToString(code) << ", got "
           << s;
  }
  for (const std::string& p : parts) {
    if (!absl::StrContains(s.message(), p)) {
      return ::testing::AssertionFailure()
             << "message lacks \"" << p << "\": " << s;
    }
  }
  return ::testing::AssertionSuccess();
}

// --- The naive reference ----------------------------------------------------

struct Case {
  std::vector<std::string> names;  // mesh axes, in mesh order
  std::vector<int64_t> sizes;
  Entries entries;  // the spec
  Shape shape;
  DType dtype = DType::kFloat32;
};

std::string Describe(const Case& c) {
  std::vector<std::string> axes;
  for (size_t i = 0; i < c.names.size(); ++i) {
    axes.push_back(absl::StrCat(c.names[i], "=", c.sizes[i]));
  }
  std::vector<std::string> entries;
  for (const auto& e : c.entries) {
    entries.push_back(
        e.empty() ? "None" : absl::StrCat("(", absl::StrJoin(e, ","), ")"));
  }
  return absl::StrCat("mesh ", absl::StrJoin(axes, ","), " spec [",
                      absl::StrJoin(entries, " "), "] shape (",
                      absl::StrJoin(c.shape, ","), ") ", DTypeName(c.dtype));
}

int64_t AxisSize(const Case& c, const std::string& name) {
  for (size_t i = 0; i < c.names.size(); ++i) {
    if (c.names[i] == name) return c.sizes[i];
  }
  ADD_FAILURE() << "no axis " << name;
  return 1;
}

int AxisPos(const Case& c, const std::string& name) {
  for (size_t i = 0; i < c.names.size(); ++i) {
    if (c.names[i] == name) return static_cast<int>(i);
  }
  ADD_FAILURE() << "no axis " << name;
  return 0;
}

// Every coordinate tuple of `sizes`, by nested loops (one level per axis),
// innermost axis fastest: the row-major device order of SEMANTICS M2.
void EnumerateCoords(const std::vector<int64_t>& sizes, size_t level,
                     std::vector<int64_t>* current,
                     std::vector<std::vector<int64_t>>* out) {
  if (level == sizes.size()) {
    out->push_back(*current);
    return;
  }
  for (int64_t i = 0; i < sizes[level]; ++i) {
    (*current)[level] = i;
    EnumerateCoords(sizes, level + 1, current, out);
  }
}

std::vector<std::vector<int64_t>> AllCoords(const std::vector<int64_t>& sizes) {
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> current(sizes.size(), 0);
  EnumerateCoords(sizes, 0, &current, &out);
  return out;
}

// Number of blocks along dim d: the product of its entry's axis sizes.
std::vector<int64_t> NaiveBlocksPerDim(const Case& c) {
  std::vector<int64_t> n(c.shape.size(), 1);
  for (size_t d = 0; d < c.entries.size(); ++d) {
    for (const std::string& a : c.entries[d]) n[d] *= AxisSize(c, a);
  }
  return n;
}

// make_indexer: sum(idx[el[i]] * prod(mesh.shape[e] for e in el[i+1:])).
std::vector<int64_t> NaiveBlockIndex(const Case& c,
                                     const std::vector<int64_t>& coord) {
  std::vector<int64_t> index(c.shape.size(), 0);
  for (size_t d = 0; d < c.entries.size(); ++d) {
    const PartitionSpec::Entry& el = c.entries[d];
    for (size_t i = 0; i < el.size(); ++i) {
      int64_t prod = 1;
      for (size_t j = i + 1; j < el.size(); ++j) prod *= AxisSize(c, el[j]);
      index[d] += coord[AxisPos(c, el[i])] * prod;
    }
  }
  return index;
}

struct NaiveBlock {
  Shape shape;
  std::vector<uint8_t> bytes;         // C order
  std::vector<int64_t> global_elems;  // linear global index of each element
};

// x[slices], element by element.
NaiveBlock NaiveExtract(const Case& c, const uint8_t* global,
                        const std::vector<int64_t>& index) {
  const size_t item = ItemSize(c.dtype);
  const size_t rank = c.shape.size();
  const std::vector<int64_t> nb = NaiveBlocksPerDim(c);
  NaiveBlock block;
  for (size_t d = 0; d < rank; ++d) block.shape.push_back(c.shape[d] / nb[d]);
  int64_t count = 1;
  for (int64_t b : block.shape) count *= b;
  std::vector<int64_t> m(rank, 0);  // position inside the block
  for (int64_t e = 0; e < count; ++e) {
    // Decompose e row-major over the block shape.
    int64_t rest = e;
    for (size_t d = rank; d-- > 0;) {
      m[d] = rest % block.shape[d];
      rest /= block.shape[d];
    }
    int64_t linear = 0;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t g = index[d] * block.shape[d] + m[d];
      linear = linear * c.shape[d] + g;
    }
    block.global_elems.push_back(linear);
    const uint8_t* src = global + linear * item;
    block.bytes.insert(block.bytes.end(), src, src + item);
  }
  return block;
}

// Element e holds e + 1, so no element is zero and every one is distinct.
Tensor Filled(DType dtype, const Shape& shape) {
  Tensor t(dtype, shape);
  const int64_t n = t.num_elements();
  for (int64_t e = 0; e < n; ++e) {
    switch (dtype) {
      case DType::kFloat32:
        t.data_as<float>()[e] = static_cast<float>(e + 1);
        break;
      case DType::kFloat64:
        t.data_as<double>()[e] = static_cast<double>(e + 1) + 0.25;
        break;
      case DType::kInt32:
        t.data_as<int32_t>()[e] = static_cast<int32_t>(-(e + 1));
        break;
      case DType::kInt64:
        t.data_as<int64_t>()[e] = (e + 1) * 1000003;
        break;
    }
  }
  return t;
}

// --- Random cases -----------------------------------------------------------

int Uniform(std::mt19937& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

Case RandomCase(std::mt19937& rng) {
  static const char* const kPool[] = {"x", "y", "z", "data", "model", "pipe"};
  Case c;
  int64_t devices = 0;
  do {
    const int n = Uniform(rng, 1, 3);
    c.sizes.assign(n, 1);
    devices = 1;
    for (int i = 0; i < n; ++i) {
      c.sizes[i] = Uniform(rng, 1, 4);
      devices *= c.sizes[i];
    }
  } while (devices > 24);
  std::vector<std::string> pool(std::begin(kPool), std::end(kPool));
  std::shuffle(pool.begin(), pool.end(), rng);
  c.names.assign(pool.begin(), pool.begin() + c.sizes.size());

  const int rank = Uniform(rng, 0, 4);
  const int len = rank == 0 ? 0 : Uniform(rng, 0, rank);
  c.entries.assign(len, {});
  std::vector<std::string> unused = c.names;
  std::shuffle(unused.begin(), unused.end(), rng);
  if (len > 0 && Uniform(rng, 0, 9) < 4) {
    // Mention every axis: each goes to a random dim, in random order.
    for (const std::string& a : unused) {
      c.entries[Uniform(rng, 0, len - 1)].push_back(a);
    }
  } else {
    for (int d = 0; d < len; ++d) {
      const int kind = Uniform(rng, 0, 2);
      if (kind == 1 && !unused.empty()) {
        c.entries[d].push_back(unused.back());
        unused.pop_back();
      } else if (kind == 2 && unused.size() >= 2) {
        const int k = Uniform(rng, 2, std::min<int>(3, unused.size()));
        for (int i = 0; i < k; ++i) {
          c.entries[d].push_back(unused.back());
          unused.pop_back();
        }
      }
    }
  }
  c.shape.assign(rank, 0);
  for (int d = 0; d < rank; ++d) {
    int64_t p = 1;
    if (d < len) {
      for (const std::string& a : c.entries[d]) p *= AxisSize(c, a);
    }
    const int k = Uniform(rng, 0, 11) == 0 ? 0 : Uniform(rng, 1, 3);
    c.shape[d] = p * k;
  }
  c.dtype = kAllDTypes[Uniform(rng, 0, 3)];
  return c;
}

bool MentionsAll(const Case& c) {
  for (const std::string& a : c.names) {
    bool found = false;
    for (const auto& e : c.entries) {
      found |= std::find(e.begin(), e.end(), a) != e.end();
    }
    if (!found) return false;
  }
  return true;
}

// Product of the sizes of the axes the spec does not mention: the number of
// devices holding each block.
int64_t Replication(const Case& c) {
  int64_t r = 1;
  for (size_t i = 0; i < c.names.size(); ++i) {
    bool found = false;
    for (const auto& e : c.entries) {
      found |= std::find(e.begin(), e.end(), c.names[i]) != e.end();
    }
    if (!found) r *= c.sizes[i];
  }
  return r;
}

Mesh MeshOf(const Case& c) {
  std::vector<MeshAxis> axes;
  for (size_t i = 0; i < c.names.size(); ++i) {
    axes.push_back({c.names[i], c.sizes[i]});
  }
  absl::StatusOr<Mesh> m = Mesh::Create(axes);
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

// Compares item by item; reports the first differing element.
::testing::AssertionResult SameElements(const uint8_t* got, const uint8_t* want,
                                        size_t count, size_t item) {
  for (size_t e = 0; e < count; ++e) {
    if (std::memcmp(got + e * item, want + e * item, item) != 0) {
      return ::testing::AssertionFailure()
             << "element " << e << " of " << count << " differs";
    }
  }
  return ::testing::AssertionSuccess();
}

void CheckCase(const Case& c, std::mt19937& rng, int* all_axes_cases) {
  SCOPED_TRACE(Describe(c));
  const Mesh mesh = MeshOf(c);
  const PartitionSpec spec(c.entries);
  absl::StatusOr<BlockLayout> layout =
      BlockLayout::Create(mesh, spec, c.shape, "in_specs[0]", "args[0]");
  ASSERT_TRUE(layout.ok()) << layout.status();

  const size_t item = ItemSize(c.dtype);
  const Tensor global = Filled(c.dtype, c.shape);
  const int64_t num_elems = global.num_elements();
  const std::vector<int64_t> nb = NaiveBlocksPerDim(c);
  Shape block_shape;
  for (size_t d = 0; d < c.shape.size(); ++d) {
    block_shape.push_back(c.shape[d] / nb[d]);
  }
  EXPECT_EQ(layout->global_shape(), c.shape);
  EXPECT_EQ(layout->block_shape(), block_shape);
  EXPECT_EQ(layout->blocks_per_dim(), nb);

  const std::vector<std::vector<int64_t>> coords = AllCoords(c.sizes);
  ASSERT_EQ(static_cast<int64_t>(coords.size()), mesh.num_devices());

  Tensor reassembled(c.dtype, c.shape);
  std::vector<int> hits(num_elems, 0);
  std::vector<std::vector<int64_t>> naive_index(coords.size());
  for (size_t dev = 0; dev < coords.size(); ++dev) {
    SCOPED_TRACE(absl::StrCat("device ", dev, " at (",
                              absl::StrJoin(coords[dev], ", "), ")"));
    naive_index[dev] = NaiveBlockIndex(c, coords[dev]);
    std::vector<int64_t> origin = naive_index[dev];
    for (size_t d = 0; d < origin.size(); ++d) origin[d] *= block_shape[d];
    EXPECT_EQ(layout->BlockIndex(dev), naive_index[dev]);
    EXPECT_EQ(layout->BlockOrigin(dev), origin);

    const NaiveBlock want = NaiveExtract(c, global.data(), naive_index[dev]);
    ASSERT_EQ(want.shape, block_shape);

    // ExtractBlock == x[slices], element by element.
    const Tensor block = ExtractBlock(global, *layout, dev);
    EXPECT_EQ(block.dtype(), c.dtype);
    ASSERT_EQ(block.shape(), block_shape);
    ASSERT_EQ(block.num_bytes(), want.bytes.size());
    ASSERT_TRUE(SameElements(block.data(), want.bytes.data(),
                             want.global_elems.size(), item));

    const BlockRegion region(c.shape, block_shape, origin, item);
    ASSERT_EQ(region.num_bytes(), want.bytes.size());
    const size_t nbytes = want.bytes.size();

    // A contiguous block is the whole array's bytes from start(), and a
    // block is contiguous when its element offsets in the whole array are
    // consecutive (the naive reference's own index).
    bool consecutive = true;
    for (size_t i = 1; i < want.global_elems.size(); ++i) {
      consecutive &= want.global_elems[i] == want.global_elems[i - 1] + 1;
    }
    if (nbytes > 0) EXPECT_EQ(region.contiguous(), consecutive);
    if (region.contiguous() && nbytes > 0) {
      ASSERT_EQ(region.start(), want.global_elems[0] * item);
      ASSERT_TRUE(std::equal(want.bytes.begin(), want.bytes.end(),
                             global.data() + region.start()));
    }

    // CopyOut of random byte ranges (not aligned to elements).
    for (int t = 0; t < 6; ++t) {
      const size_t off =
          t == 0 ? 0 : std::uniform_int_distribution<size_t>(0, nbytes)(rng);
      const size_t len =
          t == 0 ? nbytes
                 : std::uniform_int_distribution<size_t>(0, nbytes - off)(rng);
      std::vector<uint8_t> out(len + 8, 0xA5);
      region.CopyOut(global.data(), off, len, out.data());
      ASSERT_TRUE(
          std::equal(out.begin(), out.begin() + len, want.bytes.begin() + off))
          << "CopyOut [" << off << ", " << off + len << ") of " << nbytes;
      for (size_t i = len; i < out.size(); ++i) {
        ASSERT_EQ(out[i], 0xA5) << "CopyOut wrote past its length";
      }
      // GlobalEnd: one past the whole array's byte behind the piece's
      // last byte, by the naive element index (the furthest, as the
      // whole array's offsets grow with the block's).
      const size_t want_end =
          len == 0 ? 0
                   : want.global_elems[(off + len - 1) / item] * item +
                         (off + len - 1) % item + 1;
      ASSERT_EQ(region.GlobalEnd(off, len), want_end)
          << "GlobalEnd [" << off << ", " << off + len << ") of " << nbytes;
    }

    // CopyIn of the naive block in random consecutive pieces.
    for (size_t off = 0; off < nbytes;) {
      const size_t len = std::min<size_t>(
          nbytes - off,
          std::uniform_int_distribution<size_t>(1, 3 * item + 5)(rng));
      region.CopyIn(want.bytes.data() + off, off, len, reassembled.data());
      off += len;
    }

    // Footprint: CopyIn writes exactly the naive block's elements.
    Tensor scratch(c.dtype, c.shape);
    const std::vector<uint8_t> ones(nbytes, 0xFF);
    region.CopyIn(ones.data(), 0, nbytes, scratch.data());
    std::vector<bool> in_block(num_elems, false);
    for (int64_t e : want.global_elems) in_block[e] = true;
    for (int64_t e = 0; e < num_elems; ++e) {
      const uint8_t* p = scratch.data() + e * item;
      bool written = false;
      for (size_t b = 0; b < item; ++b) written |= p[b] != 0;
      if (written != in_block[e]) {
        FAIL() << "CopyIn footprint differs at global element " << e
               << ": written=" << written << ", in block=" << in_block[e];
      }
      hits[e] += written;
    }
  }

  // Every block written back reassembles the original.
  EXPECT_TRUE(SameElements(reassembled.data(), global.data(), num_elems, item));
  // Each element is in exactly `replication` blocks: once when the spec
  // mentions every axis.
  const int64_t replication = Replication(c);
  if (MentionsAll(c)) {
    ++*all_axes_cases;
    EXPECT_EQ(replication, 1);
  }
  for (int64_t e = 0; e < num_elems; ++e) {
    ASSERT_EQ(hits[e], replication) << "global element " << e;
  }

  // BlockNumber: equal iff the naive block indices are equal; every block
  // number in range is used.
  int64_t total_blocks = 1;
  for (int64_t n : nb) total_blocks *= n;
  std::set<int64_t> numbers;
  for (size_t a = 0; a < coords.size(); ++a) {
    const int64_t na = layout->BlockNumber(a);
    EXPECT_GE(na, 0);
    EXPECT_LT(na, total_blocks);
    numbers.insert(na);
    for (size_t b = 0; b < coords.size(); ++b) {
      EXPECT_EQ(na == layout->BlockNumber(b), naive_index[a] == naive_index[b])
          << "devices " << a << " and " << b;
    }
  }
  EXPECT_EQ(static_cast<int64_t>(numbers.size()), total_blocks);

  // The output direction: from the block shape back to the global shape.
  absl::StatusOr<BlockLayout> from = BlockLayout::FromBlockShape(
      mesh, spec, block_shape, "out_specs[0]", "output 0");
  ASSERT_TRUE(from.ok()) << from.status();
  EXPECT_EQ(from->global_shape(), c.shape);
  EXPECT_EQ(from->block_shape(), block_shape);
  EXPECT_EQ(from->blocks_per_dim(), nb);
}

TEST(BlockMathTest, RandomCasesMatchNaiveReference) {
  std::mt19937 rng(20240611);
  int all_axes_cases = 0;
  int zero_size_cases = 0;
  int tuple_cases = 0;
  int short_spec_cases = 0;
  std::set<int> ranks;
  for (int i = 0; i < 400; ++i) {
    const Case c = RandomCase(rng);
    ranks.insert(static_cast<int>(c.shape.size()));
    zero_size_cases += NumElements(c.shape) == 0;
    short_spec_cases += c.entries.size() < c.shape.size();
    for (const auto& e : c.entries) {
      if (e.size() >= 2) {
        ++tuple_cases;
        break;
      }
    }
    SCOPED_TRACE(absl::StrCat("case ", i));
    CheckCase(c, rng, &all_axes_cases);
    if (HasFatalFailure()) return;
  }
  // The generator really covers what the test claims to cover.
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3, 4}));
  EXPECT_GT(all_axes_cases, 50);
  EXPECT_GT(zero_size_cases, 10);
  EXPECT_GT(tuple_cases, 50);
  EXPECT_GT(short_spec_cases, 50);
}

TEST(BlockMathTest, RandomNonDivisibleDimsAreRejected) {
  std::mt19937 rng(77);
  int checked = 0;
  for (int i = 0; i < 400 && checked < 100; ++i) {
    Case c = RandomCase(rng);
    const std::vector<int64_t> nb = NaiveBlocksPerDim(c);
    std::vector<size_t> candidates;
    for (size_t d = 0; d < c.entries.size(); ++d) {
      if (nb[d] > 1) candidates.push_back(d);
    }
    if (candidates.empty()) continue;
    const size_t d = candidates[Uniform(rng, 0, candidates.size() - 1)];
    const int64_t bad = nb[d] * Uniform(rng, 0, 2) + Uniform(rng, 1, nb[d] - 1);
    c.shape[d] = bad;
    SCOPED_TRACE(Describe(c));
    const PartitionSpec spec(c.entries);
    std::string axes;
    if (c.entries[d].size() == 1) {
      axes = absl::StrCat("mesh axis '", c.entries[d][0], "' (of size ", nb[d],
                          ")");
    } else {
      std::vector<std::string> quoted;
      for (const auto& a : c.entries[d]) quoted.push_back("'" + a + "'");
      axes = absl::StrCat("mesh axes (", absl::StrJoin(quoted, ", "),
                          ") (of total size ", nb[d], ")");
    }
    EXPECT_TRUE(StatusIs(
        BlockLayout::Create(MeshOf(c), spec, c.shape, "in_specs[2]", "args[2]")
            .status(),
        absl::StatusCode::kInvalidArgument,
        {"args[2] of shape ", "in_specs[2] of value " + spec.ToString(),
         absl::StrCat("maps array axis ", d, " (of size ", bad, ") to ", axes),
         absl::StrCat(nb[d], " does not evenly divide ", bad)}));
    ++checked;
  }
  EXPECT_EQ(checked, 100);
}

// --- Fixed examples
// -----------------------------------------------------------

Mesh MustMesh(absl::string_view text) { return *Mesh::Parse(text); }

TEST(BlockMathTest, DivisibilityMessageForTupleEntry) {
  // SEMANTICS P7: "to mesh axes ('i', 'j') (of total size 8), but 8 does
  // not evenly divide 6".
  const absl::Status s = BlockLayout::Create(MustMesh("x=4,y=2"),
                                             PartitionSpec(Entries{{"x", "y"}}),
                                             {6}, "in_specs[0]", "args[0]")
                             .status();
  EXPECT_TRUE(
      StatusIs(s, absl::StatusCode::kInvalidArgument,
               {"args[0] of shape (6,)", "in_specs[0] of value P(('x', 'y'),)",
                "maps array axis 0 (of size 6)",
                "to mesh axes ('x', 'y') (of total size 8)",
                "8 does not evenly divide 6"}));
}

TEST(BlockMathTest, DivisibilityMessageForSingleAxis) {
  // SEMANTICS P7's example: mesh (4, 2), P('i',) on int32[2,2].
  EXPECT_TRUE(StatusIs(
      BlockLayout::Create(MustMesh("i=4,j=2"), PartitionSpec(Entries{{"i"}}),
                          {2, 2}, "in_specs[0]", "args[0]")
          .status(),
      absl::StatusCode::kInvalidArgument,
      {"args[0] of shape (2, 2)", "in_specs[0] of value P('i',)",
       "maps array axis 0 (of size 2) to mesh axis 'i' (of size 4), but 4 "
       "does not evenly divide 2"}));
  EXPECT_TRUE(
      StatusIs(BlockLayout::Create(MustMesh("i=4,j=2"),
                                   PartitionSpec(Entries{{}, {"j"}}), {4, 3},
                                   "in_specs[1]", "args[1]")
                   .status(),
               absl::StatusCode::kInvalidArgument,
               {"maps array axis 1 (of size 3) to mesh axis 'j' (of size 2)",
                "2 does not evenly divide 3"}));
}

TEST(BlockMathTest, CreateValidatesTheSpec) {
  const Mesh mesh = MustMesh("x=2,y=2");
  EXPECT_TRUE(StatusIs(BlockLayout::Create(mesh, PartitionSpec(Entries{{"q"}}),
                                           {4}, "in_specs[0]", "args[0]")
                           .status(),
                       absl::StatusCode::kInvalidArgument, {"mesh axis 'q'"}));
  EXPECT_TRUE(
      StatusIs(BlockLayout::Create(mesh, PartitionSpec(Entries{{"x"}, {"y"}}),
                                   {4}, "in_specs[0]", "args[0]")
                   .status(),
               absl::StatusCode::kInvalidArgument, {"has length 2", "rank 1"}));
  EXPECT_TRUE(
      StatusIs(BlockLayout::FromBlockShape(mesh, PartitionSpec(Entries{{"x"}}),
                                           {}, "out_specs[0]", "output 0")
                   .status(),
               absl::StatusCode::kInvalidArgument, {"out_specs[0]", "rank 0"}));
}

// Oracles written out by hand from SEMANTICS P3 / DOC's block transpose.
TEST(BlockMathTest, HandExamples) {
  const Mesh mesh = MustMesh("i=4,j=2");
  Tensor x(DType::kInt32, {8});
  for (int k = 0; k < 8; ++k) x.data_as<int32_t>()[k] = 10 * k;

  // P(('i', 'j')): device (i, j) holds element 2*i + j = its device id.
  auto ij = BlockLayout::Create(mesh, PartitionSpec(Entries{{"i", "j"}}), {8},
                                "in_specs[0]", "args[0]");
  ASSERT_TRUE(ij.ok()) << ij.status();
  // P(('j', 'i')): device (i, j) holds element 4*j + i.
  auto ji = BlockLayout::Create(mesh, PartitionSpec(Entries{{"j", "i"}}), {8},
                                "in_specs[0]", "args[0]");
  ASSERT_TRUE(ji.ok()) << ji.status();
  const int want_ji[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int dev = 0; dev < 8; ++dev) {
    const Tensor a = ExtractBlock(x, *ij, dev);
    ASSERT_EQ(a.shape(), (Shape{1}));
    EXPECT_EQ(a.data_as<int32_t>()[0], 10 * dev);
    const Tensor b = ExtractBlock(x, *ji, dev);
    EXPECT_EQ(b.data_as<int32_t>()[0], 10 * want_ji[dev]) << dev;
  }

  // P('i'): device (i, j) holds rows [2i, 2i + 2), replicated over j.
  auto i_only = BlockLayout::Create(mesh, PartitionSpec(Entries{{"i"}}), {8},
                                    "in_specs[0]", "args[0]");
  ASSERT_TRUE(i_only.ok());
  const Tensor d5 = ExtractBlock(x, *i_only, 5);  // (2, 1)
  ASSERT_EQ(d5.shape(), (Shape{2}));
  EXPECT_EQ(d5.data_as<int32_t>()[0], 40);
  EXPECT_EQ(d5.data_as<int32_t>()[1], 50);
  EXPECT_EQ(i_only->BlockNumber(4), i_only->BlockNumber(5));
  EXPECT_NE(i_only->BlockNumber(3), i_only->BlockNumber(4));

  // 2-D: P('i', 'j') on an 8x4 array; device 3 = (1, 1) holds rows 2..3,
  // columns 2..3.
  Tensor m(DType::kFloat32, {8, 4});
  for (int k = 0; k < 32; ++k) m.data_as<float>()[k] = k;
  auto ij2 = BlockLayout::Create(mesh, PartitionSpec(Entries{{"i"}, {"j"}}),
                                 {8, 4}, "in_specs[0]", "args[0]");
  ASSERT_TRUE(ij2.ok());
  const Tensor b3 = ExtractBlock(m, *ij2, 3);
  ASSERT_EQ(b3.shape(), (Shape{2, 2}));
  const float want3[4] = {10, 11, 14, 15};
  for (int k = 0; k < 4; ++k) EXPECT_EQ(b3.data_as<float>()[k], want3[k]);
}

TEST(BlockMathTest, ScalarBlocks) {
  const Mesh mesh = MustMesh("x=3");
  Tensor s(DType::kFloat64, {});
  s.data_as<double>()[0] = 2.5;
  auto layout =
      BlockLayout::Create(mesh, PartitionSpec(), {}, "in_specs[0]", "args[0]");
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->block_shape(), Shape{});
  for (int dev = 0; dev < 3; ++dev) {
    EXPECT_EQ(layout->BlockNumber(dev), 0);
    const Tensor b = ExtractBlock(s, *layout, dev);
    EXPECT_EQ(b.shape(), Shape{});
    EXPECT_EQ(b.data_as<double>()[0], 2.5);
  }
  const BlockRegion region({}, {}, {}, 8);
  EXPECT_EQ(region.num_bytes(), 8u);
  double in = -1.0, out = 0.0;
  region.CopyIn(reinterpret_cast<const uint8_t*>(&in), 0, 8,
                reinterpret_cast<uint8_t*>(&out));
  EXPECT_EQ(out, -1.0);
}

}  // namespace
}  // namespace shardmap
