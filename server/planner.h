// The planner turns a client's JobSpec into a sharding plan, validating
// everything that can be checked before data moves, in JAX's order: mesh,
// function, argument count, in_specs (names, prefix, rank, divisibility),
// dtypes and keyword arguments, out_specs names.
//
// Pure logic; thread-compatible.
#ifndef SHARDMAP_SERVER_PLANNER_H_
#define SHARDMAP_SERVER_PLANNER_H_

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/block_math.h"
#include "core/mesh.h"
#include "core/partition_spec.h"
#include "program/ir.h"
#include "program/program_cache.h"
#include "server/resident_index.h"
#include "shardmap/v1/coordinator.pb.h"
#include "wire/proto_convert.h"

namespace shardmap {

struct ArgPlan {
  ArrayMeta meta;
  PartitionSpec spec;
  // How the argument splits; an unsplit (None) spec uses P(), so every
  // device gets the whole array.
  BlockLayout layout;
  // Set when the argument is a resident array the workers fetch.
  std::optional<ResidentArray> resident;
  // The job may consume the resident array (server/donation.h).
  bool donated = false;
};

// The resident arrays a job reads and those it writes, for NameLocks.
// Resident arguments and the state slots the function only reads are
// read; stored outputs and the slots it writes are written. A written slot
// is read too, but read-and-written counts as written: no other job may
// read the array while this one may replace it. No name is in both sets.
struct ResidentAccess {
  std::set<std::string> reads;
  std::set<std::string> writes;
};

// A state slot of the function bound to a resident array.
struct StatePlan {
  std::string slot;
  ResidentArray array;
  PartitionSpec spec;  // its sharding in this job (P() by default)
  bool write = false;
  // A written slot's --state-out-spec (StateBinding.out_spec) when it
  // splits the array otherwise than `spec` (server/state_reshard.h).
  std::optional<PartitionSpec> out_spec;
  // The sharding a written slot is stored back in.
  PartitionSpec stored_spec() const {
    if (out_spec.has_value()) return *out_spec;
    return spec.unsplit() ? PartitionSpec() : spec;
  }
};

struct JobPlan {
  Mesh mesh = *Mesh::Create({{"x", 1}});
  // The manual mesh axes (JAX's axis_names), in mesh order; empty: every
  // axis is manual. Specs and collectives name only these.
  std::vector<std::string> manual_axes;
  v1::FunctionSignature function;
  std::vector<ArgPlan> args;
  // One per output of the function.
  std::vector<PartitionSpec> out_specs;
  // The keyword arguments with defaults filled in, as JSON text.
  std::string kwargs_json;
  bool check_rep = true;
  // Per output: the resident array to store it as, or empty.
  std::vector<std::string> resident_outputs;
  bool overwrite = false;
  std::vector<StatePlan> states;
  // AccessOf(spec, function) of the spec this plan was made from.
  ResidentAccess access;
  // For an expression program (function.program() set): the program as
  // checked for this job's mesh, specs and argument types.
  std::shared_ptr<const program::Program> program;

  // The resident array output `o` is stored as, or empty if returned.
  const std::string& StoredAs(size_t o) const;
  // True if the job writes resident arrays (stored outputs or states).
  bool writes_residents() const;
  // Some argument is a resident array the job may consume (donation).
  bool donates() const;
  // The resident names the job reads and writes (access), for NameLocks.
  const std::set<std::string>& reads() const { return access.reads; }
  const std::set<std::string>& writes() const { return access.writes; }

  uint64_t input_bytes() const;
  // Whether `device` is the one whose copy of output `o` the coordinator
  // keeps: coordinate 0 on every mesh axis out_specs[o] does not mention.
  bool IsOutputRepresentative(int o, int64_t device) const;
};

using FunctionLookup =
    std::function<absl::StatusOr<v1::FunctionSignature>(const std::string&)>;

// The resident arrays a job with `spec` calling `function` reads and
// writes. Needs no resident index, so a job can take its locks before it
// plans against the versions its predecessors committed. Bindings of slots
// the function does not have are left out (PlanJob refuses them).
ResidentAccess AccessOf(const v1::JobSpec& spec,
                        const v1::FunctionSignature& function);

// Errors: INVALID_ARGUMENT naming the argument, dimension or axis, or
// the output or state slot when no_check_rep is asked of a job that stores
// copies (a stored output or written state whose spec leaves an axis out);
// NOT_FOUND for an unknown function (from `lookup`) or resident array;
// FAILED_PRECONDITION for a lost resident array. `index` may be null when
// the job names no resident arrays. A program (the signature `lookup`
// returns has its source) is checked as JAX checks a traced body
// (program/checker.h: line, column and caret in its errors; RESOURCE_-
// EXHAUSTED over its limits), through `programs` when given.
absl::StatusOr<JobPlan> PlanJob(const v1::JobSpec& spec,
                                const FunctionLookup& lookup,
                                const ResidentIndex* index = nullptr,
                                program::ProgramCache* programs = nullptr);

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_PLANNER_H_
