// Tests of the collective algorithms (worker/collectives/) over the
// in-memory transport, the way gloo tests its algorithms: every rank is a
// thread talking to one InMemoryHub, each returns an absl::Status, and every
// status is checked. Results are compared with a single-process reference
// (the reduction over ranks in rank order); replicated results must also be
// bitwise identical on every rank, since replicas are compared by digest.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/dtype_dispatch.h"
#include "tests/fakes/in_memory_peer_transport.h"
#include "tests/unit/status_matchers.h"
#include "tests/unit/wait_until.h"
#include "worker/collectives/all_gather.h"
#include "worker/collectives/all_reduce.h"
#include "worker/collectives/all_to_all.h"
#include "worker/collectives/permute.h"
#include "worker/collectives/reduce.h"
#include "worker/collectives/reduce_scatter.h"

namespace shardmap {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};

// ---------------------------------------------------------------------------
// Harness

// Runs fn(rank) on one thread per rank (gloo's spawn) and returns every
// rank's status.
std::vector<absl::Status> RunRanks(int n,
                                   const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> statuses(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { statuses[r] = fn(r); });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

::testing::AssertionResult AllOk(const std::vector<absl::Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (!statuses[r].ok()) {
      return ::testing::AssertionFailure()
             << "rank " << r << ": " << statuses[r];
    }
  }
  return ::testing::AssertionSuccess();
}

// A group of n ranks on a mesh of n + 3 devices: a subset in a scrambled
// order, so that rank and device id never coincide by accident.
std::vector<int64_t> ScrambledDevices(int n) {
  std::vector<int64_t> devices(n + 3);
  std::iota(devices.begin(), devices.end(), 0);
  std::shuffle(devices.begin(), devices.end(), std::mt19937(n));
  devices.resize(n);
  return devices;
}

GroupView Group(const std::vector<int64_t>& devices, int rank) {
  GroupView group;
  group.devices = devices;
  group.rank = rank;
  return group;
}

CollectiveTag Tag(uint64_t seq, std::string text = "psum(axes=('x',))") {
  CollectiveTag tag;
  tag.seq = seq;
  tag.fingerprint.hash = std::hash<std::string>()(text);
  tag.fingerprint.text = std::move(text);
  return tag;
}

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Element i of rank r's array: floats with many non-representable partial
// sums (so that a different summation order shows in the last bits),
// integers over the whole range (so that sums wrap around).
template <typename T>
T Value(uint64_t salt, int rank, size_t i) {
  const uint64_t h = Mix(salt * 1000003 + rank * 7919 + i);
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(static_cast<int64_t>(h % 20001) - 10000) / T(7);
  } else {
    return static_cast<T>(h);
  }
}

Bytes MakeArray(DType dtype, uint64_t salt, int rank, size_t count) {
  Bytes bytes(count * ItemSize(dtype));
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    for (size_t i = 0; i < count; ++i) {
      const T v = Value<T>(salt, rank, i);
      std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
    }
  });
  return bytes;
}

Bytes RandomBytes(uint64_t salt, int rank, size_t size) {
  Bytes bytes(size);
  for (size_t i = 0; i < size; ++i)
    bytes[i] = Mix(salt + rank * 131 + i) & 0xff;
  return bytes;
}

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Whether `got` is the reduction over ranks 0..n-1 of elements
// [first, first + count) of `inputs`: exact for integers and for max/min,
// within rounding for floating-point sums (whose order may differ).
template <typename T>
::testing::AssertionResult MatchesReferenceTyped(
    DType dtype, const std::vector<Bytes>& inputs, size_t first, ReduceOp op,
    const Bytes& got) {
  const size_t count = got.size() / sizeof(T);
  for (size_t i = 0; i < count; ++i) {
    const size_t at = (first + i) * sizeof(T);
    const T actual = Load<T>(got.data() + i * sizeof(T));
    if constexpr (std::is_floating_point_v<T>) {
      if (op == ReduceOp::kSum) {
        long double sum = 0, magnitude = 0;
        for (const Bytes& in : inputs) {
          const T v = Load<T>(in.data() + at);
          sum += v;
          magnitude += std::fabs(static_cast<long double>(v));
        }
        const long double tolerance =
            magnitude * inputs.size() * std::numeric_limits<T>::epsilon();
        if (std::fabs(actual - sum) > tolerance) {
          return ::testing::AssertionFailure()
                 << "element " << i << ": got " << actual << ", want "
                 << static_cast<double>(sum) << " +- "
                 << static_cast<double>(tolerance);
        }
        continue;
      }
    }
    Bytes expected(inputs[0].begin() + at, inputs[0].begin() + at + sizeof(T));
    for (size_t r = 1; r < inputs.size(); ++r) {
      ReduceInto(dtype, op, absl::MakeSpan(expected),
                 absl::MakeConstSpan(inputs[r].data() + at, sizeof(T)));
    }
    if (std::memcmp(expected.data(), got.data() + i * sizeof(T), sizeof(T))) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << actual << ", want "
             << Load<T>(expected.data());
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult MatchesReference(DType dtype,
                                            const std::vector<Bytes>& inputs,
                                            size_t first, ReduceOp op,
                                            const Bytes& got) {
  return VisitDType(dtype, [&](auto zero) {
    return MatchesReferenceTyped<decltype(zero)>(dtype, inputs, first, op, got);
  });
}

::testing::AssertionResult BitwiseIdentical(const std::vector<Bytes>& outputs) {
  for (size_t r = 1; r < outputs.size(); ++r) {
    if (outputs[r] != outputs[0]) {
      return ::testing::AssertionFailure()
             << "rank " << r << "'s output differs from rank 0's";
    }
  }
  return ::testing::AssertionSuccess();
}

std::string Where(DType dtype, ReduceOp op) {
  return absl::StrCat(DTypeName(dtype), " ", ReduceOpName(op));
}

// ---------------------------------------------------------------------------
// ReduceInto

TEST(ReduceIntoTest, IntegerSumsWrapAround) {
  int32_t acc32[2] = {std::numeric_limits<int32_t>::max(), -5};
  const int32_t in32[2] = {1, 7};
  ReduceInto(DType::kInt32, ReduceOp::kSum,
             absl::MakeSpan(reinterpret_cast<uint8_t*>(acc32), sizeof(acc32)),
             absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(in32),
                                 sizeof(in32)));
  EXPECT_EQ(acc32[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(acc32[1], 2);

  int64_t acc64[1] = {std::numeric_limits<int64_t>::min()};
  const int64_t in64[1] = {-1};
  ReduceInto(DType::kInt64, ReduceOp::kSum,
             absl::MakeSpan(reinterpret_cast<uint8_t*>(acc64), sizeof(acc64)),
             absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(in64),
                                 sizeof(in64)));
  EXPECT_EQ(acc64[0], std::numeric_limits<int64_t>::max());
}

TEST(ReduceIntoTest, MaxAndMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
    float acc[5] = {nan, 1.0f, nan, -inf, 2.0f};
    const float in[5] = {1.0f, nan, nan, 3.0f, -1.0f};
    ReduceInto(
        DType::kFloat32, op,
        absl::MakeSpan(reinterpret_cast<uint8_t*>(acc), sizeof(acc)),
        absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(in), sizeof(in)));
    EXPECT_TRUE(std::isnan(acc[0])) << ReduceOpName(op);
    EXPECT_TRUE(std::isnan(acc[1])) << ReduceOpName(op);
    EXPECT_TRUE(std::isnan(acc[2])) << ReduceOpName(op);
    EXPECT_EQ(acc[3], op == ReduceOp::kMax ? 3.0f : -inf);
    EXPECT_EQ(acc[4], op == ReduceOp::kMax ? 2.0f : -1.0f);
  }
  double acc[2] = {std::nan(""), 4.0};
  const double in[2] = {0.0, std::nan("")};
  ReduceInto(
      DType::kFloat64, ReduceOp::kMax,
      absl::MakeSpan(reinterpret_cast<uint8_t*>(acc), sizeof(acc)),
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(in), sizeof(in)));
  EXPECT_TRUE(std::isnan(acc[0]));
  EXPECT_TRUE(std::isnan(acc[1]));
}

TEST(ReduceIntoTest, UnalignedSpans) {
  for (const DType dtype : kAllDTypes) {
    const size_t count = 37;
    const Bytes a = MakeArray(dtype, 1, 0, count);
    const Bytes b = MakeArray(dtype, 1, 1, count);
    Bytes aligned = a;
    ReduceInto(dtype, ReduceOp::kSum, absl::MakeSpan(aligned), b);
    Bytes acc(a.size() + 1), in(b.size() + 3);
    std::memcpy(acc.data() + 1, a.data(), a.size());
    std::memcpy(in.data() + 3, b.data(), b.size());
    ReduceInto(dtype, ReduceOp::kSum, absl::MakeSpan(acc).subspan(1),
               absl::MakeConstSpan(in).subspan(3));
    EXPECT_EQ(0, std::memcmp(acc.data() + 1, aligned.data(), a.size()))
        << DTypeName(dtype);
  }
}

// ---------------------------------------------------------------------------
// AllReduce over group size x element count x algorithm, every dtype and op

// An algorithm choice and the size thresholds that steer it; AllReduce
// and ReduceScatter take the same ones.
struct AlgorithmCase {
  const char* name;
  Algorithm algorithm;
  size_t small_bytes;
  size_t piece_bytes;
};
using AllReduceCase = AlgorithmCase;

const AllReduceCase kAllReduceCases[] = {
    // kAuto with the default thresholds: every size here is "small".
    {"auto_small", Algorithm::kAuto, 64 << 10, 256 << 10},
    // kAuto forced onto the ring, pieces of 64 bytes: many per segment.
    {"auto_ring_pieces", Algorithm::kAuto, 0, 64},
    // A piece size that is not a whole number of 8-byte elements.
    {"ring_ragged_pieces", Algorithm::kRing, 0, 36},
    // One piece per segment: the window shrinks to one.
    {"ring_one_piece", Algorithm::kRing, 0, size_t{1} << 30},
    {"recursive_doubling", Algorithm::kRecursiveDoubling, 0, 64},
    {"direct", Algorithm::kDirect, 0, 64},
};

void PrintTo(const AllReduceCase& c, std::ostream* os) { *os << c.name; }

// Element counts relative to the group size n.
enum class Count { kZero, kOne, kNMinusOne, kNPlusOne, kRagged, kLarge };

const char* const kCountNames[] = {"zero",     "one",    "n_minus_1",
                                   "n_plus_1", "ragged", "large"};

void PrintTo(Count count, std::ostream* os) {
  *os << kCountNames[static_cast<int>(count)];
}

size_t CountFor(Count count, int n) {
  switch (count) {
    case Count::kZero:
      return 0;
    case Count::kOne:
      return 1;
    case Count::kNMinusOne:
      return n - 1;
    case Count::kNPlusOne:
      return n + 1;
    case Count::kRagged:
      return 5 * n + 3;
    case Count::kLarge:
      break;
  }
  return 1999;  // prime: segments never divide evenly
}

using AllReduceParam = std::tuple<int, Count, AllReduceCase>;

class AllReduceTest : public ::testing::TestWithParam<AllReduceParam> {};

// What one AllReduce over a hub's ranks uses besides the arrays.
struct AllReduceRun {
  CollectiveTag tag;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  Algorithm algorithm = Algorithm::kAuto;
  size_t piece_bytes = AllReduceOptions{}.piece_bytes;
  size_t small_bytes = AllReduceOptions{}.small_bytes;
};

// Runs AllReduce on rank r = 0, 1, ... (device devices[r]) over `hub`,
// each reducing outputs[r] in place, or from inputs[r] if `inputs` is set.
::testing::AssertionResult RunAllReduce(InMemoryHub& hub,
                                        const std::vector<int64_t>& devices,
                                        const AllReduceRun& run,
                                        std::vector<Bytes>& outputs,
                                        const std::vector<Bytes>* inputs) {
  const int n = static_cast<int>(devices.size());
  return AllOk(RunRanks(n, [&](int r) {
    std::unique_ptr<InMemoryPeerTransport> transport = hub.Endpoint(devices[r]);
    AllReduceOptions options;
    options.group = Group(devices, r);
    options.tag = run.tag;
    options.dtype = run.dtype;
    options.data = absl::MakeSpan(outputs[r]);
    if (inputs != nullptr) options.input = (*inputs)[r];
    options.op = run.op;
    options.algorithm = run.algorithm;
    options.small_bytes = run.small_bytes;
    options.piece_bytes = run.piece_bytes;
    return AllReduce(options, *transport);
  }));
}

TEST_P(AllReduceTest, MatchesReferenceAndIsBitwiseIdentical) {
  // Plain variables, not structured bindings: lambdas capture them below.
  const int n = std::get<0>(GetParam());
  const Count count_kind = std::get<1>(GetParam());
  const AllReduceCase c = std::get<2>(GetParam());
  const size_t count = CountFor(count_kind, n);
  const std::vector<int64_t> devices = ScrambledDevices(n);
  InMemoryHub hub(n + 3);
  uint64_t seq = 0;
  for (const DType dtype : kAllDTypes) {
    for (const ReduceOp op : kAllOps) {
      SCOPED_TRACE(Where(dtype, op));
      std::vector<Bytes> inputs;
      for (int r = 0; r < n; ++r) {
        inputs.push_back(MakeArray(dtype, seq, r, count));
      }
      // In place, and from a separate input into an output that starts as
      // garbage (AllReduceOptions.input): the same bytes either way.
      std::vector<Bytes> results[2];
      for (const bool separate : {false, true}) {
        SCOPED_TRACE(separate ? "separate input" : "in place");
        std::vector<Bytes>& outputs = results[separate];
        outputs = inputs;
        if (separate) {
          for (Bytes& o : outputs) std::fill(o.begin(), o.end(), 0xab);
        }
        const AllReduceRun run{Tag(seq++),  dtype,         op,
                               c.algorithm, c.piece_bytes, c.small_bytes};
        ASSERT_TRUE(RunAllReduce(hub, devices, run, outputs,
                                 separate ? &inputs : nullptr));
        EXPECT_EQ(hub.PendingMessages(), 0u);
        EXPECT_TRUE(BitwiseIdentical(outputs));
        EXPECT_TRUE(MatchesReference(dtype, inputs, 0, op, outputs[0]));
      }
      EXPECT_EQ(results[0], results[1]);
    }
  }
}

std::string AllReduceName(const ::testing::TestParamInfo<AllReduceParam>& i) {
  const auto& [n, count, c] = i.param;
  return absl::StrCat("n", n, "_", kCountNames[static_cast<int>(count)], "_",
                      c.name);
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, AllReduceTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                       ::testing::Values(Count::kZero, Count::kOne,
                                         Count::kNMinusOne, Count::kNPlusOne,
                                         Count::kRagged, Count::kLarge),
                       ::testing::ValuesIn(kAllReduceCases)),
    AllReduceName);

// The three algorithms differ in the order they combine, but each gives
// every rank the same bits, NaNs included.
TEST(AllReduceTest, NaNWinsEverywhere) {
  const int n = 5;
  const std::vector<int64_t> devices = ScrambledDevices(n);
  InMemoryHub hub(n + 3);
  uint64_t seq = 0;
  for (const Algorithm algorithm :
       {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kDirect}) {
    for (const ReduceOp op : kAllOps) {
      std::vector<Bytes> outputs;
      for (int r = 0; r < n; ++r) {
        outputs.push_back(MakeArray(DType::kFloat64, 9, r, 11));
      }
      const double nan = std::nan("");
      std::memcpy(outputs[3].data() + 2 * sizeof(double), &nan, sizeof(nan));
      AllReduceRun run{Tag(seq++), DType::kFloat64, op, algorithm};
      run.piece_bytes = 16;
      ASSERT_TRUE(RunAllReduce(hub, devices, run, outputs, nullptr));
      EXPECT_TRUE(BitwiseIdentical(outputs));
      EXPECT_TRUE(std::isnan(Load<double>(outputs[0].data() + 16)));
      EXPECT_FALSE(std::isnan(Load<double>(outputs[0].data() + 24)));
    }
  }
}

// The group from the brief: devices 5, 1, 3 of 8, as ranks 0, 1, 2.
TEST(AllReduceTest, SubsetOfDevicesInAnyOrder) {
  const std::vector<int64_t> devices = {5, 1, 3};
  InMemoryHub hub(8);
  uint64_t seq = 0;
  for (const Algorithm algorithm :
       {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kDirect}) {
    std::vector<Bytes> inputs;
    for (int r = 0; r < 3; ++r) {
      inputs.push_back(MakeArray(DType::kInt32, 4, r, 100));
    }
    std::vector<Bytes> outputs = inputs;
    AllReduceRun run{Tag(seq++), DType::kInt32, ReduceOp::kSum, algorithm};
    run.piece_bytes = 32;
    ASSERT_TRUE(RunAllReduce(hub, devices, run, outputs, nullptr));
    EXPECT_TRUE(BitwiseIdentical(outputs));
    EXPECT_TRUE(
        MatchesReference(DType::kInt32, inputs, 0, ReduceOp::kSum, outputs[0]));
  }
}

// ---------------------------------------------------------------------------
// AllGather

using AllGatherParam = std::tuple<int, size_t, Algorithm>;

class AllGatherTest : public ::testing::TestWithParam<AllGatherParam> {};

TEST_P(AllGatherTest, ConcatenatesInRankOrder) {
  const int n = std::get<0>(GetParam());
  const size_t block_bytes = std::get<1>(GetParam());
  const Algorithm algorithm = std::get<2>(GetParam());
  const std::vector<int64_t> devices = ScrambledDevices(n);
  InMemoryHub hub(n + 3);
  std::vector<Bytes> inputs;
  Bytes expected;
  for (int r = 0; r < n; ++r) {
    inputs.push_back(RandomBytes(77, r, block_bytes));
    expected.insert(expected.end(), inputs[r].begin(), inputs[r].end());
  }
  std::vector<Bytes> outputs(n, Bytes(n * block_bytes, 0xee));
  ASSERT_TRUE(AllOk(RunRanks(n, [&](int r) {
    std::unique_ptr<InMemoryPeerTransport> transport = hub.Endpoint(devices[r]);
    AllGatherOptions options;
    options.group = Group(devices, r);
    options.tag = Tag(3, "all_gather(axes=('x',))");
    options.input = inputs[r];
    options.output = absl::MakeSpan(outputs[r]);
    options.algorithm = algorithm;
    options.small_bytes = 1000;          // kAuto: direct below, ring above
    options.exchange.piece_bytes = 100;  // 400 and 4096 bytes: several pieces
    return AllGather(options, *transport);
  })));
  EXPECT_EQ(hub.PendingMessages(), 0u);
  for (int r = 0; r < n; ++r) EXPECT_EQ(outputs[r], expected) << "rank " << r;
}

std::string AllGatherName(const ::testing::TestParamInfo<AllGatherParam>& i) {
  const char* algorithms[] = {"auto", "ring", "recursive_doubling", "direct"};
  return absl::StrCat("n", std::get<0>(i.param), "_bytes", std::get<1>(i.param),
                      "_", algorithms[static_cast<int>(std::get<2>(i.param))]);
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, AllGatherTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                       ::testing::Values(0, 1, 7, 400, 4096),
                       ::testing::Values(Algorithm::kAuto, Algorithm::kRing,
                                         Algorithm::kDirect)),
    AllGatherName);

// ---------------------------------------------------------------------------
// ReduceScatter

// The AllReduce cases but recursive doubling, which ReduceScatter lacks.
using ReduceScatterCase = AlgorithmCase;
const ReduceScatterCase kReduceScatterCases[] = {
    kAllReduceCases[0], kAllReduceCases[1], kAllReduceCases[2],
    kAllReduceCases[3], kAllReduceCases[5],
};

using ReduceScatterParam = std::tuple<int, size_t, ReduceScatterCase>;

class ReduceScatterTest : public ::testing::TestWithParam<ReduceScatterParam> {
};

TEST_P(ReduceScatterTest, EachRankGetsItsChunkReduced) {
  const int n = std::get<0>(GetParam());
  const size_t chunk_elements = std::get<1>(GetParam());
  const ReduceScatterCase c = std::get<2>(GetParam());
  const std::vector<int64_t> devices = ScrambledDevices(n);
  InMemoryHub hub(n + 3);
  uint64_t seq = 0;
  for (const DType dtype : kAllDTypes) {
    for (const ReduceOp op : kAllOps) {
      SCOPED_TRACE(Where(dtype, op));
      const size_t chunk_bytes = chunk_elements * ItemSize(dtype);
      std::vector<Bytes> inputs;
      for (int r = 0; r < n; ++r) {
        inputs.push_back(MakeArray(dtype, seq, r, n * chunk_elements));
      }
      std::vector<Bytes> outputs(n, Bytes(chunk_bytes, 0xee));
      const CollectiveTag tag = Tag(seq++, "psum_scatter(axes=('x',))");
      ASSERT_TRUE(AllOk(RunRanks(n, [&](int r) {
        std::unique_ptr<InMemoryPeerTransport> transport =
            hub.Endpoint(devices[r]);
        ReduceScatterOptions options;
        options.group = Group(devices, r);
        options.tag = tag;
        options.dtype = dtype;
        options.input = inputs[r];
        options.output = absl::MakeSpan(outputs[r]);
        options.op = op;
        options.algorithm = c.algorithm;
        options.small_bytes = c.small_bytes;
        options.piece_bytes = c.piece_bytes;
        return ReduceScatter(options, *transport);
      })));
      EXPECT_EQ(hub.PendingMessages(), 0u);
      for (int r = 0; r < n; ++r) {
        EXPECT_TRUE(
            MatchesReference(dtype, inputs, r * chunk_elements, op, outputs[r]))
            << "rank " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, ReduceScatterTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                       ::testing::Values(0, 1, 5, 301),
                       ::testing::ValuesIn(kReduceScatterCases)),
    [](const ::testing::TestParamInfo<ReduceScatterParam>& i) {
      return absl::StrCat("n", std::get<0>(i.param), "_chunk",
                          std::get<1>(i.param), "_", std::get<2>(i.param).name);
    });

// The ring and the direct exchange combine in different orders, but each
// is deterministic: running it twice gives the same bits.
TEST(ReduceScatterTest, DeterministicAcrossRuns) {
  const int n = 4;
  const std::vector<int64_t> devices = ScrambledDevices(n);
  InMemoryHub hub(n + 3);
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) {
    inputs.push_back(MakeArray(DType::kFloat32, 5, r, n * 300));
  }
  uint64_t seq = 0;
  for (const Algorithm algorithm : {Algorithm::kRing, Algorithm::kDirect}) {
    std::vector<std::vector<Bytes>> runs;
    for (int run = 0; run < 2; ++run) {
      std::vector<Bytes> outputs(n, Bytes(300 * sizeof(float)));
      const CollectiveTag tag = Tag(seq++);
      ASSERT_TRUE(AllOk(RunRanks(n, [&](int r) {
        std::unique_ptr<InMemoryPeerTransport> transport =
            hub.Endpoint(devices[r]);
        ReduceScatterOptions options;
        options.group = Group(devices, r);
        options.tag = tag;
        options.input = inputs[r];
        options.output = absl::MakeSpan(outputs[r]);
        options.algorithm = algorithm;
        options.piece_bytes = 100;
        return ReduceScatter(options, *transport);
      })));
      runs.push_back(outputs);
    }
    EXPECT_EQ(runs[0], runs[1]);
  }
}

// ---------------------------------------------------------------------------
// Permute

struct PermuteCase {
  const char* name;
  // The pairs for a group of n.
  std::function<std::vector<std::pair<int, int>>(int n)> pairs;
};

const PermuteCase kPermuteCases[] = {
    {"shift_right",
     [](int n) {
       std::vector<std::pair<int, int>> pairs;
       for (int r = 0; r < n; ++r) pairs.emplace_back(r, (r + 1) % n);
       return pairs;
     }},
    {"reverse",
     [](int n) {
       std::vector<std::pair<int, int>> pairs;
       for (int r = 0; r < n; ++r) pairs.emplace_back(r, n - 1 - r);
       return pairs;
     }},
    {"partial_shift",  // the last rank receives nothing: zeros
     [](int n) {
       std::vector<std::pair<int, int>> pairs;
       for (int r = 0; r + 1 < n; ++r) pairs.emplace_back(r + 1, r);
       return pairs;
     }},
    {"identity_and_swap",  // (0, 0) copies locally; 1 and 2 swap
     [](int n) {
       std::vector<std::pair<int, int>> pairs = {{0, 0}};
       if (n >= 3) pairs.insert(pairs.end(), {{1, 2}, {2, 1}});
       return pairs;
     }},
    {"none", [](int n) { return std::vector<std::pair<int, int>>{}; }},
};

void PrintTo(const PermuteCase& c, std::ostream* os) { *os << c.name; }

using PermuteParam = std::tuple<int, size_t, PermuteCase>;

class PermuteTest : public ::testing::TestWithParam<PermuteParam> {};

TEST_P(PermuteTest, DestinationsGetTheirSourceOthersZeros) {
  const int n = std::get<0>(GetParam());
  const size_t size = std::get<1>(GetParam());
  const PermuteCase& c = std::get<2>(GetParam());
  const std::vector<std::pair<int, int>> pairs = c.pairs(n);
  const std::vector<int64_t> devices = ScrambledDevices(n);
  InMemoryHub hub(n + 3);
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(RandomBytes(11, r, size));
  std::vector<Bytes> outputs(n, Bytes(size, 0xee));
  ASSERT_TRUE(AllOk(RunRanks(n, [&](int r) {
    std::unique_ptr<InMemoryPeerTransport> transport = hub.Endpoint(devices[r]);
    PermuteOptions options;
    options.group = Group(devices, r);
    options.tag = Tag(0, "ppermute(axes=('x',))");
    options.pairs = pairs;
    options.input = inputs[r];
    options.output = absl::MakeSpan(outputs[r]);
    options.exchange.piece_bytes = 16;  // 100 bytes: 7 pieces, the last short
    return Permute(options, *transport);
  })));
  EXPECT_EQ(hub.PendingMessages(), 0u);
  std::vector<Bytes> expected(n, Bytes(size, 0));
  for (const auto& [source, destination] : pairs) {
    expected[destination] = inputs[source];
  }
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(outputs[r], expected[r]) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Collectives, PermuteTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Values(0, 1, 100),
                                            ::testing::ValuesIn(kPermuteCases)),
                         [](const ::testing::TestParamInfo<PermuteParam>& i) {
                           return absl::StrCat("n", std::get<0>(i.param),
                                               "_bytes", std::get<1>(i.param),
                                               "_", std::get<2>(i.param).name);
                         });

TEST(PermuteTest, BadPairsFailOnEveryRankBeforeSending) {
  const int n = 4;
  const std::vector<int64_t> devices = ScrambledDevices(n);
  const struct {
    std::vector<std::pair<int, int>> pairs;
    std::vector<absl::string_view> parts;
  } cases[] = {
      {{{0, 1}, {0, 2}}, {"source 0 repeats", "[(0, 1), (0, 2)]", "unique"}},
      {{{0, 1}, {2, 1}}, {"destination 1 repeats", "[(0, 1), (2, 1)]"}},
      {{{0, 4}}, {"rank 4", "[0, 4)", "[(0, 4)]"}},
      {{{1, 2}, {-1, 0}}, {"rank -1", "[(1, 2), (-1, 0)]"}},
  };
  for (const auto& c : cases) {
    InMemoryHub hub(n + 3, absl::Milliseconds(200));
    std::vector<Bytes> outputs(n, Bytes(8));
    const Bytes input(8, 1);
    const std::vector<absl::Status> statuses = RunRanks(n, [&](int r) {
      std::unique_ptr<InMemoryPeerTransport> transport =
          hub.Endpoint(devices[r]);
      PermuteOptions options;
      options.group = Group(devices, r);
      options.tag = Tag(0);
      options.pairs = c.pairs;
      options.input = input;
      options.output = absl::MakeSpan(outputs[r]);
      return Permute(options, *transport);
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(StatusIs(statuses[r], absl::StatusCode::kInvalidArgument,
                           {"PermuteOptions.pairs"}))
          << "rank " << r;
      for (absl::string_view part : c.parts) {
        EXPECT_TRUE(
            StatusIs(statuses[r], absl::StatusCode::kInvalidArgument, {part}));
      }
    }
    EXPECT_EQ(hub.PendingMessages(), 0u);
  }
}

// ---------------------------------------------------------------------------
// AllToAll

using AllToAllParam = std::tuple<int, size_t>;

class AllToAllTest : public ::testing::TestWithParam<AllToAllParam> {};

TEST_P(AllToAllTest, ChunkJGoesToRankJ) {
  const int n = std::get<0>(GetParam());
  const size_t chunk_bytes = std::get<1>(GetParam());
  const std::vector<int64_t> devices = ScrambledDevices(n);
  InMemoryHub hub(n + 3);
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) {
    inputs.push_back(RandomBytes(23, r, n * chunk_bytes));
  }
  std::vector<Bytes> outputs(n, Bytes(n * chunk_bytes, 0xee));
  ASSERT_TRUE(AllOk(RunRanks(n, [&](int r) {
    std::unique_ptr<InMemoryPeerTransport> transport = hub.Endpoint(devices[r]);
    AllToAllOptions options;
    options.group = Group(devices, r);
    options.tag = Tag(0, "all_to_all(axes=('x',))");
    options.input = inputs[r];
    options.output = absl::MakeSpan(outputs[r]);
    options.exchange.piece_bytes = 16;  // 100-byte chunks: 7 pieces
    return AllToAll(options, *transport);
  })));
  EXPECT_EQ(hub.PendingMessages(), 0u);
  for (int j = 0; j < n; ++j) {
    for (int k = 0; k < n; ++k) {
      // Position k of rank j's output is chunk j of rank k's input.
      EXPECT_TRUE(std::equal(outputs[j].begin() + k * chunk_bytes,
                             outputs[j].begin() + (k + 1) * chunk_bytes,
                             inputs[k].begin() + j * chunk_bytes))
          << "rank " << j << ", position " << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Collectives, AllToAllTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Values(0, 1, 3, 100)),
                         [](const ::testing::TestParamInfo<AllToAllParam>& i) {
                           return absl::StrCat("n", std::get<0>(i.param),
                                               "_chunk", std::get<1>(i.param));
                         });

// ---------------------------------------------------------------------------
// Sanity checks: INVALID_ARGUMENT naming the field, before any message.

TEST(SanityChecksTest, NameTheField) {
  InMemoryHub hub(4, absl::Milliseconds(100));
  std::unique_ptr<InMemoryPeerTransport> device1 = hub.Endpoint(1);
  Bytes data(10);
  Bytes big(64);

  AllReduceOptions all_reduce;
  all_reduce.group = Group({0, 1}, 1);
  all_reduce.data = absl::MakeSpan(data);
  EXPECT_TRUE(StatusIs(AllReduce(all_reduce, *device1),
                       absl::StatusCode::kInvalidArgument,
                       {"AllReduceOptions.data has 10 bytes, not a whole "
                        "number of float32 elements"}));
  all_reduce.data = absl::MakeSpan(big);
  all_reduce.piece_bytes = 0;
  EXPECT_TRUE(StatusIs(AllReduce(all_reduce, *device1),
                       absl::StatusCode::kInvalidArgument,
                       {"AllReduceOptions.piece_bytes is 0"}));
  all_reduce.piece_bytes = 64;

  const struct {
    GroupView group;
    absl::string_view message;
  } bad_groups[] = {
      {Group({}, 0), "AllReduceOptions.group.devices is empty"},
      {Group({0, 1}, 2), "AllReduceOptions.group.rank is 2, outside [0, 2)"},
      {Group({0, 1}, -1), "AllReduceOptions.group.rank is -1"},
      {Group({0, 1, 7}, 1),
       "AllReduceOptions.group.devices[2] is device 7, outside the mesh's "
       "devices [0, 4)"},
      {Group({1, 0, 1}, 0),
       "AllReduceOptions.group.devices lists device 1 twice (ranks 0 and 2)"},
      {Group({1, 0}, 1),
       "AllReduceOptions.group.devices[1] (this rank) is device 0, but the "
       "transport speaks for device 1"},
  };
  for (const auto& bad : bad_groups) {
    all_reduce.group = bad.group;
    EXPECT_TRUE(StatusIs(AllReduce(all_reduce, *device1),
                         absl::StatusCode::kInvalidArgument, {bad.message}));
  }

  AllGatherOptions all_gather;
  all_gather.group = Group({0, 1}, 1);
  all_gather.input = absl::MakeConstSpan(data).subspan(0, 4);
  all_gather.output = absl::MakeSpan(data);
  EXPECT_TRUE(StatusIs(AllGather(all_gather, *device1),
                       absl::StatusCode::kInvalidArgument,
                       {"AllGatherOptions.output has 10 bytes, not group size "
                        "2 x input 4 bytes = 8"}));
  all_gather.output = absl::MakeSpan(data).subspan(0, 8);
  all_gather.algorithm = Algorithm::kRecursiveDoubling;
  EXPECT_TRUE(StatusIs(AllGather(all_gather, *device1),
                       absl::StatusCode::kInvalidArgument,
                       {"AllGatherOptions.algorithm"}));

  ReduceScatterOptions reduce_scatter;
  reduce_scatter.group = Group({0, 1}, 1);
  reduce_scatter.input = data;
  reduce_scatter.output = absl::MakeSpan(big).subspan(0, 5);
  EXPECT_TRUE(StatusIs(ReduceScatter(reduce_scatter, *device1),
                       absl::StatusCode::kInvalidArgument,
                       {"ReduceScatterOptions.input has 10 bytes, not 2 equal "
                        "chunks of whole float32 elements"}));
  reduce_scatter.input = absl::MakeConstSpan(big).subspan(0, 16);
  EXPECT_TRUE(StatusIs(ReduceScatter(reduce_scatter, *device1),
                       absl::StatusCode::kInvalidArgument,
                       {"ReduceScatterOptions.output has 5 bytes"}));

  AllToAllOptions all_to_all;
  all_to_all.group = Group({0, 1, 3}, 1);
  all_to_all.input = data;
  all_to_all.output = absl::MakeSpan(data);
  EXPECT_TRUE(StatusIs(AllToAll(all_to_all, *device1),
                       absl::StatusCode::kInvalidArgument,
                       {"AllToAllOptions.input has 10 bytes, not 3 equal "
                        "chunks"}));

  PermuteOptions permute;
  permute.group = Group({0, 1}, 1);
  permute.input = data;
  permute.output = absl::MakeSpan(big);
  EXPECT_TRUE(StatusIs(Permute(permute, *device1),
                       absl::StatusCode::kInvalidArgument,
                       {"PermuteOptions.output has 64 bytes, not the input's "
                        "10"}));
  EXPECT_EQ(hub.PendingMessages(), 0u);
}

// ---------------------------------------------------------------------------
// Failures: mismatched collectives, missing peers, aborts

// One rank calls a different collective. The ranks that receive its
// messages fail with INVALID_ARGUMENT carrying both fingerprints; the test
// then aborts the hub, as the job would, and every other rank is released
// with that status instead of hanging. The hub's 2 s timeout bounds the
// test should the abort fail to release anyone; such a rank would fail with
// DEADLINE_EXCEEDED, which the checks below reject.
TEST(FailureTest, FingerprintMismatchFailsEveryRank) {
  const int n = 4;
  const std::string good = "psum(axes=('x',), float32[64])";
  const std::string bad = "pmax(axes=('x',), float32[64])";
  const std::vector<int64_t> devices = ScrambledDevices(n);
  for (const Algorithm algorithm :
       {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kDirect}) {
    InMemoryHub hub(n + 3, absl::Seconds(2));
    std::vector<Bytes> data(n, Bytes(64 * sizeof(float)));
    const std::vector<absl::Status> statuses = RunRanks(n, [&](int r) {
      std::unique_ptr<InMemoryPeerTransport> transport =
          hub.Endpoint(devices[r]);
      AllReduceOptions options;
      options.group = Group(devices, r);
      options.tag = Tag(7, r == 2 ? bad : good);
      options.data = absl::MakeSpan(data[r]);
      options.algorithm = algorithm;
      options.piece_bytes = 64;
      absl::Status status = AllReduce(options, *transport);
      if (!status.ok()) {
        hub.Abort(absl::AbortedError(
            absl::StrCat("rank ", r, " failed: ", status.message())));
      }
      return status;
    });
    int mismatches = 0;
    for (int r = 0; r < n; ++r) {
      SCOPED_TRACE(absl::StrCat("rank ", r));
      ASSERT_FALSE(statuses[r].ok());
      // Either this rank saw the mismatch itself, or the abort carries it.
      if (statuses[r].code() == absl::StatusCode::kInvalidArgument) {
        ++mismatches;
        EXPECT_TRUE(StatusIs(statuses[r], absl::StatusCode::kInvalidArgument,
                             {"collective mismatch", "device", good, bad}));
      } else {
        EXPECT_TRUE(
            StatusIs(statuses[r], absl::StatusCode::kAborted, {good, bad}));
      }
    }
    EXPECT_GE(mismatches, 1);
  }
}

TEST(FailureTest, MissingPeerTimesOutNamingIt) {
  if (InMemoryHub::UsesSharedMemory()) {
    GTEST_SKIP() << "the heap hub's messages; shm_test checks the channel's";
  }
  InMemoryHub hub(3, absl::Milliseconds(100));
  std::unique_ptr<InMemoryPeerTransport> device2 = hub.Endpoint(2);
  Bytes data(16);
  AllReduceOptions options;
  options.group = Group({2, 0}, 0);
  options.tag = Tag(5, "psum(axes=('y',), int32[4])");
  options.dtype = DType::kInt32;
  options.data = absl::MakeSpan(data);
  EXPECT_TRUE(StatusIs(AllReduce(options, *device2),
                       absl::StatusCode::kDeadlineExceeded,
                       {"from device 0", "seq 5", "psum(axes=('y',), int32[4])",
                        "device 2 waited 100ms"}));
}

TEST(FailureTest, AbortReleasesBlockedAndFutureCalls) {
  // The Recv would give up after a minute by itself; the abort must release
  // it long before.
  InMemoryHub hub(2, absl::Minutes(1));
  std::unique_ptr<InMemoryPeerTransport> device0 = hub.Endpoint(0);
  const Fingerprint fingerprint{1, "psum"};
  const PeerMessage message{0, 0, &fingerprint};
  Bytes out(4);
  absl::Status blocked;
  absl::Notification released;
  std::thread waiter([&] {
    blocked = device0->Recv(1, message, absl::MakeSpan(out));
    released.Notify();
  });
  // Abort only once the Recv really waits.
  WaitUntil(
      [&] { return hub.WaitingReceivers() > 0 || released.HasBeenNotified(); });
  EXPECT_EQ(hub.WaitingReceivers(), 1) << "the Recv never waited";
  hub.Abort(absl::CancelledError("job 12 cancelled"));
  EXPECT_TRUE(released.WaitForNotificationWithTimeout(absl::Seconds(30)))
      << "the abort did not release the waiting Recv";
  waiter.join();
  EXPECT_TRUE(
      StatusIs(blocked, absl::StatusCode::kCancelled, {"job 12 cancelled"}));
  EXPECT_TRUE(StatusIs(device0->Send(1, message, out),
                       absl::StatusCode::kCancelled, {"job 12 cancelled"}));
  hub.Abort(absl::InternalError("second"));  // the first abort wins
  EXPECT_TRUE(StatusIs(device0->Recv(1, message, absl::MakeSpan(out)),
                       absl::StatusCode::kCancelled, {"job 12 cancelled"}));
}

TEST(InMemoryHubTest, ChecksSizesFingerprintsAndDuplicates) {
  if (InMemoryHub::UsesSharedMemory()) {
    GTEST_SKIP() << "the heap hub's messages; shm_test checks the channel's";
  }
  InMemoryHub hub(2, absl::Milliseconds(100));
  std::unique_ptr<InMemoryPeerTransport> device0 = hub.Endpoint(0);
  std::unique_ptr<InMemoryPeerTransport> device1 = hub.Endpoint(1);
  const Fingerprint mine{1, "psum(f32[2])"};
  const Fingerprint theirs{2, "psum(f32[3])"};
  Bytes eight(8), twelve(12);

  ASSERT_TRUE(device0->Send(1, PeerMessage{4, 0, &mine}, twelve).ok());
  EXPECT_TRUE(StatusIs(
      device1->Recv(0, PeerMessage{4, 0, &mine}, absl::MakeSpan(eight)),
      absl::StatusCode::kInvalidArgument,
      {"12 bytes", "expects 8 bytes", "from device 0"}));

  ASSERT_TRUE(device0->Send(1, PeerMessage{4, 1, &theirs}, eight).ok());
  EXPECT_TRUE(StatusIs(
      device1->Recv(0, PeerMessage{4, 1, &mine}, absl::MakeSpan(eight)),
      absl::StatusCode::kInvalidArgument,
      {"device 0 sent 'psum(f32[3])'", "device 1 expects 'psum(f32[2])'"}));

  ASSERT_TRUE(device0->Send(1, PeerMessage{4, 2, &mine}, eight).ok());
  EXPECT_TRUE(StatusIs(device0->Send(1, PeerMessage{4, 2, &mine}, eight),
                       absl::StatusCode::kInternal, {"unreceived"}));
  EXPECT_TRUE(
      device1->Recv(0, PeerMessage{4, 2, &mine}, absl::MakeSpan(eight)).ok());

  EXPECT_TRUE(StatusIs(device0->Send(2, PeerMessage{4, 3, &mine}, eight),
                       absl::StatusCode::kInvalidArgument, {"device 2"}));
  // A message to oneself is allowed.
  ASSERT_TRUE(device0->Send(0, PeerMessage{4, 3, &mine}, eight).ok());
  EXPECT_TRUE(
      device0->Recv(0, PeerMessage{4, 3, &mine}, absl::MakeSpan(eight)).ok());
  EXPECT_EQ(hub.PendingMessages(), 0u);
}

// Two collectives with the same fingerprint, size and algorithm run at the
// same time on every device, plus an all-gather: only seq keeps their
// messages apart.
TEST(ConcurrencyTest, CollectivesWithDifferentSeqDoNotMix) {
  const int n = 4;
  const std::vector<int64_t> devices = ScrambledDevices(n);
  InMemoryHub hub(n + 3);
  const size_t count = 500;
  std::vector<Bytes> inputs_a, inputs_b, outputs_a, outputs_b, gathered;
  Bytes expected_gather;
  for (int r = 0; r < n; ++r) {
    inputs_a.push_back(MakeArray(DType::kInt64, 100, r, count));
    inputs_b.push_back(MakeArray(DType::kInt64, 200, r, count));
    const Bytes block = RandomBytes(300, r, 40);
    gathered.push_back(block);
    expected_gather.insert(expected_gather.end(), block.begin(), block.end());
  }
  outputs_a = inputs_a;
  outputs_b = inputs_b;
  std::vector<Bytes> gather_outputs(n, Bytes(n * 40));
  const CollectiveTag same = Tag(0, "psum(axes=('x',), int64[500])");
  CollectiveTag tag_a = same, tag_b = same;
  tag_b.seq = 1;
  const std::vector<absl::Status> statuses = RunRanks(3 * n, [&](int thread) {
    const int r = thread % n;
    std::unique_ptr<InMemoryPeerTransport> transport = hub.Endpoint(devices[r]);
    if (thread / n == 2) {
      AllGatherOptions options;
      options.group = Group(devices, r);
      options.tag = Tag(2, "all_gather");
      options.input = gathered[r];
      options.output = absl::MakeSpan(gather_outputs[r]);
      options.algorithm = Algorithm::kRing;
      return AllGather(options, *transport);
    }
    const bool a = thread / n == 0;
    AllReduceOptions options;
    options.group = Group(devices, r);
    options.tag = a ? tag_a : tag_b;
    options.dtype = DType::kInt64;
    options.data = absl::MakeSpan(a ? outputs_a[r] : outputs_b[r]);
    options.algorithm = Algorithm::kRing;
    options.piece_bytes = 64;
    return AllReduce(options, *transport);
  });
  ASSERT_TRUE(AllOk(statuses));
  EXPECT_EQ(hub.PendingMessages(), 0u);
  EXPECT_TRUE(BitwiseIdentical(outputs_a));
  EXPECT_TRUE(BitwiseIdentical(outputs_b));
  EXPECT_TRUE(MatchesReference(DType::kInt64, inputs_a, 0, ReduceOp::kSum,
                               outputs_a[0]));
  EXPECT_TRUE(MatchesReference(DType::kInt64, inputs_b, 0, ReduceOp::kSum,
                               outputs_b[0]));
  for (int r = 0; r < n; ++r) EXPECT_EQ(gather_outputs[r], expected_gather);
}

}  // namespace
}  // namespace shardmap
