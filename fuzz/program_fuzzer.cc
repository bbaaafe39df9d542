// libFuzzer target: the source of an expression program, parsed
// (ParseSignature) and checked (CheckProgram, with and without check_vma,
// then CheckOutputReplication) on a fixed mesh data=2,model=4 with
// arguments of fixed types. Each step must give a value or a clean
// INVALID_ARGUMENT / RESOURCE_EXHAUSTED with a bounded message, never
// crash, overflow the stack or hang; a checked program must be well
// formed (operands before their users, typed outputs, peak within the
// limit, and accepted by the evaluator's validation). Seeds in
// corpus/program/.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "program/checker.h"
#include "program/eval_validate.h"

namespace {

using namespace shardmap;
using namespace shardmap::program;

void Fail(const char* what) {
  std::fprintf(stderr, "program_fuzzer: %s\n", what);
  std::abort();
}

void CheckStatus(const absl::Status& s) {
  if (s.code() != absl::StatusCode::kInvalidArgument &&
      s.code() != absl::StatusCode::kResourceExhausted) {
    Fail("unexpected status code");
  }
  if (s.message().empty() || s.message().size() > 4096) {
    Fail("empty or unbounded message");
  }
}

void CheckWellFormed(const Program& p, const Limits& limits) {
  if (p.outputs.empty()) Fail("no outputs");
  if (p.peak_bytes > limits.max_peak_bytes) Fail("peak over the limit");
  if (static_cast<int64_t>(p.instrs.size()) > limits.max_instructions) {
    Fail("more instructions than the limit");
  }
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    for (int o : p.instrs[i].operands) {
      if (o < 0 || static_cast<size_t>(o) >= i) Fail("operand out of order");
    }
    for (int64_t d : p.instrs[i].type.shape) {
      if (d < 0) Fail("negative dimension");
    }
  }
  for (int o : p.outputs) {
    if (o < 0 || static_cast<size_t>(o) >= p.instrs.size()) Fail("bad output");
    if (p.instrs[o].type.elem == ElemType::kBool) Fail("bool output");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Mesh* mesh = new Mesh(*Mesh::Parse("data=2,model=4"));
  const std::string source(reinterpret_cast<const char*>(data), size);
  CheckOptions options;
  options.limits.max_instructions = 2000;
  options.limits.max_peak_bytes = int64_t{1} << 26;
  auto sig = ParseSignature(source, options.limits);
  if (!sig.ok()) {
    CheckStatus(sig.status());
    return 0;
  }
  // A pool of argument types, given to the parameters in turn.
  const std::vector<ArgType> pool = {
      {ElemType::kFloat32, {8, 4}, {"data"}},
      {ElemType::kFloat32, {4, 8}, {"model"}},
      {ElemType::kInt32, {8}, {}},
      {ElemType::kFloat64, {2, 4, 8}, {"data", "model"}}};
  std::vector<ArgType> args;
  for (size_t i = 0; i < sig->params.size(); ++i) {
    args.push_back(pool[i % pool.size()]);
  }
  for (bool vma : {true, false}) {
    options.check_vma = vma;
    auto p = CheckProgram(source, *mesh, args, options);
    if (!p.ok()) {
      CheckStatus(p.status());
      continue;
    }
    CheckWellFormed(*p, options.limits);
    // What the checker accepts, the evaluator must accept too.
    if (!ValidateProgram(*p).ok()) Fail("the evaluator refuses the program");
    if (sig->num_outputs >= 0 &&
        static_cast<size_t>(sig->num_outputs) != p->outputs.size()) {
      Fail("signature and program disagree on the outputs");
    }
    absl::Status rep = CheckOutputReplication(*p, *mesh, {PartitionSpec()});
    if (!rep.ok() && rep.code() != absl::StatusCode::kInvalidArgument) {
      Fail("replication check failed oddly");
    }
  }
  return 0;
}
