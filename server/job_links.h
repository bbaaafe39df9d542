// --job-links: when a small job's device calls share each worker's
// long-lived job link (server/shard_link.h) instead of opening a RunShard
// stream each.
#ifndef SHARDMAP_SERVER_JOB_LINKS_H_
#define SHARDMAP_SERVER_JOB_LINKS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace shardmap {

// kAuto: when the links are up, or other jobs run (a job alone does not
// wait for links to be made: it has them started and opens streams of its
// own meanwhile); kAlways: a small job waits for its links to be made;
// kNever.
enum class JobLinks { kAuto, kAlways, kNever };

// "auto", "always" or "never"; INVALID_ARGUMENT naming --job-links else.
inline absl::StatusOr<JobLinks> ParseJobLinks(const std::string& text) {
  if (text == "auto") return JobLinks::kAuto;
  if (text == "always") return JobLinks::kAlways;
  if (text == "never") return JobLinks::kNever;
  return absl::InvalidArgumentError(absl::StrCat(
      "--job-links must be auto, always or never, not '", text, "'"));
}

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_JOB_LINKS_H_
