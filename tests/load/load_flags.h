// The command line the load binaries (load_test, burst_test) share: how
// many workers the local cluster has and how far the servers' idle RSS may
// grow; each binary adds its own flags. And the verdict line they end with.
//
// Thread-safety: call from main() only.
#ifndef SHARDMAP_TESTS_LOAD_LOAD_FLAGS_H_
#define SHARDMAP_TESTS_LOAD_LOAD_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

#include "tests/load/rss_poll.h"

namespace shardmap {

// Parses `argv` into `o`, whose int `workers` becomes --workers (at least
// `min_workers`, at most 64) and whose doubles `max_rss_growth` and
// `rss_slack_mib` become the RSS bound flags; `add_flags` adds the binary's
// own. Defaults are the values `o` holds. Returns nullopt when the binary
// should run, else its exit status: 0 after --help, CLI11's for a bad flag
// (the message is printed).
template <typename Options>
std::optional<int> ParseLoadFlags(
    int argc, char** argv, const std::string& description, int min_workers,
    Options& o, const std::function<void(CLI::App&)>& add_flags) {
  CLI::App app{description};
  app.add_option("--workers", o.workers, "worker processes")
      ->capture_default_str()
      ->check(CLI::Range(min_workers, 64));
  add_flags(app);
  AddRssBoundFlags(app, &o.max_rss_growth, &o.rss_slack_mib);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return std::nullopt;
}

// Prints "<name>: PASS" or "<name>: FAIL"; returns the exit status (0, 1).
inline int ReportVerdict(const char* name, bool pass) {
  std::printf("%s: %s\n", name, pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_LOAD_LOAD_FLAGS_H_
