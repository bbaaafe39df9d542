// A function's declaration for the worker: its name, what it takes
// (arity, dtypes, keyword arguments with types and defaults, state slots),
// how many outputs it returns, its shape program, and its kernel.
//
//   Function("layernorm_tp", 3)
//       .DTypes({DType::kFloat32, DType::kFloat64}).SameDType()
//       .Kwarg("axes", "axes", "the axis the features are split over")
//       .Kwarg("eps", "number", "1e-5", "added to the variance")
//       .ShapeProgram("lambda x, g, b: x")
//       .Kernel(LayerNormTp);
//
// Keyword argument types: "number", "integer", "boolean", "axes",
// "int_pairs", "int_or_int_list_or_null", "any". A default is JSON text.
// The shape program is a `lambda` in the program language (docs/PROGRAMS.md)
// computing outputs of the right shapes and dtypes from the arguments'
// per-device blocks; `{name}` stands for keyword argument `name`. The
// coordinator's `plan` uses it, and the worker checks every output against
// it.
//
// Plain data; not thread-safe while being built.
#ifndef SHARDMAP_SDK_FUNCTION_H_
#define SHARDMAP_SDK_FUNCTION_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "shardmap/context.h"
#include "shardmap/tensor.h"

namespace shardmap {
namespace sdk {

// A kernel gets this device's argument blocks and returns its outputs:
// views of tensors from Context::Allocate or a collective (handed over
// without a copy), of its arguments (likewise), or of its own memory
// (copied). It may write into its arguments. It reports bad input as
// INVALID_ARGUMENT naming the argument; a thrown exception fails the job
// with INTERNAL naming the function, and the worker carries on.
using Kernel = std::function<absl::StatusOr<std::vector<TensorView>>(
    Context& ctx, const std::vector<TensorView>& args)>;

struct KwargDecl {
  std::string name;
  std::string type;
  bool required = true;
  std::string default_json;  // when !required
  std::string doc;
};

struct StateDecl {
  std::string name;
  bool write = false;
  std::string doc;
};

class Function {
 public:
  Function(std::string name, int arity, int num_outputs = 1)
      : name_(std::move(name)), arity_(arity), num_outputs_(num_outputs) {}

  // A required keyword argument.
  Function& Kwarg(std::string name, std::string type, std::string doc = "") {
    kwargs_.push_back(
        {std::move(name), std::move(type), true, "", std::move(doc)});
    return *this;
  }
  // An optional keyword argument with a default given as JSON text.
  Function& Kwarg(std::string name, std::string type, std::string default_json,
                  std::string doc) {
    kwargs_.push_back({std::move(name), std::move(type), false,
                       std::move(default_json), std::move(doc)});
    return *this;
  }
  // The dtypes the arguments may have (empty: any).
  Function& DTypes(std::vector<DType> dtypes) {
    dtypes_ = std::move(dtypes);
    return *this;
  }
  // All arguments must share one dtype.
  Function& SameDType() {
    same_dtype_ = true;
    return *this;
  }
  Function& Doc(std::string doc) {
    doc_ = std::move(doc);
    return *this;
  }
  Function& ShapeProgram(std::string source) {
    shape_program_ = std::move(source);
    return *this;
  }
  // The jax.lax collective the function performs on args[0] with its
  // keyword arguments ("psum", "all_gather", ...), so the coordinator
  // checks the call by that collective's rules; "axes" if it only names
  // mesh axes in its "axes" keyword argument.
  Function& Collective(std::string op) {
    collective_ = std::move(op);
    return *this;
  }
  // A state slot it reads (and, with `write`, updates).
  Function& State(std::string name, bool write, std::string doc = "") {
    states_.push_back({std::move(name), write, std::move(doc)});
    return *this;
  }
  Function& Kernel(sdk::Kernel kernel) {
    kernel_ = std::move(kernel);
    return *this;
  }

  const std::string& name() const { return name_; }
  int arity() const { return arity_; }
  int num_outputs() const { return num_outputs_; }
  const std::vector<KwargDecl>& kwargs() const { return kwargs_; }
  const std::vector<DType>& dtypes() const { return dtypes_; }
  bool same_dtype() const { return same_dtype_; }
  const std::string& doc() const { return doc_; }
  const std::string& shape_program() const { return shape_program_; }
  const std::string& collective() const { return collective_; }
  const std::vector<StateDecl>& states() const { return states_; }
  const sdk::Kernel& kernel() const { return kernel_; }

 private:
  std::string name_;
  int arity_;
  int num_outputs_;
  std::vector<KwargDecl> kwargs_;
  std::vector<DType> dtypes_;
  bool same_dtype_ = false;
  std::string doc_;
  std::string shape_program_;
  std::string collective_;
  std::vector<StateDecl> states_;
  sdk::Kernel kernel_;
};

}  // namespace sdk
}  // namespace shardmap

#endif  // SHARDMAP_SDK_FUNCTION_H_
