// The checker's state and its rules, shared by program/checker*.cc:
// checker.cc (names, statements, outputs, limits), checker_elementwise.cc
// (promotion, broadcasting, elementwise ops), checker_reduce.cc
// (reductions, matmul, softmax), checker_layout.cc (shapes, indexing,
// array constructors), checker_collective.cc (jax.lax collectives).
// Not for use outside program/checker*.cc.
#ifndef SHARDMAP_PROGRAM_CHECKER_INTERNAL_H_
#define SHARDMAP_PROGRAM_CHECKER_INTERNAL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/mesh.h"
#include "program/ast.h"
#include "program/checker.h"
#include "program/ir.h"
#include "program/types.h"

namespace shardmap {
namespace program {
namespace checker_internal {

// Largest rank and tuple length a program may build.
inline constexpr int kMaxRank = 32;
inline constexpr int kMaxTuple = 1024;
// Values nested in one tuple, counted through every level: a tuple of
// tuples doubles with each `t = (t, t)`, so its whole size is bounded, not
// only its length.
inline constexpr int64_t kMaxTupleNodes = 1 << 16;

// A value while checking: an array (an instruction) or a Python-level
// value that exists only at check time.
struct Value {
  enum Kind {
    kArray,
    kInt,
    kFloat,
    kBool,
    kString,
    kTuple,  // also lists (is_list)
    kNone,
    kEllipsis,
    kSlice,     // items: start, stop, step (kNone when left out)
    kDTypeVal,  // jnp.float32 and friends; `elem`
    kModule,    // text: "jnp", "lax", "jax", "jax.nn"
    kFunction,  // text: canonical name; items[0] is self for a method
  };
  Kind kind = kNone;
  int instr = -1;     // kArray
  bool weak = false;  // kArray: a weakly typed array (JAX's weak_type)
  int64_t i = 0;
  double f = 0;
  std::string text;
  ElemType elem = ElemType::kFloat32;
  bool is_list = false;
  std::vector<Value> items;
  // 1 + the nodes of every item, through every level (kMaxTupleNodes).
  int64_t nodes = 1;
};

// An argument of a call with where it was written.
struct Arg {
  Value value;
  SourcePos pos;
  bool given = false;
};

class Checker {
 public:
  Checker(absl::string_view source, const Mesh& mesh,
          const CheckOptions& options)
      : src_(source), mesh_(mesh), options_(options) {}

  // checker.cc
  absl::StatusOr<Program> Run(const FunctionAst& f,
                              const std::vector<ArgType>& args);

  // Errors at a position.
  absl::Status Error(SourcePos p, absl::string_view what) const;
  // Appends an instruction (RESOURCE_EXHAUSTED past the limit).
  absl::StatusOr<int> Emit(Instr instr);
  const Instr& At(int i) const { return prog_.instrs[i]; }
  const ValueType& TypeOf(const Value& v) const { return At(v.instr).type; }
  std::string Describe(const Value& v) const;
  Value ArrayValue(int instr, bool weak = false) const;

  // Binds a call's arguments to `names` (positional first, then by
  // keyword); the first `required` must be given.
  absl::StatusOr<std::vector<Arg>> Bind(
      absl::string_view fn, SourcePos pos, const std::vector<Arg>& positional,
      const std::vector<std::pair<std::string, Arg>>& keywords,
      const std::vector<std::string>& names, int required) const;
  // Static (check-time) arguments.
  absl::StatusOr<int64_t> StaticInt(absl::string_view fn,
                                    absl::string_view what, const Arg& a) const;
  absl::StatusOr<bool> StaticBool(absl::string_view fn, absl::string_view what,
                                  const Arg& a) const;
  // An int or a tuple/list of ints.
  absl::StatusOr<std::vector<int64_t>> StaticInts(absl::string_view fn,
                                                  absl::string_view what,
                                                  const Arg& a) const;
  absl::StatusOr<ElemType> StaticDType(absl::string_view fn,
                                       const Arg& a) const;
  // `axis` made non-negative for rank `rank`.
  absl::StatusOr<int64_t> NormalizeAxis(absl::string_view fn, SourcePos pos,
                                        int64_t axis, int64_t rank) const;
  // Elements of a shape, RESOURCE_EXHAUSTED when it overflows.
  absl::StatusOr<int64_t> Elements(SourcePos pos,
                                   const std::vector<int64_t>& shape) const;

  // checker_elementwise.cc
  // The dtype of a value in JAX's lattice (Python scalars are weak).
  absl::StatusOr<DType> DTypeOf(SourcePos pos, const Value& v) const;
  bool IsNumber(const Value& v) const {
    return v.kind == Value::kInt || v.kind == Value::kFloat ||
           v.kind == Value::kBool || v.kind == Value::kArray;
  }
  // Makes `v` an array of elem `t.elem` (a constant for a Python scalar, a
  // kConvert when the elem differs).
  absl::StatusOr<Value> AsArray(SourcePos pos, const Value& v, DType t);
  absl::StatusOr<Value> Convert(SourcePos pos, const Value& v, ElemType t);
  absl::StatusOr<std::vector<int64_t>> BroadcastShapes(
      absl::string_view fn, SourcePos pos,
      const std::vector<const Value*>& vs) const;
  std::set<std::string> VmaUnion(const std::vector<const Value*>& vs) const;
  // An elementwise op on arrays already of one elem.
  absl::StatusOr<Value> EmitElementwise(OpCode op, SourcePos pos,
                                        const std::vector<Value>& operands,
                                        ElemType result, bool weak);
  absl::StatusOr<Value> BinaryOp(const std::string& op, SourcePos pos,
                                 const Value& a, const Value& b);
  // checker_fold.cc: Python arithmetic on Python scalars, at check time.
  absl::StatusOr<Value> FoldBinary(OpCode op, SourcePos pos, const Value& a,
                                   const Value& b) const;
  absl::StatusOr<Value> UnaryOp(const std::string& op, SourcePos pos,
                                const Value& a);
  absl::StatusOr<Value> Where(SourcePos pos, const Value& c, const Value& a,
                              const Value& b);
  absl::StatusOr<Value> AsType(SourcePos pos, const Value& x, ElemType t);
  absl::StatusOr<Value> Constant(SourcePos pos, DType t, double value,
                                 int64_t int_value,
                                 const std::vector<int64_t>& shape);

  // checker_reduce.cc
  absl::StatusOr<Value> Reduce(const std::string& fn, SourcePos pos,
                               const Value& x, const Arg& axis, bool keepdims);
  absl::StatusOr<Value> ReduceAxes(OpCode op, SourcePos pos, const Value& x,
                                   std::vector<int64_t> axes, bool keepdims,
                                   ElemType result, bool weak);
  absl::StatusOr<Value> MatMul(SourcePos pos, const Value& a, const Value& b);
  absl::StatusOr<Value> Softmax(SourcePos pos, const Value& x, const Arg& axis);
  absl::StatusOr<Value> LogSumExp(SourcePos pos, const Value& x,
                                  const Arg& axis, bool keepdims);
  // The axes an `axis` argument names for rank `rank` (None = all).
  absl::StatusOr<std::vector<int64_t>> ReductionAxes(absl::string_view fn,
                                                     const Arg& axis,
                                                     int64_t rank) const;

  // checker_layout.cc
  absl::StatusOr<Value> Reshape(SourcePos pos, const Value& x,
                                const Arg& shape);
  absl::StatusOr<Value> ReshapeTo(SourcePos pos, const Value& x,
                                  const std::vector<int64_t>& shape);
  absl::StatusOr<Value> Transpose(SourcePos pos, const Value& x,
                                  const Arg& perm);
  absl::StatusOr<Value> Concatenate(const std::string& fn, SourcePos pos,
                                    const Arg& list, const Arg& axis);
  absl::StatusOr<Value> Index(SourcePos pos, const Value& x,
                              const Value& index);
  absl::StatusOr<Value> Fill(const std::string& fn, SourcePos pos,
                             const std::vector<Arg>& a);
  absl::StatusOr<Value> Arange(SourcePos pos, const std::vector<Arg>& a);

  // checker_collective.cc
  absl::StatusOr<Value> Collective(
      const std::string& fn, SourcePos pos, const std::vector<Arg>& positional,
      const std::vector<std::pair<std::string, Arg>>& keywords);
  absl::Status PermPairs(const std::string& fn, const Arg& perm, int64_t n,
                         std::vector<std::pair<int64_t, int64_t>>* out) const;

  const CheckOptions& options() const { return options_; }
  const Mesh& mesh() const { return mesh_; }

 private:
  // checker.cc
  absl::StatusOr<Value> Eval(const Expr& e);
  absl::StatusOr<Value> Lookup(const Expr& e);
  absl::StatusOr<Value> SliceTuple(SourcePos pos, const Value& t,
                                   const Value& slice) const;
  absl::StatusOr<Value> Attribute(const Expr& e);
  absl::StatusOr<Value> CallExpr(const Expr& e);
  absl::StatusOr<Value> Call(
      const Value& fn, SourcePos pos, const std::vector<Arg>& positional,
      const std::vector<std::pair<std::string, Arg>>& keywords);
  absl::StatusOr<Value> CallArray(
      const std::string& fn, SourcePos pos, const std::vector<Arg>& positional,
      const std::vector<std::pair<std::string, Arg>>& keywords);
  absl::StatusOr<std::vector<int>> Outputs(const Value& v, const Expr& e);
  absl::Status Finish();

  absl::string_view src_;
  const Mesh& mesh_;
  CheckOptions options_;
  Program prog_;
  std::map<std::string, Value> env_;
};

// Names of the functions a module offers ("" is the bare names): the
// canonical name, or "" when it has none of that name.
std::string CanonicalFunction(absl::string_view module, absl::string_view name);
// The closest of `candidates` to `name`, or "" when none is close.
std::string Nearest(absl::string_view name,
                    const std::vector<std::string>& candidates);

}  // namespace checker_internal
}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_CHECKER_INTERNAL_H_
