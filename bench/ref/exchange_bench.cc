// exchange_bench: the gRPC floor of the smallest collective step on this
// machine, for bench/run.sh. Two processes exchange 8 bytes over one
// long-lived bidirectional stream, both sending at once and then waiting
// for the other's message, as a 4 B psum over two workers does; the time
// per exchange is taken on the client's side (median over --iters).
//
//   callback         the callback API, as shardmap's peer streams use it:
//                    gRPC's threads run the reactions and the waiting
//                    thread is woken by a condition variable;
//   polled           the asynchronous API, each process's own thread
//                    polling its completion queue (nothing else in either
//                    process polls: the prototype of docs/BENCHMARKS.md);
//   polled_shared    polled, but each process also serves a callback
//                    service (shardmap.v1.ShmPeer, as every worker does),
//                    so gRPC's callback threads poll the same sockets.
//
// Byte buffers, BDP probing and retries off, as tuned_stream_bench. The
// server is a forked process on 127.0.0.1:0.
//
//   exchange_bench --ops callback,polled,polled_shared --iters 2000
//
// The ops run in the order polled, polled_shared, callback: once a process
// has used the callback API, gRPC's callback threads poll in it for good.
//
// Prints one RESULT line per op (impl=grpc-exchange; times in µs).
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "shardmap/v1/shm.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr char kMethod[] = "/bench/Exchange";
// Each call's deadline: a server that stops answering fails the op.
constexpr std::chrono::seconds kCallTime(120);

grpc::ByteBuffer Message() {
  const char bytes[8] = {'e', 'x', 'c', 'h', 'a', 'n', 'g', 'e'};
  grpc::Slice slice(bytes, sizeof(bytes));
  return grpc::ByteBuffer(&slice, 1);
}

// Callback server side: sends its message and reads the client's at once,
// then again once both are done.
class ExchangeReactor final : public grpc::ServerGenericBidiReactor {
 public:
  ExchangeReactor() { Next(); }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    Step();
  }
  void OnWriteDone(bool ok) override {
    if (ok) Step();
  }
  void OnDone() override { delete this; }

 private:
  void Next() {
    done_ = 0;
    out_ = Message();
    StartWrite(&out_);
    StartRead(&in_);
  }
  void Step() {
    std::lock_guard<std::mutex> lock(mu_);
    if (++done_ == 2) Next();
  }
  std::mutex mu_;
  int done_ = 0;
  grpc::ByteBuffer in_, out_;
};

class CallbackService final : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext*) override {
    return new ExchangeReactor;
  }
};

// The polled server: its main thread answers the one call from its queue.
void ServePolled(grpc::AsyncGenericService* service,
                 grpc::ServerCompletionQueue* cq) {
  grpc::GenericServerContext context;
  grpc::GenericServerAsyncReaderWriter stream(&context);
  service->RequestCall(&context, &stream, cq, cq, reinterpret_cast<void*>(1));
  grpc::ByteBuffer in;
  int done = 0;
  void* tag;
  bool ok;
  while (cq->Next(&tag, &ok) && ok) {
    if (tag != reinterpret_cast<void*>(1) && ++done < 2) continue;
    done = 0;
    stream.Write(Message(), reinterpret_cast<void*>(2));
    stream.Read(&in, reinterpret_cast<void*>(3));
  }
}

[[noreturn]] void Serve(int fd, pid_t parent, const std::string& op) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  CallbackService callback;
  grpc::AsyncGenericService async;
  shardmap::v1::ShmPeer::CallbackService other;  // never called
  std::unique_ptr<grpc::ServerCompletionQueue> cq;
  if (op == "callback") {
    builder.RegisterCallbackGenericService(&callback);
  } else {
    builder.RegisterAsyncGenericService(&async);
    cq = builder.AddCompletionQueue();
    if (op == "polled_shared") builder.RegisterService(&other);
  }
  auto server = builder.BuildAndStart();
  if (!server || port == 0) _exit(1);
  if (write(fd, &port, sizeof(port)) != sizeof(port)) _exit(1);
  close(fd);
  if (cq) {
    ServePolled(&async, cq.get());
  } else {
    server->Wait();
  }
  _exit(0);
}

// The client's side of the callback exchange: the measuring thread starts
// both operations and sleeps until gRPC's threads have run both reactions.
class ExchangeCall final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit ExchangeCall(grpc::GenericStub* stub) {
    context_.set_deadline(std::chrono::system_clock::now() + kCallTime);
    stub->PrepareBidiStreamingCall(&context_, kMethod, grpc::StubOptions(),
                                   this);
    AddHold();
    StartCall();
  }
  // One exchange; false if the call broke.
  bool Exchange() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = 0;
    }
    out_ = Message();
    StartWrite(&out_);
    StartRead(&in_);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_ == 2 || failed_; });
    return !failed_;
  }
  void OnWriteDone(bool ok) override { Step(ok); }
  void OnReadDone(bool ok) override { Step(ok); }
  void OnDone(const grpc::Status&) override {}
  void Cancel() { context_.TryCancel(); }

 private:
  void Step(bool ok) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ok) failed_ = true;
    ++done_;
    cv_.notify_one();
  }
  grpc::ClientContext context_;
  grpc::ByteBuffer in_, out_;
  std::mutex mu_;
  std::condition_variable cv_;
  int done_ = 0;
  bool failed_ = false;
};

// Times `iters` exchanges (after 200 untimed ones): µs each, sorted.
std::vector<double> Measure(const std::string& op,
                            std::shared_ptr<grpc::Channel> channel, int iters) {
  std::vector<double> us;
  grpc::GenericStub stub(channel);
  constexpr int kWarmup = 200;
  if (op == "callback") {
    // Leaked: the call keeps a hold until the process exits.
    auto* call = new ExchangeCall(&stub);
    for (int i = -kWarmup; i < iters; ++i) {
      const auto t0 = Clock::now();
      if (!call->Exchange()) return {};
      if (i >= 0) {
        us.push_back(
            std::chrono::duration<double, std::micro>(Clock::now() - t0)
                .count());
      }
    }
    call->Cancel();
  } else {
    grpc::CompletionQueue cq;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kCallTime);
    auto stream = stub.PrepareCall(&context, kMethod, &cq);
    void* tag;
    bool ok = false;
    grpc::ByteBuffer in;
    stream->StartCall(reinterpret_cast<void*>(1));
    bool failed = !cq.Next(&tag, &ok) || !ok;
    for (int i = -kWarmup; i < iters && !failed; ++i) {
      const auto t0 = Clock::now();
      stream->Write(Message(), reinterpret_cast<void*>(2));
      stream->Read(&in, reinterpret_cast<void*>(3));
      for (int done = 0; done < 2; ++done) {
        if (!cq.Next(&tag, &ok) || !ok) failed = true;
      }
      if (i >= 0) {
        us.push_back(
            std::chrono::duration<double, std::micro>(Clock::now() - t0)
                .count());
      }
    }
    // Every operation ends before the queue and the buffers go.
    context.TryCancel();
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    if (failed) return {};
  }
  std::sort(us.begin(), us.end());
  return us;
}

// A forked server for one op: its pid and port (0: it did not start).
struct Server {
  pid_t pid = -1;
  int port = 0;
};

// Forks the server of `op`. Call before this process uses gRPC: a child
// forked from a process whose gRPC threads run cannot use gRPC.
Server Fork(const std::string& op) {
  Server server;
  int fds[2];
  if (pipe(fds) != 0) return server;
  const pid_t parent = getpid();
  server.pid = fork();
  if (server.pid == 0) {
    close(fds[0]);
    Serve(fds[1], parent, op);
  }
  close(fds[1]);
  if (read(fds[0], &server.port, sizeof(server.port)) != sizeof(server.port)) {
    server.port = 0;
  }
  close(fds[0]);
  return server;
}

bool Run(const std::string& op, const Server& server, int iters) {
  std::vector<double> us;
  if (server.port != 0) {
    // This process serves the same callback service in polled_shared, so
    // gRPC's callback threads poll here too.
    shardmap::v1::ShmPeer::CallbackService other;
    std::unique_ptr<grpc::Server> own;
    if (op == "polled_shared") {
      grpc::ServerBuilder builder;
      int own_port = 0;
      builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                               &own_port);
      builder.RegisterService(&other);
      own = builder.BuildAndStart();
    }
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    us = Measure(
        op,
        grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(server.port),
                                  grpc::InsecureChannelCredentials(), args),
        iters);
    if (own) own->Shutdown(std::chrono::system_clock::now());
  }
  if (us.empty()) {
    std::fprintf(stderr, "exchange_bench: %s failed\n", op.c_str());
    return false;
  }
  std::printf(
      "RESULT impl=grpc-exchange op=%s n=2 bytes=8 iters=%zu median_us=%.2f "
      "min_us=%.2f max_us=%.2f p99_us=%.2f\n",
      op.c_str(), us.size(), us[us.size() / 2], us.front(), us.back(),
      us[us.size() * 99 / 100]);
  std::fflush(stdout);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"the gRPC floor of an 8-byte exchange between two processes"};
  std::string ops = "callback,polled,polled_shared";
  int iters = 2000;
  app.add_option("--ops", ops, "callback,polled,polled_shared")
      ->capture_default_str();
  app.add_option("--iters", iters, "timed exchanges per op")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> list = absl::StrSplit(ops, ',');
  for (const std::string& op : list) {
    if (op != "callback" && op != "polled" && op != "polled_shared") {
      std::fprintf(stderr, "unknown op %s (callback, polled, polled_shared)\n",
                   op.c_str());
      return 64;
    }
  }
  // Plain polling first: once this process has used the callback API,
  // gRPC's callback threads poll in it for good.
  std::stable_sort(
      list.begin(), list.end(), [](const std::string& a, const std::string& b) {
        auto rank = [](const std::string& op) {
          return op == "polled" ? 0 : op == "polled_shared" ? 1 : 2;
        };
        return rank(a) < rank(b);
      });
  std::vector<Server> servers;
  for (const std::string& op : list) servers.push_back(Fork(op));
  bool ok = true;
  for (size_t i = 0; i < list.size() && ok; ++i) {
    ok = Run(list[i], servers[i], iters);
  }
  for (const Server& s : servers) {
    if (s.pid > 0) {
      kill(s.pid, SIGKILL);
      waitpid(s.pid, nullptr, 0);
    }
  }
  return ok ? 0 : 1;
}
