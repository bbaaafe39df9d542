#include "client/local_cluster.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/shard_client.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

// Starts `argv` with stdout on a pipe (returned through *stdout_fd, or
// closed if null) and stderr inherited. The child dies with us.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv,
                            int* stdout_fd) {
  if (access(argv[0].c_str(), X_OK) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot run ", argv[0], ": ", std::strerror(errno)));
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    // Children start with the default signal mask and handlers.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    dup2(fds[1], STDOUT_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  if (stdout_fd != nullptr) {
    *stdout_fd = fds[0];
  } else {
    close(fds[0]);
  }
  return pid;
}

// Reads lines from `fd` until one starts with `prefix`; returns the rest.
absl::StatusOr<std::string> ReadAnnouncement(int fd, const std::string& prefix,
                                             absl::Time deadline) {
  std::string buffer;
  while (true) {
    const size_t nl = buffer.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      if (absl::StartsWith(line, prefix)) return line.substr(prefix.size());
      continue;
    }
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return absl::DeadlineExceededError("process did not start");
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, INT_MAX))) <= 0) {
      continue;
    }
    char chunk[256];
    const ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n <= 0) return absl::UnavailableError("process exited during start-up");
    buffer.append(chunk, n);
  }
}

}  // namespace

std::string LocalCluster::SelfDir() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  std::string s(path, n);
  return s.substr(0, s.rfind('/'));
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    const Options& options) {
  if (options.num_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a local cluster needs at least 1 worker, got ", options.num_workers));
  }
  const std::string dir = options.bin_dir.empty() ? SelfDir() : options.bin_dir;
  const absl::Time deadline = absl::Now() + options.start_timeout;
  std::unique_ptr<LocalCluster> cluster(new LocalCluster());

  int fd = -1;
  SHARD_ASSIGN_OR_RETURN(
      cluster->coordinator_pid_,
      Spawn({dir + "/shardmap-coordinator", "--listen", options.listen,
             "--log-level", options.log_level},
            &fd));
  auto address =
      ReadAnnouncement(fd, "shardmap-coordinator listening on ", deadline);
  close(fd);
  if (!address.ok()) {
    return Annotate(address.status(), "starting shardmap-coordinator");
  }
  cluster->address_ = *address;
  for (int i = 0; i < options.num_workers; ++i) {
    SHARD_ASSIGN_OR_RETURN(
        pid_t pid,
        Spawn({dir + "/shardmap-worker", "--coordinator", cluster->address_,
               "--listen", "127.0.0.1:0", "--log-level", options.log_level},
              nullptr));
    cluster->worker_pids_.push_back(pid);
  }
  SHARD_ASSIGN_OR_RETURN(auto client, ShardClient::Create({cluster->address_}));
  SHARD_RETURN_IF_ERROR(client->WaitForWorkers(
      options.num_workers,
      std::max(absl::ZeroDuration(), deadline - absl::Now())));
  return cluster;
}

LocalCluster::~LocalCluster() { StopAll(); }

void LocalCluster::StopAll() {
  std::vector<pid_t> pids = worker_pids_;
  if (coordinator_pid_ > 0) pids.push_back(coordinator_pid_);
  for (pid_t p : pids) kill(p, SIGTERM);
  const absl::Time deadline = absl::Now() + absl::Seconds(3);
  for (pid_t p : pids) {
    while (waitpid(p, nullptr, WNOHANG) == 0) {
      if (absl::Now() > deadline) {
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  worker_pids_.clear();
  coordinator_pid_ = -1;
}

}  // namespace shardmap
