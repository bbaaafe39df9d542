#include "ops/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "rpc/trace_context.h"

namespace shardmap {
namespace {

nlohmann::json OrNull(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

class JsonFormatter final : public spdlog::formatter {
 public:
  JsonFormatter(std::string component, std::optional<int64_t> rank)
      : component_(std::move(component)), rank_(rank) {}

  void format(const spdlog::details::log_msg& msg,
              spdlog::memory_buf_t& dest) override {
    const int64_t micros =
        std::chrono::duration_cast<std::chrono::microseconds>(
            msg.time.time_since_epoch())
            .count();
    const spdlog::string_view_t level =
        spdlog::level::to_string_view(msg.level);
    const std::string line =
        JsonLogLine(micros, std::string(level.data(), level.size()), component_,
                    rank_, std::string(msg.payload.data(), msg.payload.size()));
    dest.append(line.data(), line.data() + line.size());
    dest.push_back('\n');
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>(component_, rank_);
  }

 private:
  const std::string component_;
  const std::optional<int64_t> rank_;
};

}  // namespace

std::string JsonLogLine(int64_t unix_micros, const std::string& level,
                        const std::string& component,
                        std::optional<int64_t> rank, const std::string& msg) {
  const LogContext& ctx = CurrentLogContext();
  nlohmann::ordered_json j;
  j["ts"] =
      absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ",
                       absl::FromUnixMicros(unix_micros), absl::UTCTimeZone());
  j["level"] = level;
  j["component"] = component;
  j["rank"] = rank.has_value() ? nlohmann::ordered_json(*rank)
                               : nlohmann::ordered_json(nullptr);
  j["job_id"] = OrNull(ctx.job_id);
  j["trace_id"] = OrNull(ctx.trace_id);
  j["span_id"] = OrNull(ctx.span_id);
  j["msg"] = msg;
  // Invalid UTF-8 in a message is replaced, never thrown on.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::Status SetupLogging(const std::string& component,
                          const std::string& level, const std::string& format,
                          std::optional<int64_t> rank) {
  const spdlog::level::level_enum lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--log-level must be trace, debug, info, warn, error, critical or "
        "off, got '",
        level, "'"));
  }
  if (format != "text" && format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-format must be text or json, got '", format, "'"));
  }
  auto logger = spdlog::stderr_color_mt(component);
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>(component, rank));
  }
  spdlog::set_default_logger(logger);
  spdlog::set_level(lvl);
  return absl::OkStatus();
}

}  // namespace shardmap
