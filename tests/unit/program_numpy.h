// Test helper: runs hand-built programs through program::Evaluate and the
// same computations through numpy (Debian's /usr/bin/python3, or
// $SHARDMAP_PYTHON), all cases of a batch in one python process, and
// compares: integers and bools exactly, floats within a tolerance (NaN
// equals NaN). Every case also runs unfused, and must give bit for bit the
// fused result.
#ifndef SHARDMAP_TESTS_UNIT_PROGRAM_NUMPY_H_
#define SHARDMAP_TESTS_UNIT_PROGRAM_NUMPY_H_

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/npy.h"
#include "program/evaluator.h"
#include "tests/unit/temp_dir.h"

namespace shardmap {
namespace program {

// The elems that cross the wire.
inline constexpr ElemType kAll[] = {ElemType::kFloat32, ElemType::kFloat64,
                                    ElemType::kInt32, ElemType::kInt64};

// Uniform values in [lo, hi] (integers: whole numbers).
inline Tensor RandomTensor(shardmap::DType dtype, Shape shape,
                           std::mt19937& rng, double lo = -3, double hi = 3) {
  Tensor t(dtype, std::move(shape));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const double v = u(rng);
    switch (dtype) {
      case shardmap::DType::kFloat32:
        t.data_as<float>()[i] = static_cast<float>(v);
        break;
      case shardmap::DType::kFloat64:
        t.data_as<double>()[i] = v;
        break;
      case shardmap::DType::kInt32:
        t.data_as<int32_t>()[i] = static_cast<int32_t>(std::lround(v));
        break;
      case shardmap::DType::kInt64:
        t.data_as<int64_t>()[i] = std::llround(v);
        break;
    }
  }
  return t;
}

inline double ElementAt(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case shardmap::DType::kFloat32:
      return t.data_as<float>()[i];
    case shardmap::DType::kFloat64:
      return t.data_as<double>()[i];
    case shardmap::DType::kInt32:
      return t.data_as<int32_t>()[i];
    case shardmap::DType::kInt64:
      return static_cast<double>(t.data_as<int64_t>()[i]);
  }
  return 0;
}

class NumpyBatch {
 public:
  // `expr` is a numpy expression over the arguments a[0], a[1], ...; its
  // value is cast to the program's output dtype (bool to int32).
  void Add(std::string name, Program program, std::vector<Tensor> args,
           std::string expr, double rtol = 0, double atol = 0) {
    cases_.push_back({std::move(name), std::move(program), std::move(args),
                      std::move(expr), rtol, atol});
  }

  void Check() {
    TempDir dir("program_numpy");
    std::string script =
        "import sys\nimport numpy as np\nd = sys.argv[1]\n"
        "np.seterr(all='ignore')\n"
        "relu = lambda x: np.maximum(x, 0)\n"
        "sigmoid = lambda x: 1 / (1 + np.exp(-x))\n";
    std::vector<std::vector<Tensor>> got(cases_.size());
    for (size_t c = 0; c < cases_.size(); ++c) {
      Case& k = cases_[c];
      const std::string stem = absl::StrCat(dir.path(), "/c", c);
      std::vector<Tensor> fused_args, plain_args;
      for (size_t j = 0; j < k.args.size(); ++j) {
        std::ofstream(absl::StrCat(stem, "_in", j, ".npy"), std::ios::binary)
            << SerializeNpy(k.args[j]);
        fused_args.push_back(k.args[j].Clone());
        plain_args.push_back(k.args[j].Clone());
      }
      absl::StatusOr<std::vector<Tensor>> fused =
          Evaluate(k.program, std::move(fused_args), nullptr);
      EvalOptions off;
      off.fuse = false;
      absl::StatusOr<std::vector<Tensor>> plain =
          Evaluate(k.program, std::move(plain_args), nullptr, off);
      if (!fused.ok() || !plain.ok()) {
        ADD_FAILURE() << k.name << ": " << fused.status() << " / "
                      << plain.status();
        continue;
      }
      ASSERT_EQ(fused->size(), 1u) << k.name;
      const Tensor& f = (*fused)[0];
      const Tensor& p = (*plain)[0];
      EXPECT_TRUE(f.shape() == p.shape() &&
                  std::memcmp(f.data(), p.data(), f.num_bytes()) == 0)
          << k.name << ": fused and unfused results differ";
      absl::StrAppend(&script, "a = [np.load(f'{d}/c", c,
                      "_in' + str(j) + '.npy') for j in range(", k.args.size(),
                      ")]\n", "np.save(f'{d}/c", c, "_want.npy', np.asarray(",
                      k.expr, ").astype('", DTypeName(f.dtype()), "'))\n");
      got[c] = std::move(*fused);
    }
    std::ofstream(dir.path() + "/ref.py") << script;
    const char* env = std::getenv("SHARDMAP_PYTHON");
    const std::string cmd =
        absl::StrCat(env != nullptr ? env : "/usr/bin/python3", " ", dir.path(),
                     "/ref.py ", dir.path(), " 2>&1");
    const int rc = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << cmd;
    for (size_t c = 0; c < cases_.size(); ++c) {
      if (got[c].empty()) continue;
      absl::StatusOr<Tensor> want =
          ReadNpy(absl::StrCat(dir.path(), "/c", c, "_want.npy"));
      ASSERT_TRUE(want.ok()) << want.status();
      Compare(cases_[c], got[c][0], *want);
    }
    cases_.clear();
  }

 private:
  struct Case {
    std::string name;
    Program program;
    std::vector<Tensor> args;
    std::string expr;
    double rtol, atol;
  };

  static void Compare(const Case& k, const Tensor& got, const Tensor& want) {
    ASSERT_EQ(ShapeString(got.dtype(), got.shape()),
              ShapeString(want.dtype(), want.shape()))
        << k.name << " (numpy: " << k.expr << ")";
    int failures = 0;
    for (int64_t i = 0; i < got.num_elements() && failures < 5; ++i) {
      const double g = ElementAt(got, i), w = ElementAt(want, i);
      const bool same = (std::isnan(g) && std::isnan(w)) || g == w ||
                        std::fabs(g - w) <= k.atol + k.rtol * std::fabs(w);
      if (!same) {
        ++failures;
        ADD_FAILURE() << k.name << " element " << i << ": got " << g
                      << ", numpy " << w << " (" << k.expr << ")";
      }
    }
  }

  std::vector<Case> cases_;
};

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_PROGRAM_NUMPY_H_
