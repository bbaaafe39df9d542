// shardctl: the command-line client of shardmap.
#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "client/commands.h"
#include "client/exit_codes.h"
#include "client/job_flags.h"
#include "ops/process_tuning.h"
#include "rpc/credentials.h"

namespace {

constexpr char kExamples[] = R"EX(
Examples:
  # A 4-worker cluster for one command: a + b, both split into 2x2 blocks
  # over the mesh axes x and y, the blocks of the sum reassembled.
  shardctl run --local 4 --mesh x=2,y=2 --fn add \
      --arg a.npy --arg b.npy --in-spec "P('x', 'y')" \
      --out c.npy --out-spec "P('x', 'y')"

  # A cluster that stays up, then jobs against it:
  shardctl up --workers 4 --listen 127.0.0.1:7070 &
  shardctl status --coordinator 127.0.0.1:7070
  shardctl functions --coordinator 127.0.0.1:7070
  shardctl health --addr 127.0.0.1:7070     # exit 0 when SERVING
  shardctl run --coordinator 127.0.0.1:7070 --mesh data=4 --fn scale \
      --arg x.npy --in-spec "P('data')" --out-spec "P('data')" \
      --kwargs '{"alpha": 2.0}' --json

  # Your own function as an expression program (a lambda or a def in a
  # small array language), checked like a JAX trace before anything runs:
  shardctl run --local 4 --mesh data=2,model=2 \
      --expr 'lambda x, w1, w2: psum(relu(x @ w1) @ w2, "model")' \
      --arg x.npy --arg w1.npy --arg w2.npy --in-spec "P('data', None)" \
      --in-spec "P(None, 'model')" --in-spec "P('model', None)" \
      --out-spec "P('data', None)"
  # The same flags with plan: shapes, costs and block layout, nothing run.
  shardctl plan --coordinator 127.0.0.1:7070 --mesh data=2,model=2 ...
  # Programs by name, kept under the coordinator's --data-dir:
  shardctl register mlp --expr-file mlp.py
  shardctl run --coordinator 127.0.0.1:7070 --fn mlp ...
  shardctl unregister mlp

  # Resident arrays: named arrays that stay on the workers, each sharded by
  # its own spec (--coordinator defaults to 127.0.0.1:7070).
  shardctl put w x.npy --mesh x=2,y=2 --spec "P('x', 'y')"
  shardctl ls
  shardctl get w --out w.npy
  # Jobs read them (resharded to the in-spec) and store outputs as them:
  shardctl run --coordinator 127.0.0.1:7070 --mesh x=2,y=2 --fn add \
      --arg @w --arg b.npy --in-spec "P('x')" \
      --out @w2 --out-spec "P('x')"
  # A state slot bound to a resident array (replicated unless --state-spec):
  shardctl put acc zeros.npy --mesh x=2 --spec "P('x')"
  shardctl run --coordinator 127.0.0.1:7070 --mesh x=2 --fn accumulate \
      --arg x.npy --in-spec "P('x')" --out-spec "P('x')" \
      --state buffer=acc --state-spec "buffer=P('x')"
  shardctl rm w w2

  # A model from an .npz, every array sharded by the first rule whose path
  # filter matches it (suffix at a '/' or glob; ';' separates rules):
  shardctl put-tree mlp model.npz --mesh data=2,model=2 \
      --rules "linear1/kernel=P(None, 'model'); */kernel=P('model'); */bias=P()"
  shardctl ls mlp/
  shardctl get-tree mlp model_back.npz

  # Checkpoints of every resident array (a directory the servers can reach):
  shardctl save /tmp/ckpt
  shardctl restore /tmp/ckpt

Exit codes: 0 ok, 64 usage, 65 bad input data (also: no resident array of
that name), 66 missing input file or checkpoint, 69 unavailable (also: a
lost resident array), 70 internal, 73 cannot create output (also: a
resident array of another shape, dtype or sharding holds the name; use
--overwrite), 69 also for a state-changing call without --call-id that
lost its connection or deadline (not safe to resend),
75 temporary failure (health: NOT_SERVING), 77 permission denied or not authenticated (token or
certificate), 78 bad security configuration.

Security: --tls-cert, --tls-key, --tls-ca (and --tls-server-name) make the
connection TLS; the bearer token comes from --token-file or SHARDMAP_TOKEN,
else from the file `shardctl up` keeps for the address dialled.
)EX";

}  // namespace

int main(int argc, char** argv) {
  shardmap::TuneProcess();
  using namespace shardmap;
  CLI::App app{"shardctl: run JAX shard_map jobs on a shardmap cluster"};
  app.footer(kExamples);
  app.set_version_flag("--version", SHARDMAP_VERSION);
  app.require_subcommand(1);
  // The security flags belong to shardctl itself; fallthrough lets them
  // follow the subcommand: shardctl run --token-file F ...
  app.fallthrough();
  SecurityOptions security_options;
  AddSecurityFlags(app, security_options, /*server=*/false);

  const auto add_retry_flags = [](CLI::App* cmd, std::string& call_id,
                                  int& retries) {
    cmd->add_option("--call-id", call_id,
                    "idempotency key: the coordinator runs a call with this "
                    "key at most once, and answers a repeat with the first "
                    "outcome (a script that may run a command twice passes "
                    "the same key each time)");
    cmd->add_option("--retries", retries,
                    "send again after UNAVAILABLE (0.2 s, 0.4 s, ...) when "
                    "that is safe; a call that writes resident arrays gets a "
                    "call id for it")
        ->capture_default_str()
        ->check(CLI::Range(0, 20));
  };
  auto coordinator_option = [](CLI::App* cmd, std::string& value) {
    cmd->add_option("--coordinator", value, "coordinator HOST:PORT")
        ->capture_default_str();
  };
  RunFlags run;
  CLI::App* run_cmd = app.add_subcommand("run", "run one job");
  AddJobOptions(run_cmd, run);
  add_retry_flags(run_cmd, run.call_id, run.retries);

  RunFlags plan;
  CLI::App* plan_cmd = app.add_subcommand(
      "plan",
      "check a job as run would and print its shapes, costs per device and "
      "which device holds which block, without running it (run's flags)");
  AddJobOptions(plan_cmd, plan);

  ProgramFlags reg;
  CLI::App* reg_cmd = app.add_subcommand(
      "register",
      "store an expression program on the coordinator under NAME; jobs then "
      "name it with --fn NAME");
  reg_cmd->add_option("NAME", reg.name, "the program's name")->required();
  auto* reg_expr =
      reg_cmd->add_option("--expr", reg.expr, "the program's source");
  reg_cmd
      ->add_option("--expr-file", reg.expr_file,
                   "a file holding the program's source")
      ->excludes(reg_expr);
  reg_cmd->add_flag("--replace", reg.replace,
                    "replace a program registered under NAME");
  coordinator_option(reg_cmd, reg.coordinator);
  reg_cmd->add_flag("--json", reg.json, "machine-readable output");

  ProgramFlags unreg;
  CLI::App* unreg_cmd = app.add_subcommand(
      "unregister", "remove an expression program registered under NAME");
  unreg_cmd->add_option("NAME", unreg.name, "the program's name")->required();
  coordinator_option(unreg_cmd, unreg.coordinator);
  unreg_cmd->add_flag("--json", unreg.json, "machine-readable output");

  UpFlags up;
  CLI::App* up_cmd = app.add_subcommand(
      "up",
      "run a local cluster in the foreground; prints the coordinator's "
      "address when ready, stops on SIGINT/SIGTERM");
  up_cmd->add_option("--workers", up.workers, "number of workers")->required();
  up_cmd->add_option("--listen", up.listen, "coordinator HOST:PORT")
      ->capture_default_str();
  up_cmd->add_option("--log-level", up.log_level, "log level of the processes")
      ->capture_default_str();
  up_cmd->add_flag("--insecure", up.insecure,
                   "let the coordinator listen on a non-loopback --listen "
                   "without TLS (warns loudly)");

  QueryFlags status;
  CLI::App* status_cmd = app.add_subcommand(
      "status", "live workers; exit 0 when the cluster serves");
  status_cmd
      ->add_option("--coordinator", status.coordinator, "coordinator HOST:PORT")
      ->capture_default_str();
  status_cmd->add_flag("--json", status.json, "machine-readable output");

  HealthFlags health;
  CLI::App* health_cmd = app.add_subcommand(
      "health",
      "grpc.health.v1 check of a coordinator or worker: exit 0 SERVING, 75 "
      "NOT_SERVING, 69 unreachable, 64 unknown service");
  health_cmd->add_option("--addr", health.addr, "HOST:PORT of the process")
      ->required();
  health_cmd->add_option("--service", health.service,
                         "service name (default: the whole server), e.g. "
                         "shardmap.v1.Coordinator or shardmap.v1.Worker");
  health_cmd
      ->add_option("--timeout", health.timeout_seconds,
                   "seconds to wait for an answer (with --watch: to watch)")
      ->capture_default_str()
      ->check(TimeoutSeconds());
  health_cmd->add_flag("--watch", health.watch,
                       "print the status and every change until --timeout");
  health_cmd->add_flag("--json", health.json, "machine-readable output");

  QueryFlags functions;
  CLI::App* functions_cmd = app.add_subcommand(
      "functions", "registered functions and their signatures");
  functions_cmd
      ->add_option("--coordinator", functions.coordinator,
                   "coordinator HOST:PORT")
      ->capture_default_str();
  functions_cmd->add_flag("--json", functions.json, "machine-readable output");

  // Resident arrays and checkpoints.
  PutFlags put;
  CLI::App* put_cmd = app.add_subcommand(
      "put", "store a .npy file as a resident array, sharded over a mesh");
  put_cmd
      ->add_option("NAME", put.name,
                   "a path such as mlp/linear1/kernel (a leading @ is "
                   "ignored)")
      ->required();
  put_cmd->add_option("FILE", put.file, "a .npy file")->required();
  put_cmd->add_option("--mesh", put.mesh, "AXIS=SIZE[,AXIS=SIZE...]")
      ->required();
  auto* put_spec =
      put_cmd->add_option("--spec", put.spec, "its PartitionSpec over the mesh")
          ->capture_default_str();
  put_cmd
      ->add_option("--rules", put.rules,
                   "FILTER=SPEC;... instead of --spec (nnx-style, as "
                   "put-tree's): the first rule matching NAME gives its "
                   "spec")
      ->excludes(put_spec);
  put_cmd->add_flag("--overwrite", put.overwrite,
                    "replace an array of another shape, dtype or sharding");
  add_retry_flags(put_cmd, put.call_id, put.retries);
  coordinator_option(put_cmd, put.coordinator);
  put_cmd->add_flag("--json", put.json, "machine-readable output");

  GetFlags get;
  CLI::App* get_cmd = app.add_subcommand(
      "get", "fetch a resident array: write it to --out, or print it");
  get_cmd->add_option("NAME", get.name, "the array's name")->required();
  get_cmd->add_option("--out", get.out, "write it to this .npy file");
  coordinator_option(get_cmd, get.coordinator);
  get_cmd->add_flag("--json", get.json, "machine-readable output");

  LsFlags ls;
  CLI::App* ls_cmd = app.add_subcommand(
      "ls",
      "list resident arrays: name, dtype[shape], mesh, spec, version, "
      "bytes, LOST if a worker holding it was lost");
  ls_cmd->add_option("PREFIX", ls.prefix,
                     "only names starting with this, e.g. mlp/");
  coordinator_option(ls_cmd, ls.coordinator);
  ls_cmd->add_flag("--json", ls.json, "machine-readable output");

  RmFlags rm;
  CLI::App* rm_cmd = app.add_subcommand("rm", "delete resident arrays");
  rm_cmd->add_option("NAME", rm.names, "array names")->required();
  coordinator_option(rm_cmd, rm.coordinator);
  rm_cmd->add_flag("--json", rm.json, "machine-readable output");

  PutTreeFlags tree;
  CLI::App* tree_cmd = app.add_subcommand(
      "put-tree",
      "store every array KEY of an .npz as PREFIX/KEY, sharded by the first "
      "rule whose filter matches KEY");
  tree_cmd->add_option("PREFIX", tree.prefix, "name prefix, e.g. mlp")
      ->required();
  tree_cmd->add_option("FILE", tree.file, "an .npz file")->required();
  tree_cmd->add_option("--mesh", tree.mesh, "AXIS=SIZE[,AXIS=SIZE...]")
      ->required();
  tree_cmd
      ->add_option("--rules,--rule", tree.rules,
                   "FILTER=SPEC[;FILTER=SPEC...] (repeat; first match wins). "
                   "FILTER matches the key or a part of it after a '/' "
                   "('linear1/kernel' matches 'mlp/linear1/kernel'); '*' and "
                   "'?' glob within a path component; a leading '/' anchors "
                   "it at the start")
      ->required();
  tree_cmd->add_flag("--overwrite", tree.overwrite,
                     "replace arrays of another shape, dtype or sharding");
  tree_cmd->add_flag("--dry-run", tree.dry_run,
                     "print each array's spec and rule; put nothing");
  tree_cmd
      ->add_option("--max-bytes", tree.max_bytes,
                   "refuse an archive whose arrays total more bytes than "
                   "this once decompressed (checked before decompressing)")
      ->capture_default_str();
  coordinator_option(tree_cmd, tree.coordinator);
  tree_cmd->add_flag("--json", tree.json, "machine-readable output");

  GetTreeFlags get_tree;
  CLI::App* get_tree_cmd = AddGetTreeCommand(app, get_tree);

  CheckpointFlags save;
  CLI::App* save_cmd = app.add_subcommand(
      "save", "checkpoint every resident array into DIR (replaced atomically)");
  save_cmd
      ->add_option("DIR", save.directory,
                   "a directory the coordinator and workers can reach")
      ->required();
  coordinator_option(save_cmd, save.coordinator);
  save_cmd->add_flag("--json", save.json, "machine-readable output");

  CheckpointFlags restore;
  CLI::App* restore_cmd = app.add_subcommand(
      "restore", "load the resident arrays of a checkpoint made by save");
  restore_cmd->add_option("DIR", restore.directory, "the checkpoint directory")
      ->required();
  coordinator_option(restore_cmd, restore.coordinator);
  restore_cmd->add_flag("--json", restore.json, "machine-readable output");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "error: INVALID_ARGUMENT: " << e.what()
              << "\nRun with --help for usage." << std::endl;
    return kExitUsage;
  }
  auto security = Security::Load(security_options);
  if (!security.ok()) return ReportConfigError(security.status());
  ChannelSecurity channels = security->Channels();
  // Without a token, use the one a local cluster (shardctl up) keeps for
  // the address dialled, if any.
  channels.discover_local_token = true;
  SetDefaultChannelSecurity(channels);
  run.security = *security;
  up.security = *security;
  plan.security = *security;
  if (run_cmd->parsed()) return RunCommand(run);
  if (plan_cmd->parsed()) return PlanCommand(plan);
  if (reg_cmd->parsed()) return RegisterCommand(reg);
  if (unreg_cmd->parsed()) return UnregisterCommand(unreg);
  if (up_cmd->parsed()) return UpCommand(up);
  if (status_cmd->parsed()) return StatusCommand(status);
  if (functions_cmd->parsed()) return FunctionsCommand(functions);
  if (health_cmd->parsed()) return HealthCommand(health);
  if (put_cmd->parsed()) return PutCommand(put);
  if (get_cmd->parsed()) return GetCommand(get);
  if (get_tree_cmd->parsed()) return GetTreeCommand(get_tree);
  if (ls_cmd->parsed()) return LsCommand(ls);
  if (rm_cmd->parsed()) return RmCommand(rm);
  if (tree_cmd->parsed()) return PutTreeCommand(tree);
  if (save_cmd->parsed()) return SaveCommand(save);
  if (restore_cmd->parsed()) return RestoreCommand(restore);
  return kExitUsage;
}
