// Checks an expression program the way JAX traces a shard_map body: with
// only the mesh and each argument's block shape, dtype and varying axes,
// it infers the type of every value, refuses what JAX would refuse, and
// lowers the program to IR (program/ir.h).
//
// Errors are INVALID_ARGUMENT (RESOURCE_EXHAUSTED for the limits) with a
// message that names the line and column, quotes the source line with a
// caret under the spot, and says what was expected, e.g.
//
//   line 1, column 24: psum: unknown mesh axis 'modle'; the mesh has
//   'data', 'model'
//     lambda x, w: psum(x @ w, 'modle')
//                              ^
//
// Thread-safe: a pure function of its inputs.
#ifndef SHARDMAP_PROGRAM_CHECKER_H_
#define SHARDMAP_PROGRAM_CHECKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/mesh.h"
#include "core/partition_spec.h"
#include "program/ir.h"

namespace shardmap {
namespace program {

struct Limits {
  int64_t max_source_bytes = 64 << 10;
  int64_t max_instructions = 10000;
  // Peak bytes of live values per device (Program::peak_bytes).
  int64_t max_peak_bytes = int64_t{4} << 30;
};

struct CheckOptions {
  // JAX's check_vma: track varying axes and refuse outputs whose out_spec
  // promises a replication the program does not give. Off: no tracking,
  // and collectives accept any operand.
  bool check_vma = true;
  // The manual mesh axes of a partial-manual job (JAX's axis_names);
  // empty: every axis. Collectives, axis_index and axis_size may name only
  // these.
  std::vector<std::string> manual_axes;
  Limits limits;
};

// One positional argument as this device sees it.
struct ArgType {
  ElemType elem = ElemType::kFloat32;
  std::vector<int64_t> block_shape;
  std::set<std::string> vma;  // the mesh axes its in_spec names
};

// What the program's source says of itself, without any argument types:
// its parameter names and, when the source shows it (a tuple literal in
// the return or lambda body), the number of outputs (-1 when unknown).
struct Signature {
  std::string name;  // the def's name, or "lambda"
  std::vector<std::string> params;
  int num_outputs = -1;
};

// Parses only. INVALID_ARGUMENT with line, column and caret.
absl::StatusOr<Signature> ParseSignature(absl::string_view source,
                                         const Limits& limits = Limits());

// Parses, checks and lowers `source` for `args` on `mesh`. The number of
// arguments must equal the number of parameters.
absl::StatusOr<Program> CheckProgram(absl::string_view source, const Mesh& mesh,
                                     const std::vector<ArgType>& args,
                                     const CheckOptions& options);

// JAX's output rule (check_vma): each output may vary only over mesh axes
// its out_spec names. `out_specs` has one spec per output, or one for all.
// INVALID_ARGUMENT in JAX's words ("out_specs[0] is P() which implies
// that the corresponding output value is replicated across mesh axis 'i',
// but could not infer replication over any axes"), naming `function` and
// the output, and, when `source` is given, the line and column where the
// first such output is made, with a caret.
absl::Status CheckOutputReplication(const Program& program, const Mesh& mesh,
                                    const std::vector<PartitionSpec>& out_specs,
                                    absl::string_view function = "program",
                                    absl::string_view source = "");

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_CHECKER_H_
