// grpc_stream_bench: the raw-transport reference for bench/run.sh. A bare
// gRPC service (ref/stream_bench.proto: one protobuf `bytes` message per
// chunk, stock channel and server settings, the sync C++ API) in a forked
// server process on 127.0.0.1:0, and the client in this one:
//
//   stream_push    256 MiB one way on a bidi stream in 1 MiB chunks
//   stream_duplex  256 MiB each way at once on one bidi stream
//   stream_rtt     an 8-byte message and its echo on an open bidi stream
//   unary_rtt      an 8-byte unary RPC
//   unary_rate     unary RPCs per second from --clients threads, each with
//                  its own channel (as each ShardClient has)
//
//   grpc_stream_bench --ops push,duplex,stream_rtt,unary_rtt,unary_rate
//
// Prints one RESULT line per op (times in µs; median over iterations).
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "ref/stream_bench.grpc.pb.h"  // generated in the build tree

namespace {

using shardmap::bench::Chunk;
using shardmap::bench::StreamBench;
using Clock = std::chrono::steady_clock;

class Service final : public StreamBench::Service {
  grpc::Status Push(grpc::ServerContext*,
                    grpc::ServerReaderWriter<Chunk, Chunk>* s) override {
    Chunk c;
    int64_t bytes = 0;
    while (s->Read(&c)) bytes += c.data().size();
    Chunk ack;
    ack.set_total(bytes);
    s->Write(ack);
    return grpc::Status::OK;
  }
  grpc::Status Duplex(grpc::ServerContext*,
                      grpc::ServerReaderWriter<Chunk, Chunk>* s) override {
    Chunk c;
    if (!s->Read(&c)) return grpc::Status::OK;
    const int64_t total = c.total(), chunk = std::max<int64_t>(1, c.chunk());
    std::thread writer([s, total, chunk] {
      Chunk out;
      out.mutable_data()->assign(chunk, 'y');
      for (int64_t sent = 0; sent < total; sent += chunk) {
        if (!s->Write(out)) break;
      }
    });
    while (s->Read(&c)) {
    }
    writer.join();
    return grpc::Status::OK;
  }
  grpc::Status Echo(grpc::ServerContext*,
                    grpc::ServerReaderWriter<Chunk, Chunk>* s) override {
    Chunk c;
    while (s->Read(&c)) {
      if (!s->Write(c)) break;
    }
    return grpc::Status::OK;
  }
  grpc::Status Ping(grpc::ServerContext*, const Chunk* in,
                    Chunk* out) override {
    *out = *in;
    return grpc::Status::OK;
  }
};

// The server process: never returns. Writes its port to `fd`.
[[noreturn]] void Serve(int fd, pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  Service service;
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&service);
  auto server = b.BuildAndStart();
  if (!server || port == 0) _exit(1);
  if (write(fd, &port, sizeof(port)) != sizeof(port)) _exit(1);
  close(fd);
  server->Wait();
  _exit(0);
}

struct Stats {
  std::vector<double> us;
  void Print(const char* op, long long bytes, const char* extra = "") {
    std::sort(us.begin(), us.end());
    const size_t n = us.size();
    auto pct = [&](double p) {
      return us[std::min(n - 1, static_cast<size_t>(p * n))];
    };
    std::printf(
        "RESULT impl=grpc op=%s n=2 bytes=%lld iters=%zu median_us=%.2f "
        "min_us=%.2f max_us=%.2f p90_us=%.2f p99_us=%.2f%s\n",
        op, bytes, n, us[n / 2], us.front(), us.back(), pct(0.9), pct(0.99),
        extra);
    std::fflush(stdout);
  }
};

double Us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

void Deadline(grpc::ClientContext* ctx, int seconds) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::seconds(seconds));
}

bool Push(StreamBench::Stub* stub, int64_t total, int64_t chunk, int iters) {
  Chunk c;
  c.mutable_data()->assign(chunk, 'x');
  Stats st;
  for (int it = -1; it < iters; ++it) {  // it == -1: warm-up
    const auto t0 = Clock::now();
    grpc::ClientContext ctx;
    Deadline(&ctx, 120);
    auto s = stub->Push(&ctx);
    for (int64_t sent = 0; sent < total; sent += chunk) {
      if (!s->Write(c)) break;
    }
    s->WritesDone();
    Chunk ack;
    const bool got = s->Read(&ack);
    const auto t1 = Clock::now();
    const grpc::Status status = s->Finish();
    if (!got || !status.ok() || ack.total() < total) {
      std::fprintf(stderr, "push: %s (server got %lld of %lld bytes)\n",
                   status.error_message().c_str(),
                   static_cast<long long>(ack.total()),
                   static_cast<long long>(total));
      return false;
    }
    if (it >= 0) st.us.push_back(Us(t0, t1));
  }
  st.Print("stream_push", total, " algo=bidi_stream_1MiB_chunks");
  return true;
}

bool Duplex(StreamBench::Stub* stub, int64_t total, int64_t chunk, int iters) {
  Stats st;
  for (int it = -1; it < iters; ++it) {
    const auto t0 = Clock::now();
    grpc::ClientContext ctx;
    Deadline(&ctx, 120);
    auto s = stub->Duplex(&ctx);
    std::thread writer([&] {
      Chunk c;
      c.mutable_data()->assign(chunk, 'x');
      c.set_total(total);
      c.set_chunk(chunk);
      for (int64_t sent = 0; sent < total; sent += chunk) {
        if (!s->Write(c)) break;
        c.clear_total();
      }
      s->WritesDone();
    });
    int64_t got = 0;
    Chunk in;
    while (got < total && s->Read(&in)) got += in.data().size();
    writer.join();
    const auto t1 = Clock::now();
    const grpc::Status status = s->Finish();
    if (got < total || !status.ok()) {
      std::fprintf(stderr, "duplex: %s (got %lld of %lld bytes)\n",
                   status.error_message().c_str(), static_cast<long long>(got),
                   static_cast<long long>(total));
      return false;
    }
    if (it >= 0) st.us.push_back(Us(t0, t1));
  }
  st.Print("stream_duplex", total, " algo=bidi_stream_1MiB_chunks");
  return true;
}

bool StreamRtt(StreamBench::Stub* stub, int iters) {
  grpc::ClientContext ctx;
  Deadline(&ctx, 120);
  auto s = stub->Echo(&ctx);
  Chunk c, in;
  c.mutable_data()->assign(8, 'x');
  Stats st;
  const int warmup = std::max(10, iters / 20);
  for (int it = 0; it < warmup + iters; ++it) {
    const auto t0 = Clock::now();
    if (!s->Write(c) || !s->Read(&in)) {
      std::fprintf(stderr, "stream_rtt: stream broke\n");
      return false;
    }
    if (it >= warmup) st.us.push_back(Us(t0, Clock::now()));
  }
  s->WritesDone();
  s->Finish();
  st.Print("stream_rtt", 8, " algo=bidi_stream");
  return true;
}

bool UnaryRtt(StreamBench::Stub* stub, int iters) {
  Chunk c, out;
  c.mutable_data()->assign(8, 'x');
  Stats st;
  const int warmup = std::max(10, iters / 20);
  for (int it = 0; it < warmup + iters; ++it) {
    grpc::ClientContext ctx;
    Deadline(&ctx, 10);
    const auto t0 = Clock::now();
    const grpc::Status s = stub->Ping(&ctx, c, &out);
    const auto t1 = Clock::now();
    if (!s.ok()) {
      std::fprintf(stderr, "unary_rtt: %s\n", s.error_message().c_str());
      return false;
    }
    if (it >= warmup) st.us.push_back(Us(t0, t1));
  }
  st.Print("unary_rtt", 8, " algo=unary");
  return true;
}

bool UnaryRate(const std::string& address, int clients, double seconds) {
  std::atomic<bool> stop{false}, failed{false};
  std::atomic<long> calls{0};
  std::vector<std::thread> threads;
  const auto start = Clock::now() + std::chrono::milliseconds(300);
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&] {
      auto stub = StreamBench::NewStub(
          grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
      Chunk c, out;
      c.mutable_data()->assign(8, 'x');
      while (!stop) {
        grpc::ClientContext ctx;
        Deadline(&ctx, 10);
        const bool counted = Clock::now() >= start;
        if (!stub->Ping(&ctx, c, &out).ok()) {
          failed = true;
          return;
        }
        if (counted && !stop) ++calls;
      }
    });
  }
  std::this_thread::sleep_until(start);
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  const double elapsed = Us(t0, Clock::now()) / 1e6;
  for (auto& t : threads) t.join();
  if (failed) {
    std::fprintf(stderr, "unary_rate: a call failed\n");
    return false;
  }
  std::printf(
      "RESULT impl=grpc op=unary_rate n=2 bytes=8 clients=%d calls=%ld "
      "seconds=%.2f rate_per_s=%.1f algo=unary\n",
      clients, calls.load(), elapsed, calls / elapsed);
  std::fflush(stdout);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"grpc_stream_bench: a bare gRPC stream on 127.0.0.1"};
  std::string ops = "push,duplex,stream_rtt,unary_rtt,unary_rate";
  int64_t total = 256 << 20, chunk = 1 << 20;
  int push_iters = 5, duplex_iters = 3, rtt_iters = 5000, clients = 8;
  double seconds = 3;
  app.add_option("--ops", ops)->capture_default_str();
  app.add_option("--bytes", total, "push/duplex bytes")->capture_default_str();
  app.add_option("--chunk", chunk)->capture_default_str();
  app.add_option("--push-iters", push_iters)->capture_default_str();
  app.add_option("--duplex-iters", duplex_iters)->capture_default_str();
  app.add_option("--rtt-iters", rtt_iters)->capture_default_str();
  app.add_option("--clients", clients)->capture_default_str();
  app.add_option("--seconds", seconds, "unary_rate duration")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // The server is forked before this process touches gRPC.
  int fds[2];
  if (pipe(fds) != 0) return 1;
  const pid_t parent = getpid();
  const pid_t server = fork();
  if (server < 0) return 1;
  if (server == 0) {
    close(fds[0]);
    Serve(fds[1], parent);
  }
  close(fds[1]);
  int port = 0;
  pollfd p{fds[0], POLLIN, 0};
  if (poll(&p, 1, 20000) <= 0 ||
      read(fds[0], &port, sizeof(port)) != sizeof(port) || port == 0) {
    std::fprintf(stderr, "grpc_stream_bench: the server did not start\n");
    kill(server, SIGKILL);
    waitpid(server, nullptr, 0);
    return 1;
  }
  close(fds[0]);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  bool ok = true;
  {
    auto stub = StreamBench::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    for (absl::string_view op : absl::StrSplit(ops, ',', absl::SkipEmpty())) {
      if (!ok) break;
      if (op == "push") {
        ok = Push(stub.get(), total, chunk, push_iters);
      } else if (op == "duplex") {
        ok = Duplex(stub.get(), total, chunk, duplex_iters);
      } else if (op == "stream_rtt") {
        ok = StreamRtt(stub.get(), rtt_iters);
      } else if (op == "unary_rtt") {
        ok = UnaryRtt(stub.get(), rtt_iters);
      } else if (op == "unary_rate") {
        ok = UnaryRate(address, clients, seconds);
      } else {
        std::fprintf(stderr, "unknown op %s\n", std::string(op).c_str());
        ok = false;
      }
    }
  }
  kill(server, SIGKILL);
  waitpid(server, nullptr, 0);
  return ok ? 0 : 1;
}
