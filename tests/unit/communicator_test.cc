// Tests of the Communicator (worker/collectives/communicator.h): jax.lax
// collective semantics (docs/SEMANTICS.md, section 5) over the byte-level
// algorithms.
//
// Every device of a mesh is a thread with its own Communicator on one
// InMemoryHub and calls the collective on its own input. Every device's
// output is compared with a single-process reference written here from the
// definitions, independently of communicator.cc: the group of a device is
// the devices agreeing on every other mesh coordinate, ranked row-major over
// the named axes in the order named; results come from plain loops over
// multi-indices. Replicated results (psum, pmean, pmax, pmin, all_gather)
// must also be bitwise identical on every member of a group, since
// replicas are compared by digest.
#include "worker/collectives/communicator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/dtype.h"
#include "core/mesh.h"
#include "core/tensor.h"
#include "tests/fakes/in_memory_peer_transport.h"
#include "tests/unit/status_matchers.h"
#include "tests/unit/test_arrays.h"
#include "tests/unit/wait_until.h"

namespace shardmap {
namespace {

using Index = std::vector<int64_t>;
using json = nlohmann::json;

// ---------------------------------------------------------------------------
// Arrays: element types, test data, multi-indices

template <typename T>
Tensor FromValues(DType dtype, const Shape& shape, const std::vector<T>& v) {
  Tensor t(dtype, shape);
  EXPECT_EQ(static_cast<int64_t>(v.size()), t.num_elements());
  std::memcpy(t.data(), v.data(), v.size() * sizeof(T));
  return t;
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data_as<T>(), t.data_as<T>() + t.num_elements());
}

int64_t Flat(const Shape& shape, const Index& idx) {
  int64_t f = 0;
  for (size_t i = 0; i < shape.size(); ++i) f = f * shape[i] + idx[i];
  return f;
}

// Calls f(idx) for every multi-index of `shape`, row-major.
void ForEachIndex(const Shape& shape,
                  const std::function<void(const Index&)>& f) {
  if (NumElements(shape) == 0) return;
  Index idx(shape.size(), 0);
  for (;;) {
    f(idx);
    int i = static_cast<int>(shape.size()) - 1;
    for (; i >= 0; --i) {
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
    }
    if (i < 0) return;
  }
}

Index Erase(Index v, int64_t pos) {
  v.erase(v.begin() + pos);
  return v;
}

Index Insert(Index v, int64_t pos, int64_t value) {
  v.insert(v.begin() + pos, value);
  return v;
}

void CopyElement(const Tensor& from, const Index& from_idx, Tensor& to,
                 const Index& to_idx) {
  const size_t item = ItemSize(from.dtype());
  std::memcpy(to.data() + Flat(to.shape(), to_idx) * item,
              from.data() + Flat(from.shape(), from_idx) * item, item);
}

std::string ShapeText(const Shape& s) {
  return absl::StrCat("[", absl::StrJoin(s, ","), "]");
}

// ---------------------------------------------------------------------------
// Groups, from the definition (docs/SEMANTICS.md, section 5, group order)

Mesh MakeMesh(const std::string& text) {
  absl::StatusOr<Mesh> mesh = Mesh::Parse(text);
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  return *std::move(mesh);
}

Index CoordsOf(const Mesh& mesh, int64_t device) {
  Index c(mesh.num_axes());
  for (int a = mesh.num_axes() - 1; a >= 0; --a) {
    c[a] = device % mesh.axes()[a].size;
    device /= mesh.axes()[a].size;
  }
  return c;
}

struct RefGroup {
  std::vector<int64_t> members;  // device of each rank
  int64_t rank = -1;             // of the device asked about
};

RefGroup GroupOf(const Mesh& mesh, const Axes& axes, int64_t device) {
  std::vector<int> named;
  for (const std::string& name : axes) {
    for (int a = 0; a < mesh.num_axes(); ++a) {
      if (mesh.axes()[a].name == name) named.push_back(a);
    }
  }
  const Index mine = CoordsOf(mesh, device);
  RefGroup g;
  for (int64_t e = 0; e < mesh.num_devices(); ++e) {
    const Index c = CoordsOf(mesh, e);
    bool same = true;
    for (int a = 0; a < mesh.num_axes(); ++a) {
      if (std::find(named.begin(), named.end(), a) == named.end() &&
          c[a] != mine[a]) {
        same = false;
      }
    }
    if (!same) continue;
    int64_t r = 0;
    for (int a : named) r = r * mesh.axes()[a].size + c[a];
    if (static_cast<int64_t>(g.members.size()) <= r) {
      g.members.resize(r + 1, -1);
    }
    g.members[r] = e;
    if (e == device) g.rank = r;
  }
  return g;
}

int64_t SizeOf(const Mesh& mesh, const Axes& axes) {
  return static_cast<int64_t>(GroupOf(mesh, axes, 0).members.size());
}

// ---------------------------------------------------------------------------
// Cases: one collective call, made by every device on its own input

enum class Op {
  kPsum,
  kPmean,
  kPmax,
  kPmin,
  kAllGather,
  kPsumScatter,
  kPpermute,
  kAllToAll
};

const char* OpName(Op op) {
  switch (op) {
    case Op::kPsum:
      return "psum";
    case Op::kPmean:
      return "pmean";
    case Op::kPmax:
      return "pmax";
    case Op::kPmin:
      return "pmin";
    case Op::kAllGather:
      return "all_gather";
    case Op::kPsumScatter:
      return "psum_scatter";
    case Op::kPpermute:
      return "ppermute";
    case Op::kAllToAll:
      return "all_to_all";
  }
  return "?";
}

struct Case {
  Op op = Op::kPsum;
  Axes axes;
  DType dtype = DType::kFloat32;
  Shape shape;
  int64_t axis = 0;    // all_gather axis, scatter_dimension, split_axis
  int64_t concat = 0;  // all_to_all concat_axis
  bool tiled = false;
  json perm = json::array();

  std::string Label() const {
    return absl::StrCat(OpName(op), "(axes=", absl::StrJoin(axes, ","), ", ",
                        DTypeName(dtype), ShapeText(shape), ", axis=", axis,
                        ", concat=", concat, ", tiled=", tiled,
                        ", perm=", perm.dump(), ")");
  }
};

absl::StatusOr<Tensor> Call(Communicator& comm, const Case& c,
                            const Tensor& x) {
  switch (c.op) {
    case Op::kPsum:
      return comm.Psum(x, c.axes);
    case Op::kPmean:
      return comm.Pmean(x, c.axes);
    case Op::kPmax:
      return comm.Pmax(x, c.axes);
    case Op::kPmin:
      return comm.Pmin(x, c.axes);
    case Op::kAllGather:
      return comm.AllGather(x, c.axes, c.axis, c.tiled);
    case Op::kPsumScatter:
      return comm.PsumScatter(x, c.axes, c.axis, c.tiled);
    case Op::kPpermute:
      return comm.Ppermute(x, c.axes, c.perm);
    case Op::kAllToAll:
      return comm.AllToAll(x, c.axes, c.axis, c.concat, c.tiled);
  }
  return absl::InternalError("unknown op");
}

// ---------------------------------------------------------------------------
// Harness: one thread per device, one Communicator each

struct RunOptions {
  Communicator::Options comm;
  absl::Duration recv_timeout = absl::Seconds(5);
  // On a device's first failure, abort the hub with it, so that no peer
  // waits for messages that will never come.
  bool abort_on_error = true;
  // Called on each device's thread before its first collective, with the
  // hub that carries the messages.
  std::function<void(int64_t device, const InMemoryHub& hub)> before;
};

struct RunResult {
  // results[device][call]
  std::vector<std::vector<absl::StatusOr<Tensor>>> results;
  size_t pending = 0;  // messages left unreceived in the hub
};

using DeviceCall =
    std::function<absl::StatusOr<Tensor>(Communicator&, int64_t device, int)>;

RunResult RunOnMesh(const Mesh& mesh, int num_calls, const DeviceCall& call,
                    const RunOptions& options = {}) {
  const int64_t n = mesh.num_devices();
  InMemoryHub hub(n, options.recv_timeout);
  RunResult run;
  run.results.resize(n);
  std::vector<std::thread> threads;
  for (int64_t d = 0; d < n; ++d) {
    threads.emplace_back([&, d] {
      std::unique_ptr<InMemoryPeerTransport> endpoint = hub.Endpoint(d);
      Communicator comm(&mesh, d, endpoint.get(), options.comm);
      if (options.before) options.before(d, hub);
      for (int i = 0; i < num_calls; ++i) {
        absl::StatusOr<Tensor> r = call(comm, d, i);
        if (!r.ok() && options.abort_on_error) hub.Abort(r.status());
        run.results[d].push_back(std::move(r));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  run.pending = hub.PendingMessages();
  return run;
}

// ---------------------------------------------------------------------------
// Reference results

::testing::AssertionResult SameTensor(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    return ::testing::AssertionFailure()
           << "got " << ShapeString(got.dtype(), got.shape()) << ", want "
           << ShapeString(want.dtype(), want.shape());
  }
  const size_t item = ItemSize(got.dtype());
  for (int64_t e = 0; e < got.num_elements(); ++e) {
    if (std::memcmp(got.data() + e * item, want.data() + e * item, item) != 0) {
      return ::testing::AssertionFailure()
             << "element " << e << " of "
             << ShapeString(got.dtype(), got.shape()) << " differs";
    }
  }
  return ::testing::AssertionSuccess();
}

// Checks that element e of `got` is the reduction over `inputs` (in rank
// order) of their element src[e]. Floating sums within rounding of the
// exact sum; everything else exact (integer sums wrap around; an integer
// pmean is float32(wrapped sum) / float32(n) for int32, float64(wrapped
// sum) / float64(n) for int64, rounded once).
::testing::AssertionResult CheckReduced(Op op,
                                        const std::vector<const Tensor*>& in,
                                        const Tensor& got,
                                        const std::vector<int64_t>& src) {
  const DType dtype = in[0]->dtype();
  const bool int_mean = op == Op::kPmean && !IsFloating(dtype);
  const DType want_dtype = !int_mean                ? dtype
                           : dtype == DType::kInt64 ? DType::kFloat64
                                                    : DType::kFloat32;
  if (got.dtype() != want_dtype) {
    return ::testing::AssertionFailure() << "dtype " << DTypeName(got.dtype())
                                         << ", want " << DTypeName(want_dtype);
  }
  if (got.num_elements() != static_cast<int64_t>(src.size())) {
    return ::testing::AssertionFailure()
           << got.num_elements() << " elements, want " << src.size();
  }
  const int64_t n = static_cast<int64_t>(in.size());
  return VisitDType(dtype, [&](auto zero) -> ::testing::AssertionResult {
    using T = decltype(zero);
    for (size_t e = 0; e < src.size(); ++e) {
      const int64_t j = src[e];
      if (op == Op::kPmax || op == Op::kPmin) {
        T m = in[0]->data_as<T>()[j];
        for (int64_t r = 1; r < n; ++r) {
          const T v = in[r]->data_as<T>()[j];
          m = op == Op::kPmax ? std::max(m, v) : std::min(m, v);
        }
        if (got.data_as<T>()[e] != m) {
          return ::testing::AssertionFailure()
                 << "element " << e << " is " << got.data_as<T>()[e]
                 << ", want " << m;
        }
      } else if constexpr (std::is_floating_point_v<T>) {
        double sum = 0, sum_abs = 0;
        for (int64_t r = 0; r < n; ++r) {
          const double v = in[r]->data_as<T>()[j];
          sum += v;
          sum_abs += std::fabs(v);
        }
        double want = sum, scale = sum_abs;
        if (op == Op::kPmean) {
          want /= static_cast<double>(n);
          scale /= static_cast<double>(n);
        }
        const double tol = (n + 2) * std::numeric_limits<T>::epsilon() * scale +
                           std::numeric_limits<T>::denorm_min();
        const double g = got.data_as<T>()[e];
        if (!(std::fabs(g - want) <= tol)) {
          return ::testing::AssertionFailure()
                 << "element " << e << " is " << g << ", want " << want
                 << " within " << tol;
        }
      } else {
        using U = std::make_unsigned_t<T>;
        U acc = 0;
        for (int64_t r = 0; r < n; ++r) {
          acc += static_cast<U>(in[r]->data_as<T>()[j]);
        }
        const T sum = static_cast<T>(acc);
        if (int_mean && dtype == DType::kInt64) {
          const double want = static_cast<double>(sum) / static_cast<double>(n);
          if (got.data_as<double>()[e] != want) {
            return ::testing::AssertionFailure()
                   << "element " << e << " is " << got.data_as<double>()[e]
                   << ", want " << want << " (sum " << sum << ")";
          }
        } else if (int_mean) {
          const float want = static_cast<float>(sum) / static_cast<float>(n);
          if (got.data_as<float>()[e] != want) {
            return ::testing::AssertionFailure()
                   << "element " << e << " is " << got.data_as<float>()[e]
                   << ", want " << want << " (sum " << sum << ")";
          }
        } else if (got.data_as<T>()[e] != sum) {
          return ::testing::AssertionFailure()
                 << "element " << e << " is " << got.data_as<T>()[e]
                 << ", want " << sum;
        }
      }
    }
    return ::testing::AssertionSuccess();
  });
}

// The shape of `x`'s result on a member of a group of n.
Shape ResultShape(const Case& c, int64_t n) {
  Shape s = c.shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  switch (c.op) {
    case Op::kAllGather:
      if (c.tiled) {
        s[c.axis < 0 ? c.axis + rank : c.axis] *= n;
      } else {
        s.insert(s.begin() + (c.axis < 0 ? c.axis + rank + 1 : c.axis), n);
      }
      break;
    case Op::kPsumScatter: {
      const int64_t d = c.axis < 0 ? c.axis + rank : c.axis;
      if (c.tiled) {
        s[d] /= n;
      } else {
        s.erase(s.begin() + d);
      }
      break;
    }
    case Op::kAllToAll: {
      const int64_t sp = c.axis < 0 ? c.axis + rank : c.axis;
      const int64_t cc = c.concat < 0 ? c.concat + rank : c.concat;
      if (c.tiled) {
        s[sp] /= n;
        s[cc] *= n;
      } else {
        s.erase(s.begin() + sp);
        s.insert(s.begin() + cc, n);
      }
      break;
    }
    default:
      break;
  }
  return s;
}

// The expected result of a data-movement collective for the member of rank
// `rank`, from the inputs of its group in rank order.
Tensor MovedReference(const Case& c, const std::vector<const Tensor*>& in,
                      int64_t rank) {
  const int64_t n = static_cast<int64_t>(in.size());
  const Shape& s = c.shape;
  const int64_t R = static_cast<int64_t>(s.size());
  Tensor out(c.dtype, ResultShape(c, n));
  switch (c.op) {
    case Op::kAllGather: {
      if (c.tiled) {
        const int64_t k = c.axis < 0 ? c.axis + R : c.axis;
        ForEachIndex(out.shape(), [&](const Index& o) {
          Index i = o;
          i[k] = o[k] % s[k];
          CopyElement(*in[o[k] / s[k]], i, out, o);
        });
      } else {
        const int64_t k = c.axis < 0 ? c.axis + R + 1 : c.axis;
        ForEachIndex(out.shape(), [&](const Index& o) {
          CopyElement(*in[o[k]], Erase(o, k), out, o);
        });
      }
      break;
    }
    case Op::kPpermute: {
      for (const json& p : c.perm) {
        if (p[1].get<int64_t>() == rank) {
          ForEachIndex(s, [&](const Index& i) {
            CopyElement(*in[p[0].get<int64_t>()], i, out, i);
          });
        }
      }
      break;  // zeros when nobody sends here
    }
    case Op::kAllToAll: {
      const int64_t sp = c.axis < 0 ? c.axis + R : c.axis;
      const int64_t cc = c.concat < 0 ? c.concat + R : c.concat;
      if (c.tiled) {
        // Chunk j of x_k (along split) lands as block k along concat on j.
        const int64_t chunk_split = s[sp] / n;
        const int64_t chunk_concat = sp == cc ? chunk_split : s[cc];
        ForEachIndex(out.shape(), [&](const Index& o) {
          const int64_t k = o[cc] / chunk_concat;
          Index i = o;
          i[cc] = o[cc] % chunk_concat;
          i[sp] += rank * chunk_split;
          CopyElement(*in[k], i, out, o);
        });
      } else {
        // out_j[..., k (at concat), ...] = x_k[..., j (at split), ...]
        ForEachIndex(out.shape(), [&](const Index& o) {
          CopyElement(*in[o[cc]], Insert(Erase(o, cc), sp, rank), out, o);
        });
      }
      break;
    }
    default:
      ADD_FAILURE() << "not a data-movement op: " << c.Label();
  }
  return out;
}

// For psum_scatter, the element of the group sum each output element is.
std::vector<int64_t> ScatterSources(const Case& c, int64_t n, int64_t rank) {
  const int64_t R = static_cast<int64_t>(c.shape.size());
  const int64_t d = c.axis < 0 ? c.axis + R : c.axis;
  std::vector<int64_t> src;
  ForEachIndex(ResultShape(c, n), [&](const Index& o) {
    Index i = c.tiled ? o : Insert(o, d, rank);
    if (c.tiled) i[d] += rank * (c.shape[d] / n);
    src.push_back(Flat(c.shape, i));
  });
  return src;
}

bool Replicated(Op op) {
  return op == Op::kPsum || op == Op::kPmean || op == Op::kPmax ||
         op == Op::kPmin || op == Op::kAllGather;
}

// Checks every device's result of case `c` given every device's input.
::testing::AssertionResult VerifyCase(const Mesh& mesh, const Case& c,
                                      const std::vector<Tensor>& inputs,
                                      const std::vector<const Tensor*>& out) {
  for (int64_t d = 0; d < mesh.num_devices(); ++d) {
    const RefGroup g = GroupOf(mesh, c.axes, d);
    const int64_t n = static_cast<int64_t>(g.members.size());
    std::vector<const Tensor*> in;
    for (int64_t e : g.members) in.push_back(&inputs[e]);
    const Tensor& got = *out[d];
    const Shape want_shape = ResultShape(c, n);
    if (got.shape() != want_shape) {
      return ::testing::AssertionFailure()
             << "device " << d << ": shape " << ShapeText(got.shape())
             << ", want " << ShapeText(want_shape);
    }
    ::testing::AssertionResult ok = ::testing::AssertionSuccess();
    switch (c.op) {
      case Op::kPsum:
      case Op::kPmean:
      case Op::kPmax:
      case Op::kPmin: {
        std::vector<int64_t> identity(NumElements(c.shape));
        for (size_t e = 0; e < identity.size(); ++e) identity[e] = e;
        ok = CheckReduced(c.op, in, got, identity);
        break;
      }
      case Op::kPsumScatter:
        ok = CheckReduced(Op::kPsum, in, got, ScatterSources(c, n, g.rank));
        break;
      default:
        ok = SameTensor(got, MovedReference(c, in, g.rank));
    }
    if (!ok) {
      return ::testing::AssertionFailure()
             << "device " << d << " (rank " << g.rank << " of " << n
             << "): " << ok.message();
    }
    if (Replicated(c.op)) {
      const int64_t first = g.members[0];
      if (!SameTensor(got, *out[first])) {
        return ::testing::AssertionFailure()
               << "device " << d << "'s result is not bitwise identical to "
               << "device " << first << "'s, in the same group";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

uint64_t Seed(size_t call, int64_t device) {
  return Mix((static_cast<uint64_t>(call) << 16) ^ device);
}

// Runs `cases` back to back on every device of `mesh` (each device on its
// own input) and checks every result against the reference.
void RunAndVerify(const std::string& mesh_text, const std::vector<Case>& cases,
                  const RunOptions& options = {}) {
  SCOPED_TRACE(mesh_text);
  const Mesh mesh = MakeMesh(mesh_text);
  const int64_t num_devices = mesh.num_devices();
  std::vector<std::vector<Tensor>> inputs(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    for (int64_t d = 0; d < num_devices; ++d) {
      inputs[i].push_back(Input(cases[i].dtype, cases[i].shape, Seed(i, d)));
    }
  }
  RunResult run = RunOnMesh(
      mesh, static_cast<int>(cases.size()),
      [&](Communicator& comm, int64_t d, int i) {
        return Call(comm, cases[i], inputs[i][d]);
      },
      options);
  int failures = 0;
  for (size_t i = 0; i < cases.size() && failures < 5; ++i) {
    std::vector<const Tensor*> out;
    bool all_ok = true;
    for (int64_t d = 0; d < num_devices; ++d) {
      const absl::StatusOr<Tensor>& r = run.results[d][i];
      if (!r.ok()) {
        ADD_FAILURE() << cases[i].Label() << " on device " << d << ": "
                      << r.status();
        all_ok = false;
        break;
      }
      out.push_back(&*r);
    }
    if (!all_ok) {
      ++failures;
      continue;
    }
    ::testing::AssertionResult ok = VerifyCase(mesh, cases[i], inputs[i], out);
    if (!ok) {
      ADD_FAILURE() << cases[i].Label() << ": " << ok.message();
      ++failures;
    }
  }
  EXPECT_EQ(run.pending, 0u) << "messages left unreceived";
}

// The meshes and axes the tests sweep: group sizes 1, 2, 3, 4 and 8,
// tuples in and out of mesh order.
struct Layout {
  std::string mesh;
  std::vector<Axes> axes;
};

const std::vector<Layout>& Layouts() {
  static const auto* layouts = new std::vector<Layout>{
      {"x=3", {{"x"}}},
      {"x=2,y=4", {{"x"}, {"y"}, {"x", "y"}, {"y", "x"}}},
      {"x=2,y=2,z=2",
       {{"z"},
        {"x", "z"},
        {"z", "x"},
        {"z", "y"},
        {"x", "y", "z"},
        {"z", "y", "x"},
        {"y", "x", "z"}}},
      {"x=1,y=4", {{"x"}, {"y"}, {"x", "y"}, {"y", "x"}}},
  };
  return *layouts;
}

// Runs, per mesh, the cases make_cases(mesh, axes, n) gives for every
// axes of the layout, all back to back on the same communicators.
void SweepLayouts(
    const std::function<std::vector<Case>(const Axes&, int64_t n)>& make_cases,
    const RunOptions& options = {}) {
  for (const Layout& layout : Layouts()) {
    const Mesh mesh = MakeMesh(layout.mesh);
    std::vector<Case> cases;
    for (const Axes& axes : layout.axes) {
      for (Case& c : make_cases(axes, SizeOf(mesh, axes))) {
        c.axes = axes;
        cases.push_back(std::move(c));
      }
    }
    RunAndVerify(layout.mesh, cases, options);
  }
}

const std::vector<Shape>& ReductionShapes() {
  static const auto* shapes = new std::vector<Shape>{
      {}, {1}, {5}, {0}, {2, 3}, {3, 0}, {2, 1, 3}, {2, 3, 1, 2}};
  return *shapes;
}

std::vector<Case> ReductionCases(Op op) {
  std::vector<Case> cases;
  for (DType dtype : kAllDTypes) {
    for (const Shape& shape : ReductionShapes()) {
      Case c;
      c.op = op;
      c.dtype = dtype;
      c.shape = shape;
      cases.push_back(c);
    }
  }
  return cases;
}

// ---------------------------------------------------------------------------
// Groups, axis_index, axis_size

TEST(CommunicatorTest, GroupAxisIndexAndAxisSizeFollowTheNamedOrder) {
  for (const Layout& layout : Layouts()) {
    const Mesh mesh = MakeMesh(layout.mesh);
    InMemoryHub hub(mesh.num_devices());
    for (const Axes& axes : layout.axes) {
      for (int64_t d = 0; d < mesh.num_devices(); ++d) {
        SCOPED_TRACE(absl::StrCat(layout.mesh, " axes ",
                                  absl::StrJoin(axes, ","), " device ", d));
        auto endpoint = hub.Endpoint(d);
        Communicator comm(&mesh, d, endpoint.get(), {});
        const RefGroup want = GroupOf(mesh, axes, d);
        absl::StatusOr<GroupView> g = comm.Group(axes);
        ASSERT_TRUE(g.ok()) << g.status();
        EXPECT_EQ(g->devices, want.members);
        EXPECT_EQ(g->rank, want.rank);
        absl::StatusOr<int64_t> index = comm.AxisIndex(axes);
        ASSERT_TRUE(index.ok()) << index.status();
        EXPECT_EQ(*index, want.rank);
        absl::StatusOr<int64_t> size = comm.AxisSize(axes);
        ASSERT_TRUE(size.ok()) << size.status();
        EXPECT_EQ(*size, static_cast<int64_t>(want.members.size()));
      }
    }
  }
}

// docs/SEMANTICS.md, worked examples: axis_index(('i','j')) on a (4, 2)
// mesh is arange(8).reshape(4, 2); over ('j','i') the first named axis is
// major.
TEST(CommunicatorTest, AxisIndexOfTuplesInBothOrders) {
  const Mesh mesh = MakeMesh("i=4,j=2");
  InMemoryHub hub(mesh.num_devices());
  for (int64_t d = 0; d < 8; ++d) {
    auto endpoint = hub.Endpoint(d);
    Communicator comm(&mesh, d, endpoint.get(), {});
    const int64_t i = d / 2, j = d % 2;
    EXPECT_EQ(*comm.AxisIndex({"i", "j"}), d);
    EXPECT_EQ(*comm.AxisIndex({"j", "i"}), j * 4 + i);
    EXPECT_EQ(*comm.AxisIndex({"i"}), i);
    EXPECT_EQ(*comm.AxisIndex({"j"}), j);
    EXPECT_EQ(*comm.AxisSize({"i", "j"}), 8);
    EXPECT_EQ(*comm.AxisSize({"j", "i"}), 8);
    EXPECT_EQ(*comm.AxisSize({"j"}), 2);
    // The group over ('j', 'i') lists devices j-major.
    absl::StatusOr<GroupView> g = comm.Group({"j", "i"});
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->devices, (std::vector<int64_t>{0, 2, 4, 6, 1, 3, 5, 7}));
  }
  // A 3-d mesh, a tuple of two axes out of mesh order.
  const Mesh cube = MakeMesh("x=2,y=2,z=2");
  InMemoryHub cube_hub(8);
  for (int64_t d = 0; d < 8; ++d) {
    auto endpoint = cube_hub.Endpoint(d);
    Communicator comm(&cube, d, endpoint.get(), {});
    const int64_t x = d / 4, y = d / 2 % 2, z = d % 2;
    EXPECT_EQ(*comm.AxisIndex({"z", "y"}), z * 2 + y);
    EXPECT_EQ(*comm.AxisIndex({"z", "x", "y"}), z * 4 + x * 2 + y);
    absl::StatusOr<GroupView> g = comm.Group({"z", "y"});
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->devices,
              (std::vector<int64_t>{x * 4, x * 4 + 2, x * 4 + 1, x * 4 + 3}));
  }
}

TEST(CommunicatorTest, AxisIndexAndAxisSizeRejectBadAxes) {
  const Mesh mesh = MakeMesh("x=2,y=4");
  InMemoryHub hub(mesh.num_devices());
  auto endpoint = hub.Endpoint(3);
  Communicator comm(&mesh, 3, endpoint.get(), {});
  EXPECT_TRUE(StatusIs(comm.AxisIndex({"w"}).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"axis_index", "unbound axis name: 'w'", "('x', 'y')"}));
  EXPECT_TRUE(StatusIs(comm.AxisSize({"y", "q"}).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"axis_size", "unbound axis name: 'q'"}));
  EXPECT_TRUE(StatusIs(comm.AxisIndex({"y", "y"}).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"axis_index", "'y' appears twice"}));
  EXPECT_EQ(*comm.AxisSize({}), 1);  // JAX's axis_size(())
  EXPECT_EQ(*comm.AxisIndex({}), 0);
  EXPECT_TRUE(StatusIs(comm.Group({"x", "x"}, "my_op").status(),
                       absl::StatusCode::kInvalidArgument,
                       {"my_op", "appears twice"}));
}

// ---------------------------------------------------------------------------
// Reductions

TEST(CommunicatorTest, PsumMatchesReference) {
  SweepLayouts([](const Axes&, int64_t) { return ReductionCases(Op::kPsum); });
}

TEST(CommunicatorTest, PmeanMatchesReference) {
  SweepLayouts([](const Axes&, int64_t) { return ReductionCases(Op::kPmean); });
}

TEST(CommunicatorTest, PmaxMatchesReference) {
  SweepLayouts([](const Axes&, int64_t) { return ReductionCases(Op::kPmax); });
}

TEST(CommunicatorTest, PminMatchesReference) {
  SweepLayouts([](const Axes&, int64_t) { return ReductionCases(Op::kPmin); });
}

// docs/SEMANTICS.md, worked examples (JAX's test_pmax / test_pmin):
// arange(8.) over 4 devices.
TEST(CommunicatorTest, PmaxAndPminOfArange) {
  const Mesh mesh = MakeMesh("i=4");
  RunResult run = RunOnMesh(mesh, 2, [](Communicator& comm, int64_t d, int i) {
    const float base = 2.0f * d;
    Tensor x = FromValues<float>(DType::kFloat32, {2}, {base, base + 1});
    return i == 0 ? comm.Pmax(x, {"i"}) : comm.Pmin(x, {"i"});
  });
  for (int64_t d = 0; d < 4; ++d) {
    ASSERT_TRUE(run.results[d][0].ok()) << run.results[d][0].status();
    ASSERT_TRUE(run.results[d][1].ok()) << run.results[d][1].status();
    EXPECT_EQ(Values<float>(*run.results[d][0]), (std::vector<float>{6, 7}));
    EXPECT_EQ(Values<float>(*run.results[d][1]), (std::vector<float>{0, 1}));
  }
}

// JAX's empty axis tuple: psum(x, ()) is x, and every other collective
// acts on a group of one device.
TEST(CommunicatorTest, EmptyAxesAreAGroupOfOne) {
  const Mesh mesh = MakeMesh("x=2");
  RunResult run = RunOnMesh(mesh, 7, [](Communicator& comm, int64_t d, int i) {
    Tensor x = FromValues<float>(DType::kFloat32, {2}, {1.0f + d, 5.0f});
    switch (i) {
      case 0:
        return comm.Psum(x, {});
      case 1:
        return comm.Pmax(x, {});
      case 2:
        return comm.AllGather(x, {}, 0, /*tiled=*/true);
      case 3:
        return comm.PsumScatter(x, {}, 0, /*tiled=*/true);
      case 4:
        return comm.Ppermute(x, {}, nlohmann::json::parse("[[0, 0]]"));
      case 5:
        return comm.AllToAll(x, {}, 0, 0, /*tiled=*/true);
      default:
        return comm.AllGather(x, {}, 0, /*tiled=*/false);
    }
  });
  for (int64_t d = 0; d < 2; ++d) {
    const std::vector<float> own = {1.0f + d, 5.0f};
    for (int i = 0; i < 7; ++i) {
      ASSERT_TRUE(run.results[d][i].ok())
          << i << ": " << run.results[d][i].status();
      EXPECT_EQ(Values<float>(*run.results[d][i]), own) << "call " << i;
    }
    EXPECT_EQ(run.results[d][6]->shape(), (Shape{1, 2}));
  }
}

TEST(CommunicatorTest, IntegerPsumWrapsAroundAndPmeanIsInexact) {
  const Mesh mesh = MakeMesh("x=2,y=4");
  constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  RunResult run = RunOnMesh(mesh, 5, [&](Communicator& comm, int64_t, int i) {
    switch (i) {
      case 0:
        return comm.Psum(FromValues<int32_t>(DType::kInt32, {2}, {kMax32, -1}),
                         {"y"});
      case 1:
        return comm.Psum(
            FromValues<int64_t>(DType::kInt64, {2}, {kMax64, kMin64}), {"y"});
      case 2:
        return comm.Pmean(FromValues<int32_t>(DType::kInt32, {}, {kMax32}),
                          {"y"});
      case 3:
        return comm.Pmean(FromValues<int32_t>(DType::kInt32, {2}, {3, -7}),
                          {"x", "y"});
      default:
        return comm.Pmean(FromValues<int64_t>(DType::kInt64, {}, {5}), {"y"});
    }
  });
  ASSERT_EQ(run.pending, 0u);
  for (int64_t d = 0; d < 8; ++d) {
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(run.results[d][i].ok()) << run.results[d][i].status();
    }
    // 4 * INT32_MAX wraps to -4; 4 * -1 = -4.
    EXPECT_EQ(Values<int32_t>(*run.results[d][0]),
              (std::vector<int32_t>{-4, -4}));
    EXPECT_EQ(Values<int64_t>(*run.results[d][1]),
              (std::vector<int64_t>{-4, 0}));
    // The mean of the wrapped sum, as JAX computes it (sum first).
    EXPECT_EQ(run.results[d][2]->dtype(), DType::kFloat32);
    EXPECT_EQ(Values<float>(*run.results[d][2]), (std::vector<float>{-1.0f}));
    EXPECT_EQ(Values<float>(*run.results[d][3]),
              (std::vector<float>{3.0f, -7.0f}));
    // int64's mean is float64 (the float of the integer's width).
    EXPECT_EQ(run.results[d][4]->dtype(), DType::kFloat64);
    EXPECT_EQ(Values<double>(*run.results[d][4]), (std::vector<double>{5.0}));
  }
}

// int64 -> float64 rounds once, as numpy converts: 2^60 + 2^7 + 1 is
// closer to 2^60 + 2^8 than to 2^60 (doubles there are 2^8 apart).
TEST(CommunicatorTest, Int64PmeanIsFloat64RoundedOnce) {
  const Mesh mesh = MakeMesh("x=1,y=2");
  const int64_t v = (int64_t{1} << 60) + (int64_t{1} << 7) + 1;
  RunResult run = RunOnMesh(mesh, 1, [&](Communicator& comm, int64_t, int) {
    return comm.Pmean(FromValues<int64_t>(DType::kInt64, {}, {v}), {"x"});
  });
  for (int64_t d = 0; d < 2; ++d) {
    ASSERT_TRUE(run.results[d][0].ok()) << run.results[d][0].status();
    EXPECT_EQ(run.results[d][0]->dtype(), DType::kFloat64);
    EXPECT_EQ(Values<double>(*run.results[d][0]),
              (std::vector<double>{static_cast<double>((int64_t{1} << 60) +
                                                       (int64_t{1} << 8))}));
  }
}

TEST(CommunicatorTest, FloatPmeanKeepsItsDtype) {
  const Mesh mesh = MakeMesh("x=3");
  RunResult run = RunOnMesh(mesh, 2, [](Communicator& comm, int64_t d, int i) {
    return i == 0 ? comm.Pmean(FromValues<float>(DType::kFloat32, {},
                                                 {static_cast<float>(d)}),
                               {"x"})
                  : comm.Pmean(FromValues<double>(DType::kFloat64, {1},
                                                  {static_cast<double>(d)}),
                               {"x"});
  });
  for (int64_t d = 0; d < 3; ++d) {
    ASSERT_TRUE(run.results[d][0].ok()) << run.results[d][0].status();
    ASSERT_TRUE(run.results[d][1].ok()) << run.results[d][1].status();
    EXPECT_EQ(run.results[d][0]->dtype(), DType::kFloat32);
    EXPECT_EQ(Values<float>(*run.results[d][0]), (std::vector<float>{1.0f}));
    EXPECT_EQ(run.results[d][1]->dtype(), DType::kFloat64);
    EXPECT_EQ(Values<double>(*run.results[d][1]), (std::vector<double>{1.0}));
  }
}

// Arrays past the algorithms' small-message threshold (64 KiB), with an
// element count no group size divides, under every algorithm.
TEST(CommunicatorTest, LargeReductionsUnderEveryAlgorithm) {
  for (Algorithm algorithm :
       {Algorithm::kAuto, Algorithm::kRing, Algorithm::kRecursiveDoubling,
        Algorithm::kDirect}) {
    SCOPED_TRACE(static_cast<int>(algorithm));
    RunOptions options;
    options.comm.algorithm = algorithm;
    std::vector<Case> cases;
    for (Op op : {Op::kPsum, Op::kPmax, Op::kPmean}) {
      for (DType dtype : {DType::kFloat32, DType::kInt64}) {
        Case c;
        c.op = op;
        c.dtype = dtype;
        c.shape = {3, 7001};
        c.axes = {"y", "x"};
        cases.push_back(c);
        c.axes = {"y"};
        cases.push_back(c);
      }
    }
    RunAndVerify("x=2,y=3", cases, options);
  }
}

TEST(CommunicatorTest, LargeGathersAndScattersUnderRingAndDirect) {
  for (Algorithm algorithm :
       {Algorithm::kAuto, Algorithm::kRing, Algorithm::kDirect}) {
    SCOPED_TRACE(static_cast<int>(algorithm));
    RunOptions options;
    options.comm.algorithm = algorithm;
    std::vector<Case> cases;
    for (const Axes& axes : {Axes{"y", "x"}, Axes{"y"}}) {
      Case c;
      c.axes = axes;
      c.dtype = DType::kFloat64;
      c.op = Op::kAllGather;
      c.shape = {2, 3001};
      c.axis = 1;
      c.tiled = true;
      cases.push_back(c);
      c.op = Op::kPsumScatter;
      c.shape = {7, 6 * 701};
      c.axis = -1;
      cases.push_back(c);
      c.op = Op::kAllToAll;
      c.shape = {6 * 500, 5};
      c.axis = 0;
      c.concat = 1;
      cases.push_back(c);
    }
    RunAndVerify("x=2,y=3", cases, options);
  }
}

// ---------------------------------------------------------------------------
// all_gather

TEST(CommunicatorTest, AllGatherMatchesReference) {
  SweepLayouts([](const Axes&, int64_t) {
    std::vector<Case> cases;
    const std::vector<Shape> shapes = {{}, {3}, {0}, {2, 3}, {2, 0}, {2, 1, 3}};
    for (DType dtype : kAllDTypes) {
      for (const Shape& shape : shapes) {
        const int64_t rank = static_cast<int64_t>(shape.size());
        Case c;
        c.op = Op::kAllGather;
        c.dtype = dtype;
        c.shape = shape;
        for (int64_t axis = -(rank + 1); axis <= rank; ++axis) {
          c.axis = axis;
          c.tiled = false;
          cases.push_back(c);
        }
        for (int64_t axis = -rank; axis < rank; ++axis) {
          c.axis = axis;
          c.tiled = true;
          cases.push_back(c);
        }
      }
    }
    return cases;
  });
}

// Untiled all_gather of scalars stacks them in group order.
TEST(CommunicatorTest, AllGatherOfScalarsStacksInGroupOrder) {
  const Mesh mesh = MakeMesh("x=2,y=2,z=2");
  RunResult run = RunOnMesh(mesh, 1, [](Communicator& comm, int64_t d, int) {
    return comm.AllGather(
        FromValues<int32_t>(DType::kInt32, {}, {static_cast<int32_t>(d)}),
        {"z", "x"}, 0, false);
  });
  for (int64_t d = 0; d < 8; ++d) {
    ASSERT_TRUE(run.results[d][0].ok()) << run.results[d][0].status();
    const int32_t y = static_cast<int32_t>(d / 2 % 2);
    // Ranks z-major: (z,x) = (0,0), (0,1), (1,0), (1,1).
    EXPECT_EQ(run.results[d][0]->shape(), (Shape{4}));
    EXPECT_EQ(
        Values<int32_t>(*run.results[d][0]),
        (std::vector<int32_t>{2 * y, 4 + 2 * y, 2 * y + 1, 4 + 2 * y + 1}));
  }
}

// ---------------------------------------------------------------------------
// psum_scatter

TEST(CommunicatorTest, PsumScatterMatchesReference) {
  SweepLayouts([](const Axes&, int64_t n) {
    std::vector<Case> cases;
    struct Shaped {
      Shape shape;
      std::vector<int64_t> dims;
      bool tiled;
    };
    const std::vector<Shaped> shapes = {
        {{2 * n}, {0, -1}, true},
        {{n}, {0}, true},
        {{0}, {0}, true},
        {{2 * n, 3}, {0, -2}, true},
        {{3, 2 * n}, {1, -1}, true},
        {{n, 0}, {0}, true},
        {{2, 3 * n, 1}, {1, -2}, true},
        {{n}, {0, -1}, false},
        {{n, 3}, {0}, false},
        {{3, n}, {1, -1}, false},
        {{2, n, 2}, {1, -2}, false},
        {{0, n}, {1}, false},
    };
    for (DType dtype : kAllDTypes) {
      for (const Shaped& s : shapes) {
        for (int64_t d : s.dims) {
          Case c;
          c.op = Op::kPsumScatter;
          c.dtype = dtype;
          c.shape = s.shape;
          c.axis = d;
          c.tiled = s.tiled;
          cases.push_back(c);
        }
      }
    }
    return cases;
  });
}

// docs/SEMANTICS.md, worked examples: psum_scatter over ('z','y') on an
// (x, y, z) mesh hands chunk z * 2 + y to device (x, y, z).
TEST(CommunicatorTest, PsumScatterOverTupleIsFirstAxisMajor) {
  const Mesh mesh = MakeMesh("x=2,y=2,z=2");
  RunResult run = RunOnMesh(mesh, 1, [](Communicator& comm, int64_t, int) {
    return comm.PsumScatter(
        FromValues<float>(DType::kFloat32, {4, 1}, {0, 1, 2, 3}), {"z", "y"}, 0,
        true);
  });
  for (int64_t d = 0; d < 8; ++d) {
    ASSERT_TRUE(run.results[d][0].ok()) << run.results[d][0].status();
    const float y = d / 2 % 2, z = d % 2;
    EXPECT_EQ(run.results[d][0]->shape(), (Shape{1, 1}));
    EXPECT_EQ(Values<float>(*run.results[d][0]),
              (std::vector<float>{4 * (z * 2 + y)}));
  }
}

// ---------------------------------------------------------------------------
// ppermute

json Shift(int64_t n, int64_t by) {
  json perm = json::array();
  for (int64_t i = 0; i < n; ++i) perm.push_back({i, ((i + by) % n + n) % n});
  return perm;
}

TEST(CommunicatorTest, PpermuteMatchesReference) {
  // jax.lax.ppermute over a tuple requires mesh order (docs/SEMANTICS.md,
  // section 5), so the sweep uses tuples in mesh order only.
  const std::vector<Layout> layouts = {
      {"x=3", {{"x"}}},
      {"x=2,y=4", {{"x"}, {"y"}, {"x", "y"}}},
      {"x=2,y=2,z=2", {{"z"}, {"x", "z"}, {"y", "z"}, {"x", "y", "z"}}},
      {"x=1,y=4", {{"x"}, {"x", "y"}}},
  };
  for (const Layout& layout : layouts) {
    const Mesh mesh = MakeMesh(layout.mesh);
    std::vector<Case> cases;
    for (const Axes& axes : layout.axes) {
      const int64_t n = SizeOf(mesh, axes);
      std::vector<json> perms = {Shift(n, 1), Shift(n, -1), Shift(n, 0),
                                 json::array()};
      if (n >= 2) {
        perms.push_back(json::array({{0, n - 1}}));      // partial
        perms.push_back(json::array({{0, 1}, {1, 0}}));  // swap
      }
      if (n >= 3) {
        perms.push_back(json::array({{n - 1, 0}, {1, 1}}));  // with identity
        perms.push_back(json::array({{2, 0}, {0, 2}, {1, 1}}));
      }
      for (DType dtype : kAllDTypes) {
        for (const Shape& shape :
             {Shape{}, Shape{3}, Shape{0}, Shape{2, 3}, Shape{2, 0, 1}}) {
          for (const json& perm : perms) {
            Case c;
            c.op = Op::kPpermute;
            c.axes = axes;
            c.dtype = dtype;
            c.shape = shape;
            c.perm = perm;
            cases.push_back(c);
          }
        }
      }
    }
    RunAndVerify(layout.mesh, cases);
  }
}

// docs/SEMANTICS.md, worked examples: ppermute over ('x','y') by +1 on a
// (2, 2, 2) mesh moves the block of linear device i to device (i + 2) % 8.
TEST(CommunicatorTest, PpermuteOverTwoAxesMovesByTwoDevices) {
  const Mesh mesh = MakeMesh("x=2,y=2,z=2");
  RunResult run = RunOnMesh(mesh, 1, [](Communicator& comm, int64_t d, int) {
    return comm.Ppermute(FromValues<int64_t>(DType::kInt64, {1}, {d}),
                         {"x", "y"}, Shift(4, 1));
  });
  for (int64_t d = 0; d < 8; ++d) {
    ASSERT_TRUE(run.results[d][0].ok()) << run.results[d][0].status();
    EXPECT_EQ(Values<int64_t>(*run.results[d][0]),
              (std::vector<int64_t>{(d + 6) % 8}));
  }
}

// ---------------------------------------------------------------------------
// all_to_all

TEST(CommunicatorTest, AllToAllMatchesReference) {
  SweepLayouts([](const Axes&, int64_t n) {
    struct Shaped {
      Shape shape;
      int64_t split, concat;
      bool tiled;
    };
    const std::vector<Shaped> shapes = {
        // tiled: split dim / n, concat dim * n
        {{2 * n}, 0, 0, true},
        {{2 * n}, -1, -1, true},
        {{2 * n, 3}, 0, 1, true},
        {{3, 2 * n}, 1, 0, true},
        {{3, 2 * n}, -1, -2, true},
        {{2, 3 * n, 2}, 1, 1, true},
        {{n, 2, 3}, 0, -1, true},
        {{2, 3, n}, 2, 0, true},
        {{0, 2 * n}, 1, 0, true},
        {{2 * n, 0}, 0, 1, true},
        // untiled: split dim (of size n) removed, a new one at concat
        {{n}, 0, 0, false},
        {{n}, -1, -1, false},
        {{n, 3}, 0, 1, false},
        {{3, n}, 1, 0, false},
        {{3, n}, 1, 1, false},
        {{2, n, 3}, 1, 2, false},
        {{2, n, 3}, 1, 0, false},
        {{n, 2, 3}, 0, 1, false},
        {{2, 3, n}, -1, -3, false},
        {{2, 3, n}, 2, 2, false},
        {{n, 0}, 0, 1, false},
    };
    std::vector<Case> cases;
    for (DType dtype : kAllDTypes) {
      for (const Shaped& s : shapes) {
        Case c;
        c.op = Op::kAllToAll;
        c.dtype = dtype;
        c.shape = s.shape;
        c.axis = s.split;
        c.concat = s.concat;
        c.tiled = s.tiled;
        cases.push_back(c);
      }
    }
    return cases;
  });
}

// docs/SEMANTICS.md, worked examples: all_to_all gives out_j[k] = x_k[j]
// for untiled 1-d blocks.
TEST(CommunicatorTest, AllToAllTransposesBlocks) {
  const Mesh mesh = MakeMesh("i=4");
  RunResult run = RunOnMesh(mesh, 1, [](Communicator& comm, int64_t d, int) {
    std::vector<int32_t> v;
    for (int32_t j = 0; j < 4; ++j) v.push_back(10 * d + j);
    return comm.AllToAll(FromValues<int32_t>(DType::kInt32, {4}, v), {"i"}, 0,
                         0, false);
  });
  for (int32_t d = 0; d < 4; ++d) {
    ASSERT_TRUE(run.results[d][0].ok()) << run.results[d][0].status();
    EXPECT_EQ(Values<int32_t>(*run.results[d][0]),
              (std::vector<int32_t>{d, 10 + d, 20 + d, 30 + d}));
  }
}

// ---------------------------------------------------------------------------
// Sequences of collectives

// Collectives called back to back must not mix, even when some devices run
// ahead: devices with x = 1 start only once the x = 0 devices have finished
// the collectives over y and wait in the psum over x, having sent their
// messages of that later collective early.
TEST(CommunicatorTest, BackToBackCollectivesDoNotMix) {
  std::vector<Case> cases;
  auto add = [&](Op op, Axes axes, DType dtype, Shape shape) -> Case& {
    Case c;
    c.op = op;
    c.axes = std::move(axes);
    c.dtype = dtype;
    c.shape = std::move(shape);
    cases.push_back(c);
    return cases.back();
  };
  add(Op::kPsum, {"y"}, DType::kFloat32, {3});
  add(Op::kPsum, {"y"}, DType::kFloat32, {3});  // same fingerprint again
  add(Op::kAllGather, {"y"}, DType::kInt32, {2}).axis = 0;
  add(Op::kPmax, {"y"}, DType::kInt64, {2});
  add(Op::kPsum, {"x"}, DType::kFloat32, {3});
  add(Op::kPpermute, {"x", "y"}, DType::kFloat64, {2}).perm = Shift(8, 3);
  Case& scatter = add(Op::kPsumScatter, {"y", "x"}, DType::kInt32, {16});
  scatter.tiled = true;
  add(Op::kAllToAll, {"y"}, DType::kFloat32, {4, 2}).concat = 1;
  add(Op::kPmin, {"x", "y"}, DType::kFloat64, {});
  add(Op::kPsum, {"y"}, DType::kFloat32, {3});
  RunOptions options;
  options.before = [](int64_t d, const InMemoryHub& hub) {
    if (d < 4) return;
    // Wait until devices 0-3 all wait for a message at once: with x = 1
    // not started, that is where they get stuck.
    WaitUntil([&hub] { return hub.WaitingReceivers() >= 4; });
  };
  for (int repeat = 0; repeat < 3; ++repeat) {
    RunAndVerify("x=2,y=4", cases, options);
  }
}

// ---------------------------------------------------------------------------
// Errors: raised before anything is sent, identically on every device

struct ErrorCase {
  std::string name;
  std::string mesh;
  std::function<absl::StatusOr<Tensor>(Communicator&)> call;
  std::vector<std::string> fragments;
};

TEST(CommunicatorTest, InvalidCallsFailOnEveryDeviceWithoutSending) {
  auto f32 = [](Shape shape) { return Tensor(DType::kFloat32, shape); };
  const std::vector<ErrorCase> cases = {
      {"psum unknown axis",
       "x=2,y=4",
       [&](Communicator& c) { return c.Psum(f32({2}), {"w"}); },
       {"psum", "unbound axis name: 'w'", "('x', 'y')"}},
      {"pmean unknown axis",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.Pmean(f32({2}), {"x", "w"});
       },
       {"pmean", "unbound axis name: 'w'"}},
      {"pmax axis twice",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.Pmax(f32({2}), {"x", "x"});
       },
       {"pmax", "axis 'x' appears twice", "('x', 'x')"}},
      {"all_gather axis twice",
       "x=2,y=2,z=2",
       [&](Communicator& c) {
         return c.AllGather(f32({2}), {"z", "y", "z"}, 0, false);
       },
       {"all_gather", "'z' appears twice"}},
      {"all_gather unknown axis",
       "x=3",
       [&](Communicator& c) { return c.AllGather(f32({2}), {"y"}, 0, true); },
       {"all_gather", "unbound axis name: 'y'"}},
      {"all_gather axis too large",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.AllGather(f32({2, 3}), {"y"}, 3, false);
       },
       {"all_gather", "axis 3 is out of range", "[-3, 2]"}},
      {"all_gather axis too small",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.AllGather(f32({2, 3}), {"y"}, -4, false);
       },
       {"all_gather", "axis -4 is out of range"}},
      {"tiled all_gather axis out of range",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.AllGather(f32({2, 3}), {"y"}, 2, true);
       },
       {"all_gather", "axis 2 is out of range", "[-2, 1]"}},
      {"tiled all_gather of a scalar",
       "x=2,y=4",
       [&](Communicator& c) { return c.AllGather(f32({}), {"y"}, 0, true); },
       {"all_gather", "scalar"}},
      {"psum_scatter tiled not divisible",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.PsumScatter(f32({3, 6}), {"y"}, 1, true);
       },
       {"psum_scatter", "scatter dimension size 6",
        "must be divisible by shard_count 4"}},
      {"psum_scatter untiled not equal",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.PsumScatter(f32({4}), {"y", "x"}, 0, false);
       },
       {"psum_scatter", "scatter dimension size 4",
        "must match shard count 8"}},
      {"psum_scatter untiled group of 4",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.PsumScatter(f32({2}), {"y"}, 0, false);
       },
       {"must match shard count 4"}},
      {"psum_scatter dimension out of range",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.PsumScatter(f32({4, 4}), {"y"}, 2, true);
       },
       {"psum_scatter", "scatter_dimension 2 is out of range"}},
      {"psum_scatter of a scalar",
       "x=2,y=4",
       [&](Communicator& c) { return c.PsumScatter(f32({}), {"y"}, 0, true); },
       {"psum_scatter", "out of range"}},
      {"ppermute repeated source",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.Ppermute(f32({2}), {"y"}, json::array({{0, 1}, {0, 2}}));
       },
       {"ppermute sources and destinations must be unique", "[[0,1],[0,2]]"}},
      {"ppermute repeated destination",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.Ppermute(f32({2}), {"y"}, json::array({{0, 1}, {2, 1}}));
       },
       {"ppermute sources and destinations must be unique"}},
      {"ppermute index too large",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.Ppermute(f32({2}), {"y"}, json::array({{0, 4}}));
       },
       {"ppermute", "index 4", "outside the group of 4"}},
      {"ppermute negative index",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.Ppermute(f32({2}), {"x"}, json::array({{-1, 0}}));
       },
       {"ppermute", "index -1", "outside the group of 2"}},
      {"ppermute malformed perm",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.Ppermute(f32({2}), {"x"}, json::array({{0}}));
       },
       {"ppermute", "list of [source, destination] pairs"}},
      {"ppermute perm not a list",
       "x=2,y=4",
       [&](Communicator& c) { return c.Ppermute(f32({2}), {"x"}, json(7)); },
       {"ppermute", "list of [source, destination] pairs"}},
      {"ppermute unknown axis",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.Ppermute(f32({2}), {"q"}, json::array());
       },
       {"ppermute", "unbound axis name: 'q'"}},
      {"all_to_all split not divisible",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.AllToAll(f32({3, 6}), {"y"}, 1, 0, true);
       },
       {"all_to_all", "split_axis (6)",
        "has to be divisible by the size of the named axis (4)"}},
      {"all_to_all untiled split not equal",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.AllToAll(f32({8, 2}), {"y"}, 0, 1, false);
       },
       {"all_to_all requires the size of the mapped axis", "4 and 8"}},
      {"all_to_all split out of range",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.AllToAll(f32({4, 4}), {"y"}, -3, 0, true);
       },
       {"all_to_all", "split_axis -3 is out of range"}},
      {"all_to_all concat out of range",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.AllToAll(f32({4, 4}), {"y"}, 0, 2, false);
       },
       {"all_to_all", "concat_axis 2 is out of range"}},
      {"all_to_all axis twice",
       "x=2,y=4",
       [&](Communicator& c) {
         return c.AllToAll(f32({8}), {"y", "y"}, 0, 0, true);
       },
       {"all_to_all", "'y' appears twice"}},
  };
  for (const ErrorCase& ec : cases) {
    SCOPED_TRACE(ec.name);
    const Mesh mesh = MakeMesh(ec.mesh);
    RunOptions options;
    options.abort_on_error = false;  // every device must fail on its own
    options.recv_timeout = absl::Seconds(2);
    const absl::Time start = absl::Now();
    RunResult run = RunOnMesh(
        mesh, 1, [&](Communicator& c, int64_t, int) { return ec.call(c); },
        options);
    EXPECT_LT(absl::Now() - start, absl::Seconds(1)) << "a device waited";
    EXPECT_EQ(run.pending, 0u) << "a device sent something";
    for (int64_t d = 0; d < mesh.num_devices(); ++d) {
      const absl::Status s = run.results[d][0].status();
      ::testing::AssertionResult ok = ::testing::AssertionSuccess();
      for (const std::string& f : ec.fragments) {
        if (ok) ok = StatusIs(s, absl::StatusCode::kInvalidArgument, {f});
      }
      EXPECT_TRUE(ok) << "device " << d;
      EXPECT_EQ(s, run.results[0][0].status()) << "device " << d;
    }
  }
}

// After a failed call the communicator keeps working: a rejected call
// consumes no sequence number (every device rejected it alike).
TEST(CommunicatorTest, RejectedCallDoesNotDisturbLaterCollectives) {
  std::vector<Case> cases(3);
  cases[0].op = Op::kPsum;
  cases[0].axes = {"y"};
  cases[0].shape = {2};
  cases[1] = cases[0];
  cases[1].op = Op::kAllToAll;
  cases[1].shape = {3};  // not divisible by 4: rejected everywhere
  cases[1].tiled = true;
  cases[2] = cases[0];
  cases[2].op = Op::kAllGather;
  const Mesh mesh = MakeMesh("x=2,y=4");
  std::vector<std::vector<Tensor>> inputs(3);
  for (int i = 0; i < 3; ++i) {
    for (int64_t d = 0; d < 8; ++d) {
      inputs[i].push_back(Input(cases[i].dtype, cases[i].shape, Seed(i, d)));
    }
  }
  RunOptions options;
  options.abort_on_error = false;
  options.recv_timeout = absl::Seconds(2);
  RunResult run = RunOnMesh(
      mesh, 3,
      [&](Communicator& comm, int64_t d, int i) {
        return Call(comm, cases[i], inputs[i][d]);
      },
      options);
  EXPECT_EQ(run.pending, 0u);
  for (int i : {0, 2}) {
    std::vector<const Tensor*> out;
    for (int64_t d = 0; d < 8; ++d) {
      ASSERT_TRUE(run.results[d][i].ok()) << run.results[d][i].status();
      out.push_back(&*run.results[d][i]);
    }
    EXPECT_TRUE(VerifyCase(mesh, cases[i], inputs[i], out));
  }
  for (int64_t d = 0; d < 8; ++d) {
    EXPECT_TRUE(StatusIs(run.results[d][1].status(),
                         absl::StatusCode::kInvalidArgument,
                         {"has to be divisible"}));
  }
}

// ---------------------------------------------------------------------------
// Mismatched collectives: the receiver fails with both fingerprints

struct Mismatch {
  std::string name;
  std::function<absl::StatusOr<Tensor>(Communicator&, int64_t device)> call;
  std::vector<std::string> fragments;
};

TEST(CommunicatorTest, MismatchedCollectivesFailWithBothFingerprints) {
  const Mesh mesh = MakeMesh("x=2");
  auto f32 = [](Shape shape) { return Tensor(DType::kFloat32, shape); };
  const std::vector<Mismatch> cases = {
      {"psum vs pmax",
       [&](Communicator& c, int64_t d) {
         return d == 0 ? c.Psum(f32({4}), {"x"}) : c.Pmax(f32({4}), {"x"});
       },
       {"collective mismatch", "psum(axes=('x',), float32[4])",
        "pmax(axes=('x',), float32[4])"}},
      {"different shapes",
       [&](Communicator& c, int64_t d) {
         return c.Psum(f32({d == 0 ? 4 : 5}), {"x"});
       },
       {"collective mismatch", "psum(axes=('x',), float32[4])",
        "psum(axes=('x',), float32[5])"}},
      {"different dtypes",
       [&](Communicator& c, int64_t d) {
         return c.Psum(Tensor(d == 0 ? DType::kInt32 : DType::kFloat32, {2}),
                       {"x"});
       },
       {"collective mismatch", "int32[2]", "float32[2]"}},
      {"all_gather axis differs",
       [&](Communicator& c, int64_t d) {
         return c.AllGather(f32({2, 2}), {"x"}, d, false);
       },
       {"collective mismatch", "axis=0", "axis=1"}},
  };
  for (const Mismatch& m : cases) {
    SCOPED_TRACE(m.name);
    RunOptions options;
    options.recv_timeout = absl::Seconds(2);
    const absl::Time start = absl::Now();
    RunResult run = RunOnMesh(
        mesh, 1, [&](Communicator& c, int64_t d, int) { return m.call(c, d); },
        options);
    EXPECT_LT(absl::Now() - start, absl::Seconds(1)) << "a device waited";
    for (int64_t d = 0; d < 2; ++d) {
      const absl::Status s = run.results[d][0].status();
      ::testing::AssertionResult ok = ::testing::AssertionSuccess();
      for (const std::string& f : m.fragments) {
        if (ok) ok = StatusIs(s, absl::StatusCode::kInvalidArgument, {f});
      }
      EXPECT_TRUE(ok) << "device " << d;
    }
  }
}

// A mismatch on a larger group: one device of each y-group calls pmax
// where the others call psum (the same messages, so every key matches);
// every device fails, none hangs.
TEST(CommunicatorTest, MismatchInALargerGroupFailsEveryDevice) {
  const Mesh mesh = MakeMesh("x=2,y=4");
  RunOptions options;
  options.recv_timeout = absl::Seconds(2);
  const absl::Time start = absl::Now();
  RunResult run = RunOnMesh(
      mesh, 1,
      [](Communicator& c, int64_t d, int) {
        Tensor x(DType::kFloat64, {3});
        return d % 4 == 2 ? c.Pmax(x, {"y"}) : c.Psum(x, {"y"});
      },
      options);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1)) << "a device waited";
  for (int64_t d = 0; d < 8; ++d) {
    EXPECT_TRUE(
        StatusIs(run.results[d][0].status(), absl::StatusCode::kInvalidArgument,
                 {"collective mismatch", "psum(axes=('y',), float64[3])",
                  "pmax(axes=('y',), float64[3])"}))
        << "device " << d;
  }
}

// Collectives whose algorithms exchange differently numbered messages
// (psum's recursive doubling sends steps 1.., all_gather's direct exchange
// step 0) never meet in one mailbox key: the transport cannot compare
// their fingerprints, and the mismatch shows as a timeout naming the
// collective. Either way no device may succeed.
TEST(CommunicatorTest, MismatchOfDifferentAlgorithmsFailsEveryDevice) {
  const Mesh mesh = MakeMesh("x=2,y=4");
  RunOptions options;
  options.recv_timeout = absl::Milliseconds(300);
  RunResult run = RunOnMesh(
      mesh, 1,
      [](Communicator& c, int64_t d, int) {
        Tensor x(DType::kFloat64, {3});
        return d % 4 == 3 ? c.AllGather(x, {"y"}, 0, true) : c.Psum(x, {"y"});
      },
      options);
  for (int64_t d = 0; d < 8; ++d) {
    const absl::Status s = run.results[d][0].status();
    EXPECT_TRUE(
        StatusIs(s, absl::StatusCode::kInvalidArgument,
                 {"collective mismatch"}) ||
        StatusIs(s, absl::StatusCode::kDeadlineExceeded, {"never arrived"}))
        << "device " << d << ": " << s;
  }
}

}  // namespace
}  // namespace shardmap
