#include "client/job_flags.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "client/tree_run.h"

namespace shardmap {

CLI::Validator TimeoutSeconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        constexpr double kMaxSeconds = 365.0 * 24 * 3600;
        double v = 0;
        if (!absl::SimpleAtod(text, &v) || !std::isfinite(v) || v <= 0 ||
            v > kMaxSeconds) {
          return "--timeout must be a number of seconds in (0, 31536000], "
                 "got '" +
                 text + "'";
        }
        return "";
      },
      "SECONDS>0");
}

void AddJobOptions(CLI::App* cmd, RunFlags& run) {
  auto* coord = cmd->add_option("--coordinator", run.coordinator,
                                "coordinator HOST:PORT");
  cmd->add_option("--local", run.local,
                  "start a coordinator and N workers on 127.0.0.1 for "
                  "this command")
      ->excludes(coord);
  cmd->add_option("--mesh", run.mesh,
                  "AXIS=SIZE[,AXIS=SIZE...], e.g. data=2,model=4 (default: "
                  "$SHARDMAP_MESH, else the mesh of the resident --arg "
                  "@NAMEs)");
  cmd->add_option("--axis-names", run.axis_names,
                  "the manual mesh axes (JAX's axis_names), comma-"
                  "separated; the others are auto: work is repeated "
                  "along them (default: every axis manual)")
      ->delimiter(',');
  cmd->add_option("--auto", run.auto_axes,
                  "the auto mesh axes (JAX's legacy auto=), comma-separated: "
                  "the complement of --axis-names (both given: they must "
                  "agree)")
      ->delimiter(',');
  cmd->add_option("--fn", run.fn,
                  "name of a function: a built-in, a plugin's or a "
                  "registered program (shardctl functions)");
  auto* expr =
      cmd->add_option("--expr", run.expr,
                      "an expression program to run instead of --fn, e.g. "
                      "'lambda x, w: psum(x @ w, \"model\")'");
  cmd->add_option("--expr-file", run.expr_file,
                  "a file holding an expression program (a lambda or a def)")
      ->excludes(expr);
  cmd->add_option("--arg", run.args,
                  "positional argument, a .npy file or @NAME of a "
                  "resident array (repeat, in order)");
  cmd->add_option("--in-spec", run.in_specs,
                  "PartitionSpec per --arg, or one for all: P('x', None), "
                  "P(('x','y')), P(), None, or Infer (a resident @NAME's own "
                  "spec); left out: every --arg must be a @NAME and keeps "
                  "its own spec");
  cmd->add_option("--out", run.outs,
                  ".npy file, or @NAME to store it as a resident array, "
                  "per output (repeat, in order)");
  cmd->add_option("--out-spec", run.out_specs, "PartitionSpec per output");
  cmd->add_flag("--overwrite", run.overwrite,
                "an --out @NAME may replace an array of another shape, "
                "dtype or sharding");
  cmd->add_option("--donate", run.donate,
                  "I[,I...]: the --arg @NAME positions (from 0) the job "
                  "may consume (JAX's donate_argnums): an --out @NAME of "
                  "the same name and sharding then updates it in place, "
                  "without a second copy; if the job fails, the array is "
                  "lost")
      ->delimiter(',');
  cmd->add_option("--state", run.states,
                  "SLOT=NAME: bind the function's state slot to a "
                  "resident array (repeat)");
  cmd->add_option("--state-spec", run.state_specs,
                  "SLOT=SPEC: the state's sharding for this job "
                  "(default P(), replicated); SPEC alone: for every state");
  cmd->add_option("--kwargs", run.kwargs,
                  "static keyword arguments, a JSON object");
  cmd->add_flag("--no-check-rep", run.no_check_rep,
                "do not verify that outputs are replicated along the axes "
                "their out-spec leaves out");
  cmd->add_flag("--json", run.json, "print a machine-readable summary");
  cmd->add_option("--timeout", run.timeout_seconds, "job deadline in seconds")
      ->capture_default_str()
      ->check(TimeoutSeconds());
  cmd->add_option("--traceparent", run.traceparent,
                  "W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>) to send "
                  "with the job; the servers log its trace id (default: "
                  "a new trace)");
  AddTreeOptions(cmd, run);
}

}  // namespace shardmap
