// The blocks of resident arrays this worker holds, by name and version,
// and the writes of running jobs, applied only when the job commits.
//
// A worker holds one block of an array (the block of the device it ran
// when the array was written). The previous version is kept until the one
// after, so a job that reads an array while another job replaces it still
// finds what it planned to read.
//
// With a state directory (worker/store/state_dir.h) every stored block is also
// written to disk, before it is stored in memory and outside the lock
// readers take (a large commit never blocks a read): a block that cannot
// be written is not stored, and the write returns the error, naming the
// file and the system's reason.
//
// Thread-safe.
#ifndef SHARDMAP_WORKER_RESIDENT_STORE_H_
#define SHARDMAP_WORKER_RESIDENT_STORE_H_

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/box_copy.h"
#include "core/tensor.h"
#include "worker/store/state_dir.h"

namespace shardmap {

class ResidentStore {
 public:
  using Block = ResidentBlock;
  using ArrayLayout = ResidentArrayLayout;
  using BadArray = StateDir::Bad;

  // Without a directory, blocks live in memory only. With one, every
  // stored block is also written there and LoadDirectory brings them back
  // after a restart.
  ResidentStore() = default;
  explicit ResidentStore(std::string directory);
  // Keeps the blocks in `disk` (null: memory only).
  explicit ResidentStore(std::unique_ptr<ResidentDisk> disk)
      : disk_(std::move(disk)) {}

  // Loads the blocks a previous run left in the directory and returns how
  // many. An array that cannot be loaded (damaged or missing files, bad
  // metadata, a name that breaks the rules) is skipped, logged with its
  // path and reason, and listed by BadArrays(); the others load.
  absl::StatusOr<int> LoadDirectory();
  // The arrays LoadDirectory skipped, with the file and the reason.
  std::vector<BadArray> BadArrays() const;

  // NOT_FOUND if this worker holds no such version of `name` (stored or
  // exposed).
  absl::StatusOr<Block> Find(const std::string& name, uint64_t version) const;
  // Every (name, newest block) held, for listings and checkpoints.
  std::vector<std::pair<std::string, Block>> All() const;
  // Bytes of every block held, previous versions included (staged writes
  // are their jobs' to count).
  uint64_t Bytes() const;

  // Keeps `block` as the next version of `name` once `job_id` commits.
  void Stage(const std::string& job_id, const std::string& name, Block block);
  // Makes `block` readable by Find (so by the job's peers' ReadBlock) as
  // `block.version` of `name` while `job_id` runs: a written state's block
  // in the job's sharding, which the job's devices reshard into its out
  // spec (ShardJob.state_out_specs). It is memory only: never stored,
  // persisted, listed, counted or reported, and Commit or Abort of the
  // job forgets it.
  void Expose(const std::string& job_id, const std::string& name, Block block);
  // Stores the job's staged blocks: all of them or, if they cannot be
  // persisted, none (the error names the file and the system's reason;
  // the staged blocks are dropped either way). INVALID_ARGUMENT for a name
  // that breaks the rules (core/array_name.h). OK for an unknown job.
  // Forgets the job's exposed blocks.
  absl::Status Commit(const std::string& job_id);
  // Drops the job's staged and exposed blocks.
  void Abort(const std::string& job_id);
  // Stores at once (a restored checkpoint). Errors as Commit.
  absl::Status Put(const std::string& name, Block block);
  // Forgets `name` and removes its files; the error names a file that
  // could not be removed (the block is forgotten in memory anyway).
  // INVALID_ARGUMENT for a name that breaks the rules.
  absl::Status Drop(const std::string& name);
  // Forgets only `version` of `name` (a write the coordinator did not
  // commit), as DropVersion; INVALID_ARGUMENT for a name that breaks the
  // rules, and the error names a file that could not be changed.
  absl::Status Drop(const std::string& name, uint64_t version);

  // A job read `version` of `name`, which the coordinator planned it
  // against, so every version before it is superseded everywhere: drops
  // them from memory (the directory keeps only the newest already).
  void DropBefore(const std::string& name, uint64_t version);
  // Takes `version` of `name` out of memory for a job that consumes it
  // (a donated argument, JobSpec.donate_args), with every version before
  // it; the directory keeps its file until the job's write replaces it or
  // the coordinator has the name dropped. NOT_FOUND as Find.
  absl::StatusOr<Block> Take(const std::string& name, uint64_t version);

  // --- What the worker reports when it (re-)registers ---
  // Every (name, block) held, every version kept (oldest first per name).
  std::vector<std::pair<std::string, Block>> AllVersions() const;
  // Drops `version` of `name`, in memory and in the directory; another
  // version of it kept stays (and becomes the one on disk). Does nothing
  // if it is not held. The error names a file that could not be changed
  // (the version is dropped in memory anyway).
  absl::Status DropVersion(const std::string& name, uint64_t version);
  // --- end of what the worker reports ---

 private:
  // Persists then stores `blocks`.
  absl::Status Store(std::vector<std::pair<std::string, Block>> blocks);

  std::unique_ptr<ResidentDisk> disk_;  // null: memory only
  // Serializes writers (disk first, then memory), so disk and memory agree
  // on the order of versions. Readers take only mu_, which is never held
  // while the disk is written.
  absl::Mutex disk_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::map<std::string, std::deque<Block>> blocks_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<std::pair<std::string, Block>>> staged_
      ABSL_GUARDED_BY(mu_);
  // Per job: the blocks Expose made readable.
  std::map<std::string, std::vector<std::pair<std::string, Block>>> exposed_
      ABSL_GUARDED_BY(mu_);
  std::vector<BadArray> bad_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_RESIDENT_STORE_H_
