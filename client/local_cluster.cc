#include "client/local_cluster.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <iostream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/shard_client.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

// Starts `argv` with stdout on a pipe (returned through *stdout_fd, or
// closed if null), stderr inherited and SHARDMAP_TOKEN = `token`. The
// child dies with us.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv,
                            const std::string& token, int* stdout_fd) {
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
    setenv(kTokenEnv, token.c_str(), 1);
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

  std::string token = options.security.token();
  if (token.empty()) {
    SHARD_ASSIGN_OR_RETURN(token, NewRandomToken());
  }
  const std::vector<std::string> tls = options.security.ChildArgs();
  auto command = [&](const char* binary, std::vector<std::string> args) {
    args.insert(args.begin(), dir + "/" + binary);
    args.insert(args.end(), tls.begin(), tls.end());
    return args;
  };
  std::vector<std::string> coordinator_args = {
      "--listen", options.listen, "--log-level", options.log_level};
  coordinator_args.insert(coordinator_args.end(),
                          options.coordinator_args.begin(),
                          options.coordinator_args.end());
  int fd = -1;
  SHARD_ASSIGN_OR_RETURN(
      cluster->coordinator_pid_,
      Spawn(command("shardmap-coordinator", coordinator_args), token, &fd));
  auto address =
      ReadAnnouncement(fd, "shardmap-coordinator listening on ", deadline);
  close(fd);
  if (!address.ok()) {
    return Annotate(address.status(), "starting shardmap-coordinator");
  }
  cluster->address_ = *address;
  cluster->client_security_ = options.security.Channels();
  cluster->client_security_.token = token;
  if (options.security.token().empty()) {
    // Best effort: without the file, clients need SHARDMAP_TOKEN.
    if (absl::Status written = WriteLocalToken(cluster->address_, token);
        written.ok()) {
      cluster->token_file_ = LocalTokenPath(cluster->address_);
    } else {
      std::cerr << "warning: cannot keep the cluster's token: "
                << written.message() << std::endl;
    }
  }
  for (int i = 0; i < options.num_workers; ++i) {
    SHARD_ASSIGN_OR_RETURN(
        pid_t pid,
        Spawn(command("shardmap-worker",
                      {"--coordinator", cluster->address_, "--listen",
                       "127.0.0.1:0", "--log-level", options.log_level}),
              token, nullptr));
    cluster->worker_pids_.push_back(pid);
  }
  ShardClient::Options client_options;
  client_options.address = cluster->address_;
  client_options.security = cluster->client_security_;
  SHARD_ASSIGN_OR_RETURN(auto client, ShardClient::Create(client_options));
  SHARD_RETURN_IF_ERROR(client->WaitForWorkers(
      options.num_workers,
      std::max(absl::ZeroDuration(), deadline - absl::Now())));
  return cluster;
}

LocalCluster::~LocalCluster() { StopAll(); }

void LocalCluster::StopAll() {
  if (!token_file_.empty()) unlink(token_file_.c_str());
  token_file_.clear();
  // Workers first, while their coordinator still answers the heartbeat
  // that announces their drain; then the coordinator.
  TerminateAndReap(worker_pids_);
  worker_pids_.clear();
  if (coordinator_pid_ > 0) TerminateAndReap({coordinator_pid_});
  coordinator_pid_ = -1;
}

void LocalCluster::TerminateAndReap(const std::vector<pid_t>& pids) {
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
}

}  // namespace shardmap
