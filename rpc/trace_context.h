// W3C trace context (https://www.w3.org/TR/trace-context/) carried in the
// gRPC metadata key "traceparent" from the client to the coordinator and
// on to the workers, and the per-thread log context the JSON logs print:
// which job and trace a thread works for.
//
//   00-<trace id: 32 hex>-<parent span id: 16 hex>-<flags: 2 hex>
#ifndef SHARDMAP_CORE_TRACE_CONTEXT_H_
#define SHARDMAP_CORE_TRACE_CONTEXT_H_

#include <grpcpp/server_context.h>

#include <optional>
#include <string>

namespace shardmap {

inline constexpr char kTraceparentKey[] = "traceparent";

struct Traceparent {
  std::string trace_id;  // 32 lowercase hex digits, not all zero
  std::string span_id;   // 16 lowercase hex digits, not all zero
  std::string flags = "01";

  // A new trace with a new span (sampled).
  static Traceparent New();
  // nullopt unless `text` is a valid version-00 traceparent.
  static std::optional<Traceparent> Parse(const std::string& text);
  // The same trace, with a new span id of our own (a child span).
  Traceparent Child() const;
  std::string ToString() const;
};

// A server's span for a call: a child of the call's traceparent metadata,
// or the root of a new trace when it has none (or an invalid one).
Traceparent ServerSpan(const grpc::ServerContextBase& context);
// The same for a parent given as text (a traceparent carried in a
// message).
Traceparent ChildSpan(const std::string& parent);

// What the logs of the current thread are about; empty fields print null.
struct LogContext {
  std::string job_id;
  std::string trace_id;
  std::string span_id;
};

// The current thread's context.
const LogContext& CurrentLogContext();

// Sets the current thread's context for its lifetime, then restores the
// previous one.
class ScopedLogContext {
 public:
  explicit ScopedLogContext(LogContext context);
  ~ScopedLogContext();
  ScopedLogContext(const ScopedLogContext&) = delete;
  ScopedLogContext& operator=(const ScopedLogContext&) = delete;

 private:
  LogContext saved_;
};

}  // namespace shardmap

#endif  // SHARDMAP_CORE_TRACE_CONTEXT_H_
