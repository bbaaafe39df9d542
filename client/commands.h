// shardctl's subcommands. Each returns the process exit code (exit_codes.h)
// and reports its own errors: "error: <CODE NAME>: <message>" on stderr,
// and with --json also {"error": {...}} on stdout.
#ifndef SHARDMAP_CLIENT_COMMANDS_H_
#define SHARDMAP_CLIENT_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace shardmap {

struct RunFlags {
  std::string coordinator;
  int local = 0;
  std::string mesh;
  std::string fn;
  std::string expr;
  std::vector<std::string> args;
  std::vector<std::string> in_specs;
  std::vector<std::string> outs;
  std::vector<std::string> out_specs;
  std::string kwargs;
  bool no_check_rep = false;
  bool json = false;
  double timeout_seconds = 600;
};
int RunCommand(const RunFlags& flags);

struct UpFlags {
  int workers = 1;
  std::string listen = "127.0.0.1:7070";
  std::string log_level = "warn";
};
int UpCommand(const UpFlags& flags);

struct QueryFlags {
  std::string coordinator = "127.0.0.1:7070";
  bool json = false;
};
int StatusCommand(const QueryFlags& flags);
int FunctionsCommand(const QueryFlags& flags);

// Prints the error (stderr, and JSON on stdout when `json`); returns
// `exit_code`.
int ReportError(const absl::Status& status, int exit_code, bool json);

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_COMMANDS_H_
