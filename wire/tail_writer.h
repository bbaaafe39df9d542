// Writes a stream's messages one behind, so that the last can go out
// together with the end of the stream (gRPC's WriteLast: the client's
// half-close, or the server's status) instead of in a network write of its
// own.
//
// `write(message, last)` does the writing; `last` is true for the final
// message only. Push hands a message over and writes the one before it;
// Close writes the held one as the last. Both return false once a write
// failed.
//
// Not thread-safe: one writer per stream.
#ifndef SHARDMAP_WIRE_TAIL_WRITER_H_
#define SHARDMAP_WIRE_TAIL_WRITER_H_

#include <functional>
#include <optional>
#include <utility>

namespace shardmap {

template <typename Message>
class TailWriter {
 public:
  using Write = std::function<bool(const Message&, bool last)>;
  explicit TailWriter(Write write) : write_(std::move(write)) {}

  bool Push(Message message) {
    if (held_.has_value()) WriteHeld(false);
    held_ = std::move(message);
    return ok_;
  }
  // Writes the held message as the last one (nothing if there is none).
  bool Close() {
    if (held_.has_value()) WriteHeld(true);
    return ok_;
  }

 private:
  void WriteHeld(bool last) {
    ok_ = ok_ && write_(*held_, last);
    held_.reset();
  }

  const Write write_;
  std::optional<Message> held_;
  bool ok_ = true;
};

}  // namespace shardmap

#endif  // SHARDMAP_WIRE_TAIL_WRITER_H_
