// The worker's --state-dir: one block per resident array it holds, kept so
// a restarted worker serves them again.
//
// Layout: <root>/arrays/<dir>/current.json names the array, its version,
// device and origin (and the array's dtype, shape, mesh and spec when
// known); <root>/arrays/<dir>/v<version>.npy holds the data.
// <dir> is the array name with '/' and '%' escaped (%2F, %25), cut into
// pieces of at most 200 bytes (a directory level each, every level after
// the first starting "%+"), so every name has its own directory, no file
// name is over the file system's limit, and no name's files can land in
// another name's directory or outside the root.
//
// Every file is written with WriteFileAtomically. Not thread-safe: the
// ResidentStore serializes its calls.
#ifndef SHARDMAP_WORKER_STATE_DIR_H_
#define SHARDMAP_WORKER_STATE_DIR_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/box_copy.h"
#include "core/mesh.h"
#include "core/partition_spec.h"
#include "core/tensor.h"
#include "wire/proto_convert.h"

namespace shardmap {

// The whole array a block belongs to, as the coordinator wrote it.
struct ResidentArrayLayout {
  ArrayMeta meta;  // dtype and whole shape
  Mesh mesh;
  PartitionSpec spec;
};

// One block of a resident array, as a worker holds it.
struct ResidentBlock {
  uint64_t version = 0;
  int64_t device = 0;  // the array's device it belongs to
  Box box;             // where it sits in the array
  // shape == box.shape. Made as a (non-const) Tensor, so a job the block
  // is donated to may take its buffer once it holds the only reference.
  std::shared_ptr<const Tensor> data;
  // Unknown for blocks a previous run kept without it.
  std::optional<ResidentArrayLayout> layout;
};

// Where a ResidentStore keeps its blocks across restarts: a StateDir, or
// a test's fake. The store serializes the calls.
class ResidentDisk {
 public:
  struct Loaded {
    std::string name;
    ResidentBlock block;
  };
  struct Bad {
    std::string name;  // as its metadata says, or "" if unreadable
    std::string path;  // the file at fault
    std::string reason;
  };

  virtual ~ResidentDisk() = default;
  // Writes every (name, block) so that each name's newest block on disk
  // is the given one, all or nothing. Errors name the file and the
  // system's reason.
  virtual absl::Status Persist(
      const std::vector<std::pair<std::string, const ResidentBlock*>>&
          blocks) = 0;
  // Removes `name`'s files (never another name's). Errors name the file.
  virtual absl::Status Remove(const std::string& name) = 0;
  // Reads every array kept: the good ones to `loaded`, the others to `bad`
  // with the path and the reason.
  virtual void Load(std::vector<Loaded>* loaded,
                    std::vector<Bad>* bad) const = 0;
};

class StateDir final : public ResidentDisk {
 public:
  explicit StateDir(std::string root) : root_(std::move(root)) {}

  // As ResidentDisk; on an error the blocks already switched are switched
  // back (as far as the disk allows) and the new data files removed.
  // Errors (core/atomic_file.h) name the file and the system's reason.
  absl::Status Persist(
      const std::vector<std::pair<std::string, const ResidentBlock*>>& blocks)
      override;

  absl::Status Remove(const std::string& name) override;

  // An array whose metadata or data is missing, empty, malformed,
  // truncated or inconsistent, or whose name breaks the rules
  // (core/array_name.h), goes to `bad`. Leftover temporary files are
  // removed.
  void Load(std::vector<Loaded>* loaded, std::vector<Bad>* bad) const override;

  // The directory of `name`'s files, relative to <root>/arrays.
  static std::string ArrayDir(const std::string& name);

 private:
  std::string Dir(const std::string& name) const;

  const std::string root_;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_STATE_DIR_H_
