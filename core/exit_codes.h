// The exit codes of every shardmap binary (sysexits(3)). shardctl maps the
// coordinator's statuses to them (client/exit_codes.h); the servers exit
// with them when they cannot start (ops/serving.h).
//
//   0  ok
//   64 usage: bad flags or values
//   65 bad input data (a malformed file, e.g. a damaged --state-dir)
//   66 an input file does not exist
//   69 unavailable (cannot listen, a peer unreachable)
//   70 internal error
//   73 cannot create an output file
//   75 temporary failure; retry
//   77 permission denied / unauthenticated
//   78 bad security configuration (kExitConfig, rpc/credentials.h)
#ifndef SHARDMAP_CORE_EXIT_CODES_H_
#define SHARDMAP_CORE_EXIT_CODES_H_

namespace shardmap {

enum ExitCode {
  kExitOk = 0,
  kExitUsage = 64,
  kExitDataErr = 65,
  kExitNoInput = 66,
  kExitUnavailable = 69,
  kExitSoftware = 70,
  kExitCantCreate = 73,
  kExitTempFail = 75,
  kExitNoPerm = 77,
};

}  // namespace shardmap

#endif  // SHARDMAP_CORE_EXIT_CODES_H_
