// Tests of core/npy and core/npz against numpy itself (Debian's
// /usr/bin/python3; the python3 on PATH may lack numpy).
//
// numpy -> C++: a Python script saves arrays and, independently of the code
// under test, a text dump of each: dtype, shape, and repr() of every element
// in C order. The C++ side reads the binary file and compares element by
// element with the dump.
// C++ -> numpy: the C++ side writes arrays and a text dump of the values it
// put in; a Python script loads each file, compares it with the dump, and
// checks that numpy.save of the loaded array gives the same bytes.
#include "core/npy.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/npz.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardmap {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr char kPython[] = "/usr/bin/python3";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// Runs `script` with numpy's python in `dir`; returns its exit code and
// prints its output on failure.
int RunPython(const std::string& dir, const std::string& script,
              const std::string& args) {
  static int counter = 0;
  const std::string base = absl::StrCat(dir, "/script", ++counter);
  WriteFile(base + ".py", script);
  const std::string cmd =
      absl::StrCat(kPython, " ", base, ".py ", args, " > ", base, ".log 2>&1");
  const int rc = std::system(cmd.c_str());
  const int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  if (code != 0) std::cerr << cmd << " failed:\n" << ReadFile(base + ".log");
  return code;
}

// Saves fixtures with numpy, each with a text dump "<name>.txt".
constexpr char kGenerate[] = R"PY(
import os, sys, zipfile
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(20240611)
def p(name): return os.path.join(out, name)
def ref(name, a):
    with open(p(name + '.txt'), 'w') as f:
        f.write(a.dtype.name + '\n' + ' '.join(map(str, a.shape)) + '\n')
        f.writelines(repr(x) + '\n' for x in a.ravel(order='C').tolist())
def save(name, a):
    np.save(p(name + '.npy'), a)
    ref(name, a)
f32 = rng.standard_normal((4, 5)).astype('<f4')
f32[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
save('f32_4x5', f32)
save('f64_3x2x4', rng.standard_normal((3, 2, 4)) * 1e10)
save('i32_7', rng.integers(-2**31, 2**31, size=7, dtype=np.int32))
i64 = rng.integers(-2**63, 2**63, size=(3, 4), dtype=np.int64)
i64[0, 0], i64[0, 1] = -2**63, 2**63 - 1
save('i64_3x4', i64)
save('scalar_f64', np.array(3.25))
save('scalar_i32', np.array(-7, dtype=np.int32))
save('empty_0x3_f32', np.zeros((0, 3), np.float32))
save('empty_3x0x2_i64', np.zeros((3, 0, 2), np.int64))
save('empty_0_f64', np.zeros((0,), np.float64))
save('ones_1x1x1_i32', np.ones((1, 1, 1), np.int32))
save('big_f32', rng.standard_normal((300, 200)).astype(np.float32))
save('be_f4', rng.standard_normal((3, 4)).astype('>f4'))
save('be_f8', rng.standard_normal(5).astype('>f8'))
save('be_i4', rng.integers(-2**31, 2**31, (2, 3)).astype('>i4'))
save('be_i8', rng.integers(-2**62, 2**62, (2, 3, 2)).astype('>i8'))
save('be_scalar_f8', np.array(2.5, dtype='>f8'))
save('fortran_f64_3x5', np.asfortranarray(rng.standard_normal((3, 5))))
save('fortran_i32_2x3x4',
     np.asfortranarray(rng.integers(-99, 99, (2, 3, 4), dtype=np.int32)))
save('fortran_be_f4_2x3x4x5',
     np.asfortranarray(rng.standard_normal((2, 3, 4, 5)).astype('>f4')))
for major in (2, 3):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    with open(p('v%d.npy' % major), 'wb') as f:
        np.lib.format.write_array(f, a, version=(major, 0))
    ref('v%d' % major, a)
# Check the fixtures are what their names say.
assert np.load(p('fortran_i32_2x3x4.npy')).flags.f_contiguous
assert open(p('v2.npy'), 'rb').read(8) == b'\x93NUMPY\x02\x00'
assert open(p('v3.npy'), 'rb').read(8) == b'\x93NUMPY\x03\x00'

members = {
    'zeta': rng.standard_normal((2, 3)).astype(np.float32),
    'mlp/linear1/kernel': rng.integers(-50, 50, (4,), dtype=np.int64),
    'alpha': np.array(7.0),
    'fortran': np.asfortranarray(rng.standard_normal((3, 4)).astype('>f8')),
}
np.savez(p('stored.npz'), **members)
np.savez_compressed(p('compressed.npz'), **members)
for i, a in enumerate(members.values()):
    ref('npz_%d' % i, a)
for z, kind in (('stored.npz', zipfile.ZIP_STORED),
                ('compressed.npz', zipfile.ZIP_DEFLATED)):
    assert all(i.compress_type == kind for i in zipfile.ZipFile(p(z)).infolist())

# Files that must be refused.
np.save(p('object.npy'), np.array([1, 'a', None], dtype=object),
        allow_pickle=True)
np.save(p('structured.npy'), np.zeros(3, dtype=[('x', '<f4'), ('y', '<i4')]))
np.save(p('bool.npy'), np.array([True, False]))
np.save(p('float16.npy'), np.zeros(3, np.float16))
np.save(p('complex64.npy'), np.zeros(3, np.complex64))
np.save(p('uint8.npy'), np.zeros(3, np.uint8))
np.save(p('unicode.npy'), np.array(['ab', 'c']))
np.savez(p('object_member.npz'), good=np.zeros(2), obj=np.array([None]))
with zipfile.ZipFile(p('not_npy_member.npz'), 'w') as z:
    z.writestr('readme.txt', 'hello')
)PY";

// Loads C++-written files listed in "manifest.txt" and checks them against
// their dumps. Lines: "npy <name>" for <name>.npy + <name>.txt, or
// "npz <name> <compress> <key>..." for <name>.npz + <name>.<i>.txt.
constexpr char kCheck[] = R"PY(
import io, os, sys, zipfile
import numpy as np
d = sys.argv[1]
def p(name): return os.path.join(d, name)
bad = []
def check(a, txt, what):
    lines = open(p(txt)).read().split('\n')
    dtype, shape = np.dtype(lines[0]), tuple(int(x) for x in lines[1].split())
    conv = float if dtype.kind == 'f' else int
    exp = np.array([conv(v) for v in lines[2:2 + int(np.prod(shape))]],
                   dtype=dtype).reshape(shape)
    if a.dtype != dtype or a.shape != shape:
        bad.append('%s: got %s%s' % (what, a.dtype, a.shape))
    elif not np.array_equal(a, exp, equal_nan=(dtype.kind == 'f')):
        bad.append('%s: values differ' % what)
    elif dtype.kind == 'f' and not np.array_equal(np.signbit(a), np.signbit(exp)):
        bad.append('%s: signs of zero differ' % what)
for line in open(p('manifest.txt')).read().splitlines():
    kind, name, *rest = line.split(' ')
    if kind == 'npy':
        raw = open(p(name + '.npy'), 'rb').read()
        a = np.load(p(name + '.npy'))
        check(a, name + '.txt', name)
        buf = io.BytesIO()
        np.save(buf, a)
        if buf.getvalue() != raw:
            bad.append('%s: not byte-identical to numpy.save:\n%r\n%r' %
                       (name, buf.getvalue()[:200], raw[:200]))
    else:
        compress, keys = rest[0] == '1', rest[1:]
        with np.load(p(name + '.npz')) as z:
            if z.files != keys:
                bad.append('%s: keys %r' % (name, z.files))
                continue
            for i, k in enumerate(keys):
                check(z[k], '%s.%d.txt' % (name, i), name + ':' + k)
        want = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
        for info in zipfile.ZipFile(p(name + '.npz')).infolist():
            if info.compress_type != want:
                bad.append('%s: %s compress_type %d' % (name, info.filename,
                                                        info.compress_type))
print('\n'.join(bad))
sys.exit(1 if bad else 0)
)PY";

// A text dump: dtype, shape, one element per line.
struct Dump {
  std::string dtype;
  Shape shape;
  std::vector<std::string> values;
};

Dump LoadDump(const std::string& path) {
  std::vector<std::string> lines = absl::StrSplit(ReadFile(path), '\n');
  Dump dump;
  EXPECT_GE(lines.size(), 2u) << path;
  if (lines.size() < 2) return dump;
  dump.dtype = lines[0];
  for (absl::string_view d : absl::StrSplit(lines[1], ' ', absl::SkipEmpty())) {
    dump.shape.push_back(std::stoll(std::string(d)));
  }
  dump.values.assign(lines.begin() + 2, lines.end());
  if (!dump.values.empty() && dump.values.back().empty())
    dump.values.pop_back();
  return dump;
}

template <typename T>
std::string Text(T v) {
  if constexpr (std::is_same_v<T, float>) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.9g", v);
    return buf;
  } else if constexpr (std::is_same_v<T, double>) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17g", v);
    return buf;
  } else {
    return absl::StrCat(v);
  }
}

template <typename T>
T FromText(const std::string& s) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(std::strtod(s.c_str(), nullptr));
  } else {
    return static_cast<T>(std::strtoll(s.c_str(), nullptr, 10));
  }
}

template <typename T>
void ExpectValues(const Tensor& t, const Dump& dump) {
  const T* data = t.data_as<T>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const T want = FromText<T>(dump.values[i]);
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(data[i])) << "element " << i;
        continue;
      }
    }
    // Bitwise, so that -0.0 differs from 0.0.
    EXPECT_EQ(std::memcmp(&data[i], &want, sizeof(T)), 0)
        << "element " << i << ": got " << Text(data[i]) << ", numpy has "
        << dump.values[i];
  }
}

void ExpectMatchesDump(const Tensor& t, const std::string& dump_path) {
  SCOPED_TRACE(dump_path);
  const Dump dump = LoadDump(dump_path);
  ASSERT_EQ(DTypeName(t.dtype()), dump.dtype);
  ASSERT_EQ(t.shape(), dump.shape);
  ASSERT_EQ(static_cast<size_t>(t.num_elements()), dump.values.size());
  switch (t.dtype()) {
    case DType::kFloat32:
      return ExpectValues<float>(t, dump);
    case DType::kFloat64:
      return ExpectValues<double>(t, dump);
    case DType::kInt32:
      return ExpectValues<int32_t>(t, dump);
    case DType::kInt64:
      return ExpectValues<int64_t>(t, dump);
  }
}

void WriteDump(const Tensor& t, const std::string& path) {
  std::string out = absl::StrCat(DTypeName(t.dtype()), "\n",
                                 absl::StrJoin(t.shape(), " "), "\n");
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    switch (t.dtype()) {
      case DType::kFloat32:
        out += Text(t.data_as<float>()[i]);
        break;
      case DType::kFloat64:
        out += Text(t.data_as<double>()[i]);
        break;
      case DType::kInt32:
        out += Text(t.data_as<int32_t>()[i]);
        break;
      case DType::kInt64:
        out += Text(t.data_as<int64_t>()[i]);
        break;
    }
    out += "\n";
  }
  WriteFile(path, out);
}

// Deterministic values covering signs, magnitudes and special values.
Tensor MakeTensor(DType dtype, Shape shape, int seed) {
  Tensor t(dtype, std::move(shape));
  uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
    const double f = (static_cast<int64_t>(x) >> 11) * std::ldexp(1.0, -40);
    switch (dtype) {
      case DType::kFloat32:
        t.data_as<float>()[i] = static_cast<float>(f);
        break;
      case DType::kFloat64:
        t.data_as<double>()[i] = f * 1e-7;
        break;
      case DType::kInt32:
        t.data_as<int32_t>()[i] = static_cast<int32_t>(x);
        break;
      case DType::kInt64:
        t.data_as<int64_t>()[i] = static_cast<int64_t>(x);
        break;
    }
  }
  if (IsFloating(dtype) && t.num_elements() >= 4) {
    const double specials[4] = {std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::infinity(), -0.0,
                                std::numeric_limits<double>::denorm_min()};
    for (int i = 0; i < 4; ++i) {
      if (dtype == DType::kFloat32) {
        t.data_as<float>()[i] = i == 3
                                    ? std::numeric_limits<float>::denorm_min()
                                    : static_cast<float>(specials[i]);
      } else {
        t.data_as<double>()[i] = specials[i];
      }
    }
  }
  return t;
}

// A .npy file built by hand: magic, version, length, header padded to 64.
std::string Craft(const std::string& dict, const std::string& data,
                  int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out =
      std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  for (size_t i = 0; i < prefix - 8; ++i) {
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  }
  return out + header + data;
}

template <typename T>
std::string Bytes(std::initializer_list<T> values, bool big_endian = false) {
  std::string out;
  for (T v : values) {
    std::string b(reinterpret_cast<const char*>(&v), sizeof(T));
    if (big_endian) std::reverse(b.begin(), b.end());
    out += b;
  }
  return out;
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data_as<T>(), t.data_as<T>() + t.num_elements());
}

class NpyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = ::testing::TempDir() + "npy_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = new std::string(tmpl);
    fixtures_ok_ = RunPython(*dir_, kGenerate, *dir_) == 0;
  }
  static void TearDownTestSuite() {
    if (dir_ == nullptr) return;
    fs::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(fixtures_ok_)
        << "numpy (" << kPython << ") could not generate the fixtures";
  }
  static std::string Path(const std::string& name) {
    return absl::StrCat(*dir_, "/", name);
  }

  static std::string* dir_;
  static bool fixtures_ok_;
};
std::string* NpyTest::dir_ = nullptr;
bool NpyTest::fixtures_ok_ = false;

TEST_F(NpyTest, ReadsWhatNumpyWrites) {
  for (const char* name : {"f32_4x5",
                           "f64_3x2x4",
                           "i32_7",
                           "i64_3x4",
                           "scalar_f64",
                           "scalar_i32",
                           "empty_0x3_f32",
                           "empty_3x0x2_i64",
                           "empty_0_f64",
                           "ones_1x1x1_i32",
                           "big_f32",
                           "be_f4",
                           "be_f8",
                           "be_i4",
                           "be_i8",
                           "be_scalar_f8",
                           "fortran_f64_3x5",
                           "fortran_i32_2x3x4",
                           "fortran_be_f4_2x3x4x5",
                           "v2",
                           "v3"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<Tensor> t = ReadNpy(Path(absl::StrCat(name, ".npy")));
    ASSERT_TRUE(t.ok()) << t.status();
    ExpectMatchesDump(*t, Path(absl::StrCat(name, ".txt")));
  }
}

TEST_F(NpyTest, ReadsStoredAndCompressedNpz) {
  for (const char* name : {"stored.npz", "compressed.npz"}) {
    SCOPED_TRACE(name);
    auto arrays = ReadNpz(Path(name));
    ASSERT_TRUE(arrays.ok()) << arrays.status();
    std::vector<std::string> keys;
    for (const auto& [key, tensor] : *arrays) keys.push_back(key);
    ASSERT_THAT(keys,
                ElementsAre("zeta", "mlp/linear1/kernel", "alpha", "fortran"));
    for (size_t i = 0; i < arrays->size(); ++i) {
      ExpectMatchesDump((*arrays)[i].second,
                        Path(absl::StrCat("npz_", i, ".txt")));
    }
  }
}

TEST_F(NpyTest, NumpyReadsWhatWeWriteByteForByte) {
  std::vector<Tensor> tensors;
  tensors.push_back(MakeTensor(DType::kFloat32, {2, 3}, 1));
  tensors.push_back(MakeTensor(DType::kFloat64, {4}, 2));
  tensors.push_back(MakeTensor(DType::kInt32, {}, 3));
  tensors.push_back(MakeTensor(DType::kInt64, {3, 1, 2}, 4));
  tensors.push_back(MakeTensor(DType::kFloat32, {0, 3}, 5));
  tensors.push_back(MakeTensor(DType::kInt64, {3, 0, 2}, 6));
  tensors.push_back(MakeTensor(DType::kFloat64, {1}, 7));
  tensors.push_back(MakeTensor(DType::kFloat32, {12, 34, 56, 7}, 8));
  tensors.push_back(MakeTensor(DType::kInt32, {1234567890123, 0}, 9));
  // The header ends exactly on a 64-byte boundary, where numpy pads with a
  // whole 64 spaces rather than none.
  tensors.push_back(MakeTensor(
      DType::kFloat32, {2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 100}, 10));
  std::string manifest;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string name = absl::StrCat("out", i);
    ASSERT_TRUE(WriteNpy(Path(name + ".npy"), tensors[i]).ok());
    EXPECT_EQ(ReadFile(Path(name + ".npy")), SerializeNpy(tensors[i]));
    EXPECT_EQ(ReadFile(Path(name + ".npy")).size() % 64,
              tensors[i].num_bytes() % 64);
    WriteDump(tensors[i], Path(name + ".txt"));
    absl::StrAppend(&manifest, "npy ", name, "\n");
  }
  // The padding corner case really is one.
  EXPECT_EQ(NpyHeader(tensors.back()).size(), 192u);

  std::vector<std::pair<std::string, const Tensor*>> members = {
      {"zeta", &tensors[0]},
      {"mlp/linear1/kernel", &tensors[3]},
      {"alpha", &tensors[2]},
      {"empty", &tensors[5]},
      {"big", &tensors[7]}};
  for (bool compress : {false, true}) {
    const std::string name = compress ? "outz_compressed" : "outz_stored";
    ASSERT_TRUE(WriteNpz(Path(name + ".npz"), members, compress).ok());
    std::string line = absl::StrCat("npz ", name, " ", compress ? 1 : 0);
    for (size_t i = 0; i < members.size(); ++i) {
      WriteDump(*members[i].second, Path(absl::StrCat(name, ".", i, ".txt")));
      absl::StrAppend(&line, " ", members[i].first);
    }
    absl::StrAppend(&manifest, line, "\n");
  }
  ASSERT_TRUE(WriteNpz(Path("outz_empty.npz"), {}, false).ok());
  absl::StrAppend(&manifest, "npz outz_empty 0\n");
  WriteFile(Path("manifest.txt"), manifest);

  EXPECT_EQ(RunPython(*dir_, kCheck, *dir_), 0);
}

TEST_F(NpyTest, RoundTripsThroughFilesInCpp) {
  Tensor a = MakeTensor(DType::kFloat64, {5, 7}, 11);
  Tensor b = MakeTensor(DType::kInt32, {3}, 12);
  ASSERT_TRUE(WriteNpy(Path("rt.npy"), a).ok());
  // Overwrites atomically and leaves no temporary file behind.
  ASSERT_TRUE(WriteNpy(Path("rt.npy"), b).ok());
  EXPECT_FALSE(fs::exists(Path(absl::StrCat("rt.npy.tmp.", ::getpid()))));
  auto read = ReadNpy(Path("rt.npy"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->shape(), b.shape());
  EXPECT_EQ(Values<int32_t>(*read), Values<int32_t>(b));

  ASSERT_TRUE(WriteNpz(Path("rt.npz"), {{"w/a", &a}, {"b", &b}}, true).ok());
  auto arrays = ReadNpz(Path("rt.npz"));
  ASSERT_TRUE(arrays.ok()) << arrays.status();
  ASSERT_EQ(arrays->size(), 2u);
  EXPECT_EQ((*arrays)[0].first, "w/a");
  EXPECT_EQ((*arrays)[1].first, "b");
  EXPECT_EQ(SerializeNpy((*arrays)[0].second), SerializeNpy(a));
  EXPECT_EQ(SerializeNpy((*arrays)[1].second), SerializeNpy(b));

  ASSERT_TRUE(WriteNpz(Path("rt_empty.npz"), {}, true).ok());
  auto empty = ReadNpz(Path("rt_empty.npz"));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
}

TEST_F(NpyTest, AcceptsHeaderVariants) {
  const std::string f32 = Bytes<float>({1, 2, 3, 4, 5, 6});
  for (const char* dict :
       {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
        "{\"shape\": (2,3), \"descr\": \"<f4\", \"fortran_order\": False}",
        "{ 'fortran_order' : False , 'shape' : ( 2 , 3 , ) , 'descr' : '=f4' "
        "}"}) {
    SCOPED_TRACE(dict);
    auto t = ParseNpy(Craft(dict, f32), "crafted.npy");
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->shape(), Shape({2, 3}));
    EXPECT_THAT(Values<float>(*t), ElementsAre(1, 2, 3, 4, 5, 6));
  }
  // Big-endian int64 in a version 2.0 file.
  auto be = ParseNpy(
      Craft("{'descr': '>i8', 'fortran_order': False, 'shape': (2,), }",
            Bytes<int64_t>({-2, int64_t{1} << 40}, /*big_endian=*/true), 2),
      "crafted.npy");
  ASSERT_TRUE(be.ok()) << be.status();
  EXPECT_THAT(Values<int64_t>(*be), ElementsAre(-2, int64_t{1} << 40));
  // Column-major [[1, 2, 3], [4, 5, 6]].
  auto f = ParseNpy(
      Craft("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
            Bytes<int32_t>({1, 4, 2, 5, 3, 6})),
      "crafted.npy");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_THAT(Values<int32_t>(*f), ElementsAre(1, 2, 3, 4, 5, 6));
}

// Asserts INVALID_ARGUMENT with every one of `parts` in the message.
template <typename T>
void ExpectInvalid(const absl::StatusOr<T>& result,
                   std::initializer_list<const char*> parts) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
      << result.status();
  for (const char* part : parts) {
    EXPECT_THAT(std::string(result.status().message()), HasSubstr(part));
  }
}

TEST_F(NpyTest, RefusesUnsupportedDtypesNamingThem) {
  const std::string object = Path("object.npy");
  ExpectInvalid(ReadNpy(object),
                {object.c_str(), "'|O'",
                 "object arrays are not supported (shardmap never unpickles)"});
  const struct {
    const char* file;
    const char* problem;
  } cases[] = {
      {"structured.npy", "structured dtypes"},
      {"bool.npy", "'|b1' (bool)"},
      {"float16.npy", "'<f2' (float16)"},
      {"complex64.npy", "'<c8' (complex64)"},
      {"uint8.npy", "'|u1' (uint8)"},
      {"unicode.npy", "'<U2' (unicode string)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string path = Path(c.file);
    ExpectInvalid(ReadNpy(path), {path.c_str(), c.problem, "supported: '<f4'"});
  }
}

TEST_F(NpyTest, RefusesMalformedFiles) {
  const std::string good = ReadFile(Path("f32_4x5.npy"));  // 128 + 80 bytes
  ASSERT_EQ(good.size(), 208u);
  const struct {
    std::string bytes;
    const char* problem;
  } cases[] = {
      {"", "bad magic string"},
      {"\x93NUMPZ" + good.substr(6), "bad magic string"},
      {good.substr(0, 9), "truncated header"},
      {good.substr(0, 50),
       "truncated header: expected 118 header bytes, found 40"},
      {good.substr(0, 204), "truncated: expected 80 data bytes, found 76"},
      {good + "xyz", "3 trailing bytes after the 80 data bytes"},
      {good.substr(0, 6) + '\x04' + good.substr(7),
       "unsupported format version 4.0"},
      {good.substr(0, 8) + "\x60\xea" + good.substr(10),
       "header length 60000 exceeds the limit of 10000 bytes"},
      {std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff", 12),
       "header length 4294967295 exceeds the limit"},
      {Craft("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }",
             ""),
       "dimension -3 is negative"},
      {Craft("{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,), }", ""),
       "dimension '2.5' is not an integer"},
      {Craft("{'descr': '<f4', 'fortran_order': False, 'shape': "
             "(99999999999999999999,), }",
             ""),
       "out of range"},
      {Craft("{'descr': '<f4', 'fortran_order': False, 'shape': "
             "(1099511627776, 1099511627776), }",
             ""),
       "shape (1099511627776, 1099511627776) is too large"},
      {Craft("{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", ""),
       "'shape' is not a tuple"},
      {Craft("{'descr': '<f4', 'fortran_order': False}", ""),
       "header has no 'shape' key"},
      {Craft("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}",
             ""),
       "unexpected key 'x'"},
      {Craft("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
             "'shape': ()}",
             ""),
       "duplicate key 'descr'"},
      {Craft("{'descr': '<f4' 'fortran_order': False, 'shape': (), }", ""),
       "malformed header dict"},
      {Craft("{'descr': '<f4', 'fortran_order': 'no', 'shape': (), }", ""),
       "'fortran_order' is not True or False"},
      {Craft("{'descr': '<f4', 'fortran_order': False, 'shape': " +
                 std::string(100, '(') + ", }",
             ""),
       "nested too deeply"},
      {Craft("not a dict", ""), "malformed header dict"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.problem);
    ExpectInvalid(ParseNpy(c.bytes, "crafted.npy"),
                  {"invalid .npy file 'crafted.npy'", c.problem});
  }
  // The same problems reach a caller of ReadNpy with the path in them.
  const std::string path = Path("truncated.npy");
  WriteFile(path, good.substr(0, 204));
  ExpectInvalid(ReadNpy(path), {path.c_str(), "truncated: expected 80"});
}

TEST_F(NpyTest, ReportsMissingAndUnreadableFiles) {
  const std::string missing = Path("missing.npy");
  absl::StatusOr<Tensor> t = ReadNpy(missing);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(t.status().message(),
            absl::StrCat("input file '", missing, "' does not exist"));
  auto z = ReadNpz(Path("missing.npz"));
  EXPECT_EQ(z.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(z.status().message()),
              HasSubstr("missing.npz' does not exist"));

  ExpectInvalid(ReadNpy(*dir_), {dir_->c_str(), "cannot read input file"});
  const std::string not_zip = Path("f32_4x5.npy");
  ExpectInvalid(ReadNpz(not_zip), {"invalid .npz file", not_zip.c_str()});
  ExpectInvalid(
      ReadNpz(Path("object_member.npz")),
      {"object_member.npz:obj.npy'", "object arrays are not supported"});
  ExpectInvalid(
      ReadNpz(Path("not_npy_member.npz")),
      {"not_npy_member.npz", "member 'readme.txt' is not named <key>.npy"});
}

TEST_F(NpyTest, ReportsUnwritablePaths) {
  Tensor t = MakeTensor(DType::kInt32, {2}, 13);
  const std::string bad = Path("no/such/dir/out.npy");
  absl::Status s = WriteNpy(bad, t);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr(bad), HasSubstr("No such file or directory")));
  const std::string bad_npz = Path("no/such/dir/out.npz");
  s = WriteNpz(bad_npz, {{"t", &t}}, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr(bad_npz));
  s = WriteNpz(Path("dup.npz"), {{"t", &t}, {"t", &t}}, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("duplicate key 't'"));
  EXPECT_FALSE(fs::exists(Path("dup.npz")));
}

}  // namespace
}  // namespace shardmap
