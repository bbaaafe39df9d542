// A whole cluster on this machine: one shardmap-coordinator and N
// shardmap-worker processes on 127.0.0.1, started for `shardctl run --local`
// and `shardctl up`. The processes die with this object (SIGTERM, then
// SIGKILL after a grace period) and with the parent process (PDEATHSIG).
//
// Not thread-safe.
#ifndef SHARDMAP_CLIENT_LOCAL_CLUSTER_H_
#define SHARDMAP_CLIENT_LOCAL_CLUSTER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/credentials.h"

namespace shardmap {

class LocalCluster {
 public:
  struct Options {
    int num_workers = 1;
    // Where the coordinator listens; port 0 picks a free one.
    std::string listen = "127.0.0.1:0";
    // Directory holding shardmap-coordinator and shardmap-worker; empty =
    // the directory of the running executable.
    std::string bin_dir;
    // Bound on start-up: coordinator ready and every worker registered.
    absl::Duration start_timeout = absl::Seconds(30);
    std::string log_level = "warn";
    // TLS files for every process (Security::ChildArgs) and the token. With
    // no token, the cluster makes a random one and writes it where clients
    // of its address find it (LocalTokenPath); either way the processes get
    // it through SHARDMAP_TOKEN, never on their command lines.
    Security security;
    // Extra flags for the coordinator, e.g. --insecure.
    std::vector<std::string> coordinator_args;
  };

  // Starts the processes and waits until every worker has registered.
  // INVALID_ARGUMENT for fewer than 1 worker; UNAVAILABLE if a binary is
  // missing or a process dies; DEADLINE_EXCEEDED naming how many workers
  // registered if start_timeout passes.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(
      const Options& options);
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // The coordinator's HOST:PORT.
  const std::string& address() const { return address_; }
  const std::vector<pid_t>& worker_pids() const { return worker_pids_; }
  pid_t coordinator_pid() const { return coordinator_pid_; }
  // What a client of this cluster needs: its TLS and its token.
  const ChannelSecurity& client_security() const { return client_security_; }
  // The file holding the token this cluster made, or "" if it was given one.
  const std::string& token_file() const { return token_file_; }

  // Directory of the running executable.
  static std::string SelfDir();

 private:
  LocalCluster() = default;
  void StopAll();
  // SIGTERM to each, then waits up to 3 s in all before SIGKILL.
  static void TerminateAndReap(const std::vector<pid_t>& pids);

  std::string address_;
  ChannelSecurity client_security_;
  std::string token_file_;
  pid_t coordinator_pid_ = -1;
  std::vector<pid_t> worker_pids_;
};

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_LOCAL_CLUSTER_H_
