// collective_bench: times one shardmap collective (psum, all_gather or
// ppermute) between N workers, measured inside the workers: each rank
// calls the Communicator exactly as a native function would, over the
// worker's own peer transport: shared-memory rings between the workers
// (they share this host), as shardmap-worker does by default
// (impl=shardmap-shm; with --shm-single-copy large blocks are read
// straight from the sender's memory, impl=shardmap-shm-cma), or with
// --no-shm real gRPC peer streams on 127.0.0.1 (impl=shardmap).
//
// --mode procs (default): N forked processes, each with its own
//   PeerNetwork, Peer service and gRPC server on 127.0.0.1:0; they learn
//   each other's addresses through files in a fresh temp directory and
//   start every iteration together on a process-shared barrier.
// --mode threads: N workers in this process (like psum_bench).
//
// Methodology (docs/BENCHMARKS.md, Method): every iteration starts on a
// barrier, is timed on every rank, and its time is the slowest rank's; the
// median over iterations is reported. The result is checked once per size.
// Peak RSS (VmHWM) is reset before each size and read after it, per worker
// process (procs) or for the whole process (threads).
//
// Sizes: psum and ppermute count the bytes of each rank's array; all_gather
// counts the gathered total (each rank contributes size / N), as
// nccl-tests do (docs/BENCHMARKS.md, Method).
//
//   collective_bench --op psum --workers 4 --sizes 4,4096,4194304
//
// Prints one line per size:
//   RESULT impl=shardmap op=psum n=4 bytes=4096 iters=200 median_us=...
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "ops/process_tuning.h"
#include "rpc/channel.h"
#include "rpc/channel_cache.h"
#include "worker/collectives/all_gather.h"
#include "worker/collectives/all_reduce.h"
#include "worker/collectives/communicator.h"
#include "worker/routed_peer_transport.h"
#include "worker/shm_network.h"
#include "worker/transport/grpc/grpc_peer_transport.h"
#include "worker/transport/grpc/peer_service.h"

namespace shardmap {
namespace {

using shardmap_bench::Iterations;
using shardmap_bench::ReadHwmKb;
using shardmap_bench::ResetHwm;

struct Config {
  std::string op = "psum";
  std::string mode = "procs";
  int workers = 4;
  std::vector<int64_t> sizes;
  double scale = 1.0;  // iteration count factor (--quick uses < 1)
  int timeout_s = 600;
  bool no_shm = false;       // gRPC between the workers, not shared memory
  bool single_copy = false;  // --shm-single-copy
};

// What each rank sends and how many bytes its output holds.
int64_t InputBytes(const Config& c, int64_t size) {
  return c.op == "all_gather" ? size / c.workers : size;
}

std::string AlgorithmName(const Config& c, int64_t size) {
  if (c.op == "psum") {
    return static_cast<size_t>(size) <= AllReduceOptions{}.small_bytes
               ? "recursive_doubling"
               : "ring";
  }
  if (c.op == "all_gather") {
    return static_cast<size_t>(size) <= AllGatherOptions{}.small_bytes
               ? "direct"
               : "ring";
  }
  return "direct_shift";
}

// One collective call of rank `rank`, and its result check.
class Rank {
 public:
  Rank(const Config& c, int rank, int64_t size, const Mesh* mesh,
       PeerTransport* transport)
      : c_(c),
        rank_(rank),
        size_(size),
        comm_(mesh, rank, transport, {}),
        x_(DType::kFloat32, {std::max<int64_t>(1, InputBytes(c, size) / 4)}) {
    float* p = x_.data_as<float>();
    for (int64_t i = 0; i < x_.num_elements(); ++i) p[i] = rank + 1;
    if (c_.op == "ppermute") {
      for (int r = 0; r < c_.workers; ++r) {
        perm_.push_back({r, (r + 1) % c_.workers});
      }
    }
  }

  absl::Status Run(bool check) {
    absl::StatusOr<Tensor> y;
    if (c_.op == "psum") {
      y = comm_.Psum(x_, {"x"});
    } else if (c_.op == "all_gather") {
      y = comm_.AllGather(x_, {"x"}, 0, /*tiled=*/true);
    } else {
      y = comm_.Ppermute(x_, {"x"}, perm_);
    }
    if (!y.ok()) return y.status();
    if (check) return Check(*y);
    return absl::OkStatus();
  }

 private:
  absl::Status Check(const Tensor& y) const {
    const float* p = y.data_as<float>();
    const int64_t n = y.num_elements();
    const int64_t block = x_.num_elements();
    for (int64_t i = 0; i < n; ++i) {
      float want;
      if (c_.op == "psum") {
        want = c_.workers * (c_.workers + 1) / 2.0f;
      } else if (c_.op == "all_gather") {
        want = static_cast<float>(i / block + 1);
      } else {
        want = static_cast<float>((rank_ + c_.workers - 1) % c_.workers + 1);
      }
      if (p[i] != want) {
        return absl::InternalError(
            absl::StrCat(c_.op, " result wrong on rank ", rank_, " at element ",
                         i, ": ", p[i], " != ", want, " (size ", size_, ")"));
      }
    }
    const int64_t want_n = c_.op == "all_gather" ? block * c_.workers : block;
    if (n != want_n) {
      return absl::InternalError(
          absl::StrCat(c_.op, " result has ", n, " elements, want ", want_n));
    }
    return absl::OkStatus();
  }

  const Config& c_;
  const int rank_;
  const int64_t size_;
  Communicator comm_;
  Tensor x_;
  nlohmann::json perm_ = nlohmann::json::array();
};

// A worker's peer side: the networks, their services and the server.
struct Node {
  std::unique_ptr<ChannelCache> channels;
  std::unique_ptr<PeerNetwork> network;
  std::unique_ptr<ShmNetwork> shm;
  std::unique_ptr<PeerService> service;
  std::unique_ptr<ShmPeerService> shm_service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
};

Node StartNode(const Config& c, int index) {
  Node n;
  const uint64_t incarnation = static_cast<uint64_t>(getpid()) * 1000 + index;
  n.channels = std::make_unique<ChannelCache>();
  n.network = std::make_unique<PeerNetwork>(
      PeerNetwork::Options{"", incarnation}, n.channels.get());
  ShmNetwork::Options shm;
  shm.enabled = !c.no_shm;
  shm.single_copy = c.single_copy;
  shm.incarnation = incarnation;
  n.shm = std::make_unique<ShmNetwork>(shm, n.channels.get());
  n.service = std::make_unique<PeerService>(n.network->inbox());
  n.shm_service = std::make_unique<ShmPeerService>(n.shm.get());
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  ConfigureServerBuilder(b);
  b.RegisterCallbackGenericService(n.service.get());
  b.RegisterService(n.shm_service.get());
  n.server = b.BuildAndStart();
  if (!n.server || port == 0) {
    std::fprintf(stderr, "worker %d: cannot listen on 127.0.0.1:0\n", index);
    std::exit(1);
  }
  n.address = "127.0.0.1:" + std::to_string(port);
  n.network->set_my_address(n.address);
  n.shm->set_my_address(n.address);
  return n;
}

GrpcPeerTransport::Options TransportOptions(
    int rank, size_t size_index, const std::vector<std::string>& addresses) {
  GrpcPeerTransport::Options o;
  o.job_id = absl::StrCat("bench-", size_index);
  o.device = rank;
  o.addresses = addresses;
  o.deadline = absl::Now() + absl::Minutes(10);
  return o;
}

// Timings shared by all ranks: seconds[size][rank][iteration] (warm-up
// included) and the peak RSS of each rank per size.
struct Layout {
  int workers, max_total;
  size_t sizes;
  size_t seconds_at(size_t s, int r, int it) const {
    return (s * workers + r) * max_total + it;
  }
  size_t num_seconds() const { return sizes * workers * max_total; }
};

struct Shared {
  Shared(int workers, bool spin) : barrier(workers, spin) {}
  shardmap_bench::SpinBarrier barrier;
  int failed = 0;
};

void PrintResults(const Config& c, const Layout& L, const double* seconds,
                  const long* hwm_kb) {
  for (size_t s = 0; s < c.sizes.size(); ++s) {
    int warmup, iters;
    Iterations(c.sizes[s], c.scale, &warmup, &iters);
    std::vector<double> slowest;
    for (int it = warmup; it < warmup + iters; ++it) {
      double m = 0;
      for (int r = 0; r < c.workers; ++r) {
        m = std::max(m, seconds[L.seconds_at(s, r, it)]);
      }
      slowest.push_back(m * 1e6);
    }
    std::sort(slowest.begin(), slowest.end());
    const double median = slowest[slowest.size() / 2];
    const double p90 = slowest[std::min(slowest.size() - 1,
                                        (slowest.size() * 9 + 9) / 10 - 1)];
    std::vector<long> rss;
    if (c.mode == "procs") {
      for (int r = 0; r < c.workers; ++r)
        rss.push_back(hwm_kb[s * c.workers + r]);
    } else {
      rss.push_back(hwm_kb[s * c.workers]);
    }
    std::printf(
        "RESULT impl=%s op=%s n=%d bytes=%lld iters=%d median_us=%.2f "
        "min_us=%.2f max_us=%.2f p90_us=%.2f algo=%s mode=%s rss_kb=%s\n",
        c.no_shm        ? "shardmap"
        : c.single_copy ? "shardmap-shm-cma"
                        : "shardmap-shm",
        c.op.c_str(), c.workers, static_cast<long long>(c.sizes[s]), iters,
        median, slowest.front(), slowest.back(), p90,
        AlgorithmName(c, c.sizes[s]).c_str(), c.mode.c_str(),
        absl::StrJoin(rss, ",").c_str());
  }
  std::fflush(stdout);
}

// --mode procs: one forked process per worker.
int RunProcesses(const Config& c) {
  int max_total = 0;
  for (int64_t size : c.sizes) {
    int w, n;
    Iterations(size, c.scale, &w, &n);
    max_total = std::max(max_total, w + n);
  }
  const Layout L{c.workers, max_total, c.sizes.size()};
  const size_t bytes = sizeof(Shared) + L.num_seconds() * sizeof(double) +
                       c.sizes.size() * c.workers * sizeof(long);
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  // Spinning only on the shared-memory path (SpinBarrier).
  Shared* shared = new (mem) Shared(c.workers, /*spin=*/!c.no_shm);
  double* seconds = reinterpret_cast<double*>(shared + 1);
  long* hwm_kb = reinterpret_cast<long*>(seconds + L.num_seconds());

  const char* tmp = std::getenv("TMPDIR");
  std::string dir_template =
      absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/collective_bench.XXXXXX");
  if (mkdtemp(dir_template.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string dir = dir_template;

  std::vector<pid_t> pids;
  const pid_t parent = getpid();
  for (int r = 0; r < c.workers; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      for (pid_t p : pids) kill(p, SIGKILL);
      return 1;
    }
    if (pid > 0) {
      pids.push_back(pid);
      continue;
    }
    // The worker. gRPC is first initialised here, after the fork.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    Node node = StartNode(c, r);
    {
      const std::string tmp = absl::StrCat(dir, "/addr.", r, ".tmp");
      std::ofstream(tmp) << node.address;
      rename(tmp.c_str(), absl::StrCat(dir, "/addr.", r).c_str());
    }
    std::vector<std::string> addresses(c.workers);
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    for (int p = 0; p < c.workers; ++p) {
      while (true) {
        std::ifstream f(absl::StrCat(dir, "/addr.", p));
        if (f && std::getline(f, addresses[p]) && !addresses[p].empty()) break;
        if (absl::Now() > deadline) {
          std::fprintf(stderr, "worker %d: no address from worker %d\n", r, p);
          _exit(1);
        }
        absl::SleepFor(absl::Milliseconds(5));
      }
    }
    const Mesh mesh = *Mesh::Create({{"x", c.workers}});
    for (size_t s = 0; s < c.sizes.size(); ++s) {
      int warmup, iters;
      Iterations(c.sizes[s], c.scale, &warmup, &iters);
      RoutedPeerTransport transport(node.network.get(), node.shm.get(),
                                    TransportOptions(r, s, addresses));
      Rank rank(c, r, c.sizes[s], &mesh, &transport);
      ResetHwm();
      for (int it = 0; it < warmup + iters; ++it) {
        shared->barrier.Wait();
        const auto t0 = std::chrono::steady_clock::now();
        absl::Status st = rank.Run(/*check=*/false);
        const auto t1 = std::chrono::steady_clock::now();
        seconds[L.seconds_at(s, r, it)] =
            std::chrono::duration<double>(t1 - t0).count();
        if (st.ok() && it == 0) {
          // Checked once per size: a second, untimed call whose result is
          // compared element by element.
          shared->barrier.Wait();
          st = rank.Run(/*check=*/true);
        }
        if (!st.ok()) {
          std::fprintf(stderr, "worker %d: %s\n", r, st.ToString().c_str());
          __atomic_store_n(&shared->failed, 1, __ATOMIC_SEQ_CST);
          _exit(1);
        }
      }
      hwm_kb[s * c.workers + r] = ReadHwmKb();
    }
    // Nobody leaves while a peer may still be reading from it.
    shared->barrier.Wait();
    node.server->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(200));
    std::fflush(stderr);
    _exit(0);
  }

  // The parent: wait for every worker, bounded; kill all on any failure.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(c.timeout_s);
  int ok = 0;
  bool failed = false;
  std::vector<bool> done(c.workers, false);
  while (ok < c.workers && !failed) {
    bool progress = false;
    for (int r = 0; r < c.workers; ++r) {
      if (done[r]) continue;
      int status = 0;
      const pid_t w = waitpid(pids[r], &status, WNOHANG);
      if (w == pids[r]) {
        done[r] = true;
        progress = true;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
          ++ok;
        } else {
          std::fprintf(
              stderr, "collective_bench: worker %d %s %d\n", r,
              WIFSIGNALED(status) ? "killed by signal" : "exited",
              WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
          failed = true;
        }
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "collective_bench: timed out after %d s\n",
                   c.timeout_s);
      failed = true;
    }
    if (!progress && !failed) usleep(2000);
  }
  for (int r = 0; r < c.workers; ++r) {
    if (!done[r]) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], nullptr, 0);
    }
  }
  for (int r = 0; r < c.workers; ++r) {
    unlink(absl::StrCat(dir, "/addr.", r).c_str());
  }
  rmdir(dir.c_str());
  if (failed) return 1;
  PrintResults(c, L, seconds, hwm_kb);
  return 0;
}

// --mode threads: every worker in this process.
int RunThreads(const Config& c) {
  std::vector<Node> nodes;
  std::vector<std::string> addresses;
  for (int i = 0; i < c.workers; ++i) {
    nodes.push_back(StartNode(c, i));
    addresses.push_back(nodes.back().address);
  }
  int max_total = 0;
  for (int64_t size : c.sizes) {
    int w, n;
    Iterations(size, c.scale, &w, &n);
    max_total = std::max(max_total, w + n);
  }
  const Layout L{c.workers, max_total, c.sizes.size()};
  std::vector<double> seconds(L.num_seconds());
  std::vector<long> hwm_kb(c.sizes.size() * c.workers, -1);
  shardmap_bench::SpinBarrier barrier(c.workers, /*spin=*/!c.no_shm);
  const Mesh mesh = *Mesh::Create({{"x", c.workers}});
  std::vector<absl::Status> status(c.workers);
  // A watchdog: a stuck collective must not hang the run.
  std::thread([t = c.timeout_s] {
    std::this_thread::sleep_for(std::chrono::seconds(t));
    std::fprintf(stderr, "collective_bench: timed out after %d s\n", t);
    std::_Exit(1);
  }).detach();
  for (size_t s = 0; s < c.sizes.size(); ++s) {
    int warmup, iters;
    Iterations(c.sizes[s], c.scale, &warmup, &iters);
    ResetHwm();
    std::vector<std::thread> threads;
    for (int r = 0; r < c.workers; ++r) {
      threads.emplace_back([&, r] {
        RoutedPeerTransport transport(nodes[r].network.get(),
                                      nodes[r].shm.get(),
                                      TransportOptions(r, s, addresses));
        Rank rank(c, r, c.sizes[s], &mesh, &transport);
        for (int it = 0; it < warmup + iters; ++it) {
          barrier.Wait();
          const auto t0 = std::chrono::steady_clock::now();
          absl::Status st = rank.Run(false);
          const auto t1 = std::chrono::steady_clock::now();
          seconds[L.seconds_at(s, r, it)] =
              std::chrono::duration<double>(t1 - t0).count();
          if (st.ok() && it == 0) {
            barrier.Wait();
            st = rank.Run(true);
          }
          if (!st.ok()) {
            std::fprintf(stderr, "worker %d: %s\n", r, st.ToString().c_str());
            std::_Exit(1);  // the others would wait on the barrier forever
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    hwm_kb[s * c.workers] = ReadHwmKb();
  }
  PrintResults(c, L, seconds.data(), hwm_kb.data());
  for (auto& n : nodes) {
    n.server->Shutdown(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(200));
  }
  std::fflush(stdout);
  std::_Exit(0);  // skip tearing down the links of every worker
}

}  // namespace
}  // namespace shardmap

int main(int argc, char** argv) {
  shardmap::TuneProcess();
  shardmap::Config c;
  std::string sizes = "4,4096,262144,4194304,67108864";
  CLI::App app{"collective_bench: a shardmap collective between N workers"};
  app.add_option("--op", c.op, "psum | all_gather | ppermute")
      ->check(CLI::IsMember({"psum", "all_gather", "ppermute"}))
      ->capture_default_str();
  app.add_option("--mode", c.mode,
                 "procs: one process per worker; threads: all in this one")
      ->check(CLI::IsMember({"procs", "threads"}))
      ->capture_default_str();
  app.add_option("--workers", c.workers)
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--sizes", sizes,
                 "comma-separated bytes: per rank (psum, ppermute) or "
                 "gathered total (all_gather)")
      ->capture_default_str();
  app.add_option("--scale", c.scale, "factor on the iteration counts")
      ->capture_default_str();
  app.add_option("--timeout", c.timeout_s, "seconds before giving up")
      ->capture_default_str();
  app.add_flag("--no-shm", c.no_shm,
               "gRPC between the workers instead of shared memory");
  app.add_flag("--shm-single-copy", c.single_copy,
               "shared memory: large blocks read straight from the sender "
               "(process_vm_readv), as shardmap-worker --shm-single-copy");
  CLI11_PARSE(app, argc, argv);
  for (absl::string_view s : absl::StrSplit(sizes, ',', absl::SkipEmpty())) {
    const int64_t v = std::atoll(std::string(s).c_str());
    if (v < 4 || v % 4 != 0 || (c.op == "all_gather" && v % (4 * c.workers))) {
      std::fprintf(stderr,
                   "bad size %lld: a positive number of float32 (all_gather: "
                   "divisible by 4 * workers)\n",
                   static_cast<long long>(v));
      return 64;
    }
    c.sizes.push_back(v);
  }
  return c.mode == "procs" ? shardmap::RunProcesses(c)
                           : shardmap::RunThreads(c);
}
