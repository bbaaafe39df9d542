// shardctl's subcommands. Each returns the process exit code (exit_codes.h)
// and reports its own errors: "error: <CODE NAME>: <message>" on stderr,
// and with --json also {"error": {...}} on stdout.
#ifndef SHARDMAP_CLIENT_COMMANDS_H_
#define SHARDMAP_CLIENT_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "rpc/credentials.h"

namespace CLI {
class App;
}  // namespace CLI

namespace shardmap {

struct RunFlags {
  std::string coordinator;
  int local = 0;
  std::string mesh;  // empty: SHARDMAP_MESH, else the residents' mesh
  // JAX's axis_names (the manual axes) and the legacy auto (the others).
  std::vector<std::string> axis_names;
  std::vector<std::string> auto_axes;
  std::string fn;
  std::string expr;       // an expression program's source
  std::string expr_file;  // or the file that holds it
  // A .npy file, or "@NAME" for a resident array.
  std::vector<std::string> args;
  std::vector<std::string> in_specs;
  // A .npy file, or "@NAME" to store the output as a resident array.
  std::vector<std::string> outs;
  std::vector<std::string> out_specs;
  bool overwrite = false;           // stored outputs may replace another shape
  std::vector<int> donate;          // --arg positions the job may consume
  std::vector<std::string> states;  // SLOT=NAME
  std::vector<std::string> state_specs;  // SLOT=SPEC, or SPEC for all
  // Pytrees (client/tree_run.h).
  std::vector<std::string> in_rules;         // FILTER=SPEC;...
  std::vector<std::string> out_rules;        // FILTER=SPEC;...
  std::string out_tree;                      // args[N] or a literal
  std::vector<std::string> state_out_specs;  // SLOT=SPEC
  std::string kwargs;
  bool no_check_rep = false;
  bool json = false;
  double timeout_seconds = 600;
  std::string traceparent;  // W3C trace context; empty: a new trace
  Security security;        // for --local: the cluster's TLS files and token
  std::string call_id;      // idempotency key; empty: none (or made, below)
  int retries = 0;          // resend after UNAVAILABLE when that is safe
};
int RunCommand(const RunFlags& flags);
// shardctl plan: the same flags; prints the plan (program_commands.cc).
int PlanCommand(const RunFlags& flags);

// shardctl register / unregister (program_commands.cc).
struct ProgramFlags {
  std::string coordinator = "127.0.0.1:7070";
  std::string name;
  std::string expr;
  std::string expr_file;
  bool replace = false;
  bool json = false;
};
int RegisterCommand(const ProgramFlags& flags);
int UnregisterCommand(const ProgramFlags& flags);

struct UpFlags {
  int workers = 1;
  std::string listen = "127.0.0.1:7070";
  std::string log_level = "warn";
  bool insecure = false;  // passed to the coordinator
  Security security;      // the cluster's TLS files and token
};
int UpCommand(const UpFlags& flags);

struct QueryFlags {
  std::string coordinator = "127.0.0.1:7070";
  bool json = false;
};
int StatusCommand(const QueryFlags& flags);
int FunctionsCommand(const QueryFlags& flags);

// grpc.health.v1 of any shardmap process (health_command.cc). Exit 0
// SERVING, 75 NOT_SERVING (or UNKNOWN), 69 unreachable or no answer in
// time, 64 unknown service.
struct HealthFlags {
  std::string addr;
  std::string service;  // "" = the whole server
  double timeout_seconds = 5;
  bool watch = false;  // print every change until the timeout
  bool json = false;
};
int HealthCommand(const HealthFlags& flags);

// Resident arrays and checkpoints (array_commands.cc).
struct PutFlags {
  std::string coordinator = "127.0.0.1:7070";
  std::string name;
  std::string file;  // .npy
  std::string mesh;
  std::string spec = "P()";
  // nnx-style FILTER=SPEC rules (client/tree_rules.h) instead of spec:
  // the first whose filter matches the name gives the spec.
  std::string rules;
  bool overwrite = false;
  bool json = false;
  std::string call_id;
  int retries = 0;
};
int PutCommand(const PutFlags& flags);

struct GetFlags {
  std::string coordinator = "127.0.0.1:7070";
  std::string name;
  std::string out;  // .npy; empty: print the values
  bool json = false;
};
int GetCommand(const GetFlags& flags);

struct LsFlags {
  std::string coordinator = "127.0.0.1:7070";
  std::string prefix;
  bool json = false;
};
int LsCommand(const LsFlags& flags);

struct RmFlags {
  std::string coordinator = "127.0.0.1:7070";
  std::vector<std::string> names;
  bool json = false;
};
int RmCommand(const RmFlags& flags);

struct PutTreeFlags {
  std::string coordinator = "127.0.0.1:7070";
  std::string prefix;
  std::string file;  // .npz
  std::string mesh;
  // Each --rule/--rules value: FILTER=SPEC[;FILTER=SPEC...], in order.
  std::vector<std::string> rules;
  bool overwrite = false;
  bool dry_run = false;
  bool json = false;
  // Largest total the archive's arrays may decompress to.
  uint64_t max_bytes = uint64_t{16} << 30;
};
int PutTreeCommand(const PutTreeFlags& flags);

// shardctl get-tree (get_tree_command.cc): the inverse of put-tree.
struct GetTreeFlags {
  std::string coordinator = "127.0.0.1:7070";
  std::string prefix;
  std::string file;  // .npz
  bool json = false;
};
int GetTreeCommand(const GetTreeFlags& flags);
// Adds the get-tree subcommand and its flags to `app`.
CLI::App* AddGetTreeCommand(CLI::App& app, GetTreeFlags& flags);

struct CheckpointFlags {
  std::string coordinator = "127.0.0.1:7070";
  std::string directory;
  bool json = false;
};
int SaveCommand(const CheckpointFlags& flags);
int RestoreCommand(const CheckpointFlags& flags);

// Prints the error (stderr, and JSON on stdout when `json`); returns
// `exit_code`.
int ReportError(const absl::Status& status, int exit_code, bool json);

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_COMMANDS_H_
