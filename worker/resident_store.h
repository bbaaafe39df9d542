// The blocks of resident arrays this worker holds, by name and version,
// and the writes of running jobs, applied only when the job commits.
//
// A worker holds one block of an array (the block of the device it ran
// when the array was written). The previous version is kept until the one
// after, so a job that reads an array while another job replaces it still
// finds what it planned to read.
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
#include "core/mesh.h"
#include "core/partition_spec.h"
#include "core/proto_convert.h"
#include "core/tensor.h"

namespace shardmap {

class ResidentStore {
 public:
  // Without a directory, blocks live in memory only. With one, every
  // stored block is also written there (atomically) and LoadDirectory
  // brings them back after a restart.
  ResidentStore() = default;
  explicit ResidentStore(std::string directory)
      : directory_(std::move(directory)) {}
  // Loads the blocks a previous run left in the directory. Returns how
  // many; errors name the file.
  absl::StatusOr<int> LoadDirectory();
  // The whole array a block belongs to, as the coordinator wrote it.
  struct ArrayLayout {
    ArrayMeta meta;  // dtype and whole shape
    Mesh mesh;
    PartitionSpec spec;
  };
  struct Block {
    uint64_t version = 0;
    int64_t device = 0;                  // the array's device it belongs to
    Box box;                             // where it sits in the array
    std::shared_ptr<const Tensor> data;  // shape == box.shape
    // Unknown for blocks a previous run kept without it.
    std::optional<ArrayLayout> layout;
  };

  // NOT_FOUND if this worker holds no such version of `name`.
  absl::StatusOr<Block> Find(const std::string& name, uint64_t version) const;
  // Every (name, newest block) held, for listings and checkpoints.
  std::vector<std::pair<std::string, Block>> All() const;
  // Bytes of every block held, previous versions included (staged writes
  // are their jobs' to count).
  uint64_t Bytes() const;

  // Keeps `block` as the next version of `name` once `job_id` commits.
  void Stage(const std::string& job_id, const std::string& name, Block block);
  void Commit(const std::string& job_id);
  void Abort(const std::string& job_id);
  // Stores at once (a restored checkpoint).
  void Put(const std::string& name, Block block);
  void Drop(const std::string& name);

  // --- What the worker reports when it (re-)registers ---
  // Every (name, block) held, every version kept (oldest first per name).
  std::vector<std::pair<std::string, Block>> AllVersions() const;
  // Drops `version` of `name`, in memory and in the directory; another
  // version of it kept stays. Does nothing if it is not held.
  void DropVersion(const std::string& name, uint64_t version);
  // --- end of what the worker reports ---

 private:
  void PutLocked(const std::string& name, Block block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `block` under the directory, if there is one.
  void Persist(const std::string& name, const Block& block) const;
  void Unpersist(const std::string& name) const;

  const std::string directory_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::deque<Block>> blocks_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<std::pair<std::string, Block>>> staged_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_RESIDENT_STORE_H_
