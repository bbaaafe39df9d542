// Reader/writer locks on resident array names, so jobs that write an array
// (a state, a stored output) run one at a time against it and every job
// that reads it sees a committed version: no lost update. A job takes all
// its locks at once, in name order, so jobs cannot deadlock on them.
//
// Thread-safe.
#ifndef SHARDMAP_SERVER_NAME_LOCKS_H_
#define SHARDMAP_SERVER_NAME_LOCKS_H_

#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardmap {

class NameLocks {
 public:
  // Releases its locks when destroyed.
  class Held {
   public:
    ~Held();
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;

   private:
    friend class NameLocks;
    Held(NameLocks* owner, std::set<std::string> reads,
         std::set<std::string> writes)
        : owner_(owner), reads_(std::move(reads)), writes_(std::move(writes)) {}
    NameLocks* const owner_;  // Not owned.
    const std::set<std::string> reads_;
    const std::set<std::string> writes_;
  };

  // Waits until no other job writes any of `reads` or `writes` and none
  // reads any of `writes`. A name in both counts as written.
  // DEADLINE_EXCEEDED naming the name if `deadline` passes first.
  absl::StatusOr<std::unique_ptr<Held>> Acquire(std::set<std::string> reads,
                                                std::set<std::string> writes,
                                                absl::Time deadline);

 private:
  void Release(const std::set<std::string>& reads,
               const std::set<std::string>& writes);

  absl::Mutex mu_;
  std::map<std::string, int> readers_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> writers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_NAME_LOCKS_H_
