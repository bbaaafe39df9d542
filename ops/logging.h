// How the binaries log: spdlog to stderr, as colored text (the default) or
// as JSON lines (--log-format json) with the fields
//   ts, level, component, rank, job_id, trace_id, span_id, msg
// where job_id, trace_id and span_id come from the logging thread's
// LogContext (rpc/trace_context.h) and are null outside a job.
#ifndef SHARDMAP_CORE_LOGGING_H_
#define SHARDMAP_CORE_LOGGING_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace shardmap {

// Installs the default logger. `format` is "text" or "json", `level` one
// of spdlog's names; INVALID_ARGUMENT naming the flag otherwise.
absl::Status SetupLogging(const std::string& component,
                          const std::string& level, const std::string& format,
                          std::optional<int64_t> rank = std::nullopt);

// One JSON log line (no newline) - what the json format writes.
std::string JsonLogLine(int64_t unix_micros, const std::string& level,
                        const std::string& component,
                        std::optional<int64_t> rank, const std::string& msg);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_LOGGING_H_
