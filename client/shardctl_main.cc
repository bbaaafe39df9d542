// shardctl: the command-line client of shardmap.
#include <CLI/CLI.hpp>
#include <iostream>

#include "client/commands.h"
#include "client/exit_codes.h"

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
  shardctl run --coordinator 127.0.0.1:7070 --mesh data=4 --fn scale \
      --arg x.npy --in-spec "P('data')" --out-spec "P('data')" \
      --kwargs '{"alpha": 2.0}' --json

Exit codes: 0 ok, 64 usage, 65 bad input data, 66 missing input file,
69 unavailable, 70 internal, 73 cannot create output, 75 temporary failure.
)EX";

}  // namespace

int main(int argc, char** argv) {
  using namespace shardmap;
  CLI::App app{"shardctl: run JAX shard_map jobs on a shardmap cluster"};
  app.footer(kExamples);
  app.set_version_flag("--version", SHARDMAP_VERSION);
  app.require_subcommand(1);

  RunFlags run;
  CLI::App* run_cmd = app.add_subcommand("run", "run one job");
  auto* coord = run_cmd->add_option("--coordinator", run.coordinator,
                                    "coordinator HOST:PORT");
  run_cmd
      ->add_option("--local", run.local,
                   "start a coordinator and N workers on 127.0.0.1 for "
                   "this command")
      ->excludes(coord);
  run_cmd
      ->add_option("--mesh", run.mesh,
                   "AXIS=SIZE[,AXIS=SIZE...], e.g. data=2,model=4")
      ->required();
  run_cmd->add_option("--fn", run.fn, "name of a registered function");
  run_cmd->add_option("--expr", run.expr,
                      "an expression program (not yet available)");
  run_cmd->add_option("--arg", run.args,
                      "positional argument, a .npy file (repeat, in order)");
  run_cmd->add_option("--in-spec", run.in_specs,
                      "PartitionSpec per --arg, or one for all: P('x', None), "
                      "P(('x','y')), P(), None");
  run_cmd->add_option("--out", run.outs,
                      ".npy file per output (repeat, in order)");
  run_cmd->add_option("--out-spec", run.out_specs, "PartitionSpec per output");
  run_cmd->add_option("--kwargs", run.kwargs,
                      "static keyword arguments, a JSON object");
  run_cmd->add_flag("--no-check-rep", run.no_check_rep,
                    "do not verify that outputs are replicated along the axes "
                    "their out-spec leaves out");
  run_cmd->add_flag("--json", run.json, "print a machine-readable summary");
  run_cmd
      ->add_option("--timeout", run.timeout_seconds, "job deadline in seconds")
      ->capture_default_str();

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

  QueryFlags status;
  CLI::App* status_cmd = app.add_subcommand(
      "status", "live workers; exit 0 when the cluster serves");
  status_cmd
      ->add_option("--coordinator", status.coordinator, "coordinator HOST:PORT")
      ->capture_default_str();
  status_cmd->add_flag("--json", status.json, "machine-readable output");

  QueryFlags functions;
  CLI::App* functions_cmd = app.add_subcommand(
      "functions", "registered functions and their signatures");
  functions_cmd
      ->add_option("--coordinator", functions.coordinator,
                   "coordinator HOST:PORT")
      ->capture_default_str();
  functions_cmd->add_flag("--json", functions.json, "machine-readable output");

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
  if (run_cmd->parsed()) return RunCommand(run);
  if (up_cmd->parsed()) return UpCommand(up);
  if (status_cmd->parsed()) return StatusCommand(status);
  if (functions_cmd->parsed()) return FunctionsCommand(functions);
  return kExitUsage;
}
