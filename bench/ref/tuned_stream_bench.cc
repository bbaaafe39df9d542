// tuned_stream_bench: the raw-transport ceiling for bench/run.sh. The same
// two streams as grpc_stream_bench (256 MiB one way, and 256 MiB each way
// at once, in 1 MiB messages), done the way gRPC is fastest here:
//
//   - the callback API and generic (byte-buffer) calls, no protobuf: each
//     message is a grpc::ByteBuffer over one static slice of the sender's
//     memory, so nothing is serialized or copied before the socket;
//   - HTTP/2 BDP probing off, retries off (the retry layer would hold sent
//     buffers), no message size limit;
//   - glibc malloc told to keep freed memory (no trim, no mmap for large
//     blocks), so gRPC's read buffers are not page-faulted in every time.
//
// The server is a forked process on 127.0.0.1:0; the client runs here.
//
//   tuned_stream_bench --ops push,duplex --bytes 268435456 --iters 3
//
// Prints one RESULT line per op (impl=grpc-tuned; times in µs, median over
// iterations), the format bench/report.py reads.
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <malloc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kChunk = size_t{1} << 20;

// One MiB of payload every message of both sides points at.
const std::vector<char>& Payload() {
  static const std::vector<char> payload(kChunk, 'x');
  return payload;
}

grpc::ByteBuffer ChunkBuffer(size_t n) {
  grpc::Slice slice(Payload().data(), n, grpc::Slice::STATIC_SLICE);
  return grpc::ByteBuffer(&slice, 1);
}

grpc::ByteBuffer CountBuffer(int64_t v) {
  grpc::Slice slice(&v, sizeof(v));  // copied: v is on the stack
  return grpc::ByteBuffer(&slice, 1);
}

int64_t ReadCount(const grpc::ByteBuffer& b) {
  grpc::Slice s;
  int64_t v = -1;
  if (b.TrySingleSlice(&s).ok() && s.size() == sizeof(v)) {
    std::memcpy(&v, s.begin(), sizeof(v));
  } else {
    std::vector<grpc::Slice> slices;
    std::string all;
    if (b.Dump(&slices).ok()) {
      for (const auto& x : slices) all.append(x.begin(), x.end());
    }
    if (all.size() == sizeof(v)) std::memcpy(&v, all.data(), sizeof(v));
  }
  return v;
}

// Streams `total` bytes in kChunk messages, one write in flight at a time
// (gRPC's callback streams allow one), from OnWriteDone.
class ChunkWriter {
 public:
  explicit ChunkWriter(int64_t total) : left_(total) {}
  // Next message to write, or false when all were written.
  bool Next(grpc::ByteBuffer* out) {
    if (left_ <= 0) return false;
    const size_t n = static_cast<size_t>(
        std::min<int64_t>(left_, static_cast<int64_t>(kChunk)));
    left_ -= static_cast<int64_t>(n);
    *out = ChunkBuffer(n);
    return true;
  }

 private:
  int64_t left_;
};

// Server side. "/bench/Push": counts what arrives, answers the count when
// the client is done. "/bench/Duplex": the first message is the byte count
// to send back; then it sends that many while counting what arrives.
class ServerStream : public grpc::ServerGenericBidiReactor {
 public:
  explicit ServerStream(bool duplex) : duplex_(duplex) { StartRead(&in_); }
  void OnReadDone(bool ok) override {
    if (!ok) {
      reads_done_ = true;
      if (!duplex_) {
        out_ = CountBuffer(received_);
        StartWrite(&out_);
      } else {
        MaybeFinish();
      }
      return;
    }
    if (duplex_ && !started_) {
      started_ = true;
      writer_ = ChunkWriter(ReadCount(in_));
      WriteNext();
    } else {
      received_ += static_cast<int64_t>(in_.Length());
    }
    StartRead(&in_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok || !duplex_) {
      Finish(grpc::Status::OK);
      return;
    }
    WriteNext();
  }
  void OnDone() override { delete this; }

 private:
  void WriteNext() {
    if (writer_.Next(&out_)) {
      StartWrite(&out_);
    } else {
      writes_done_ = true;
      MaybeFinish();
    }
  }
  void MaybeFinish() {
    if (reads_done_ && writes_done_ && !finished_) {
      finished_ = true;
      Finish(grpc::Status::OK);
    }
  }

  const bool duplex_;
  grpc::ByteBuffer in_, out_;
  ChunkWriter writer_{0};
  int64_t received_ = 0;
  bool started_ = false, reads_done_ = false, writes_done_ = false;
  bool finished_ = false;
};

class Service final : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* ctx) override {
    return new ServerStream(ctx->method() == "/bench/Duplex");
  }
};

void Tune() {
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
}

[[noreturn]] void Serve(int fd, pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  Tune();
  Service service;
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterCallbackGenericService(&service);
  b.SetMaxReceiveMessageSize(-1);
  b.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto server = b.BuildAndStart();
  if (!server || port == 0) _exit(1);
  if (write(fd, &port, sizeof(port)) != sizeof(port)) _exit(1);
  close(fd);
  server->Wait();
  _exit(0);
}

// Client side of one call: writes `send` bytes (after an 8-byte count of
// what the server is to send back, for Duplex), reads until the server
// finishes, and reports the bytes it received.
class ClientStream
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  ClientStream(grpc::GenericStub* stub, bool duplex, int64_t bytes)
      : duplex_(duplex), writer_(bytes) {
    ctx_.set_deadline(std::chrono::system_clock::now() +
                      std::chrono::seconds(120));
    stub->PrepareBidiStreamingCall(&ctx_,
                                   duplex ? "/bench/Duplex" : "/bench/Push",
                                   grpc::StubOptions(), this);
    if (duplex) {
      out_ = CountBuffer(bytes);
      StartWrite(&out_);
    } else {
      WriteNext();
    }
    StartRead(&in_);
    StartCall();
  }
  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    const int64_t n = static_cast<int64_t>(in_.Length());
    received_ = duplex_ ? received_ + n : ReadCount(in_);
    StartRead(&in_);
  }
  void OnDone(const grpc::Status& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = s;
    done_ = true;
    cv_.notify_all();
  }
  // The call's status, and what the server counted (Push) or what this
  // side received (Duplex).
  grpc::Status Await(int64_t* received) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
    *received = received_;
    return status_;
  }

 private:
  void WriteNext() {
    if (writer_.Next(&out_)) {
      StartWrite(&out_);
    } else {
      StartWritesDone();
    }
  }

  const bool duplex_;
  grpc::ClientContext ctx_;
  ChunkWriter writer_;
  grpc::ByteBuffer in_, out_;
  int64_t received_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  grpc::Status status_;
};

bool Run(grpc::GenericStub* stub, const std::string& op, int64_t bytes,
         int iters) {
  const bool duplex = op == "duplex";
  std::vector<double> us;
  for (int it = -1; it < iters; ++it) {  // it == -1: warm-up
    const auto t0 = Clock::now();
    ClientStream call(stub, duplex, bytes);
    int64_t received = 0;
    const grpc::Status s = call.Await(&received);
    const auto t1 = Clock::now();
    if (!s.ok() || received != bytes) {
      std::fprintf(stderr, "%s: %s (%lld of %lld bytes)\n", op.c_str(),
                   s.error_message().c_str(), static_cast<long long>(received),
                   static_cast<long long>(bytes));
      return false;
    }
    if (it >= 0) {
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  }
  std::sort(us.begin(), us.end());
  std::printf(
      "RESULT impl=grpc-tuned op=stream_%s n=2 bytes=%lld iters=%zu "
      "median_us=%.2f min_us=%.2f max_us=%.2f\n",
      op.c_str(), static_cast<long long>(bytes), us.size(), us[us.size() / 2],
      us.front(), us.back());
  std::fflush(stdout);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tuned gRPC byte-buffer stream reference"};
  std::string ops = "push,duplex";
  int64_t bytes = int64_t{256} << 20;
  int iters = 3;
  app.add_option("--ops", ops, "push,duplex");
  app.add_option("--bytes", bytes, "bytes per call (each way for duplex)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 34));
  app.add_option("--iters", iters, "timed calls per op")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);
  Tune();

  int fds[2];
  if (pipe(fds) != 0) return 1;
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    Serve(fds[1], parent);
  }
  close(fds[1]);
  int port = 0;
  if (read(fds[0], &port, sizeof(port)) != sizeof(port)) {
    std::fprintf(stderr, "server did not start\n");
    kill(child, SIGKILL);
    return 1;
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  auto channel =
      grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                grpc::InsecureChannelCredentials(), args);
  grpc::GenericStub stub(channel);
  bool ok = true;
  for (const std::string& op :
       std::vector<std::string>(absl::StrSplit(ops, ','))) {
    if (op != "push" && op != "duplex") {
      std::fprintf(stderr, "unknown op %s (push, duplex)\n", op.c_str());
      ok = false;
      break;
    }
    if (!Run(&stub, op, bytes, iters)) {
      ok = false;
      break;
    }
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return ok ? 0 : 1;
}
