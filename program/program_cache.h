// Checked programs by (source, mesh, argument types, options), so a job
// that repeats a call skips parsing and checking. Bounded: the least
// recently used entry goes first. Only successful checks are kept.
//
// Thread-safe.
#ifndef SHARDMAP_PROGRAM_PROGRAM_CACHE_H_
#define SHARDMAP_PROGRAM_PROGRAM_CACHE_H_

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/mesh.h"
#include "program/checker.h"
#include "program/ir.h"

namespace shardmap {
namespace program {

class ProgramCache {
 public:
  explicit ProgramCache(size_t capacity = 256) : capacity_(capacity) {}

  // CheckProgram's result, from the cache when the same call was checked
  // before. Errors are CheckProgram's.
  absl::StatusOr<std::shared_ptr<const Program>> Check(
      absl::string_view source, const Mesh& mesh,
      const std::vector<ArgType>& args, const CheckOptions& options);

  size_t size() const;

 private:
  using Lru = std::list<std::string>;
  struct Entry {
    std::shared_ptr<const Program> program;
    Lru::iterator position;
  };

  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  Lru lru_ ABSL_GUARDED_BY(mu_);  // most recent first
};

// CheckProgram's result through `cache`, or checked afresh when `cache`
// is null.
absl::StatusOr<std::shared_ptr<const Program>> CheckShared(
    ProgramCache* cache, absl::string_view source, const Mesh& mesh,
    const std::vector<ArgType>& args, const CheckOptions& options);

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_PROGRAM_CACHE_H_
