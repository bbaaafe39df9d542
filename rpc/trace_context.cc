#include "rpc/trace_context.h"

#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace shardmap {
namespace {

std::string RandomHex(int digits) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  while (out.empty() || out.find_first_not_of('0') == std::string::npos) {
    out.clear();
    for (int i = 0; i < digits; ++i) out.push_back(kHex[rng() % 16]);
  }
  return out;
}

bool IsHex(const std::string& s, size_t digits) {
  if (s.size() != digits) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(c) || absl::ascii_isupper(c)) return false;
  }
  return s.find_first_not_of('0') != std::string::npos;
}

thread_local LogContext current;

}  // namespace

Traceparent Traceparent::New() {
  return Traceparent{RandomHex(32), RandomHex(16), "01"};
}

std::optional<Traceparent> Traceparent::Parse(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, '-');
  if (parts.size() != 4 || parts[0] != "00" || !IsHex(parts[1], 32) ||
      !IsHex(parts[2], 16) || parts[3].size() != 2 ||
      !absl::ascii_isxdigit(parts[3][0]) ||
      !absl::ascii_isxdigit(parts[3][1])) {
    return std::nullopt;
  }
  return Traceparent{parts[1], parts[2], parts[3]};
}

Traceparent Traceparent::Child() const {
  return Traceparent{trace_id, RandomHex(16), flags};
}

std::string Traceparent::ToString() const {
  return absl::StrCat("00-", trace_id, "-", span_id, "-", flags);
}

Traceparent ServerSpan(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kTraceparentKey);
  if (it == metadata.end()) return Traceparent::New();
  return ChildSpan(std::string(it->second.data(), it->second.size()));
}

Traceparent ChildSpan(const std::string& parent) {
  auto parsed = Traceparent::Parse(parent);
  return parsed.has_value() ? parsed->Child() : Traceparent::New();
}

const LogContext& CurrentLogContext() { return current; }

ScopedLogContext::ScopedLogContext(LogContext context)
    : saved_(std::move(current)) {
  current = std::move(context);
}

ScopedLogContext::~ScopedLogContext() { current = std::move(saved_); }

}  // namespace shardmap
