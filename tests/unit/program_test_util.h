// Helpers shared by the program checker tests: a fixed mesh
// (data=2, model=4), argument types, and lookups into a checked program.
#ifndef SHARDMAP_TESTS_UNIT_PROGRAM_TEST_UTIL_H_
#define SHARDMAP_TESTS_UNIT_PROGRAM_TEST_UTIL_H_

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "program/checker.h"
#include "program/eval_validate.h"

namespace shardmap {
namespace program {
namespace testing_util {

using Shape = std::vector<int64_t>;
using Axes = std::set<std::string>;
inline constexpr ElemType kF32 = ElemType::kFloat32, kF64 = ElemType::kFloat64,
                          kI32 = ElemType::kInt32, kI64 = ElemType::kInt64,
                          kBool = ElemType::kBool;

inline ArgType A(ElemType e, Shape s, Axes vma = {}) {
  ArgType a;
  a.elem = e;
  a.block_shape = std::move(s);
  a.vma = std::move(vma);
  return a;
}

inline const Mesh& TestMesh() {
  static const Mesh* mesh = new Mesh(*Mesh::Parse("data=2,model=4"));
  return *mesh;
}

// Checks `src`; a program the checker accepts must also be one the
// evaluator accepts (program/eval_validate.h).
inline absl::StatusOr<Program> Check(const std::string& src,
                                     const std::vector<ArgType>& args,
                                     CheckOptions options = CheckOptions()) {
  auto p = CheckProgram(src, TestMesh(), args, options);
  if (p.ok()) {
    const absl::Status valid = ValidateProgram(*p);
    EXPECT_TRUE(valid.ok()) << src << ": " << valid;
  }
  return p;
}

inline std::string ErrorOf(const std::string& src,
                           const std::vector<ArgType>& args) {
  auto p = Check(src, args);
  if (p.ok()) return "OK";
  return std::string(p.status().message());
}

inline const ValueType& Out(const Program& p, int k = 0) {
  return p.instrs[p.outputs[k]].type;
}

// The first instruction with `op`, or null.
inline const Instr* Find(const Program& p, OpCode op) {
  for (const Instr& in : p.instrs) {
    if (in.op == op) return &in;
  }
  return nullptr;
}

}  // namespace testing_util
}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_PROGRAM_TEST_UTIL_H_
