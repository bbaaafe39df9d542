// The coordinator's index of resident arrays: for each name, the whole
// array's dtype and shape, the mesh and spec it is sharded by, which
// worker holds each device's block, and its version. An array whose
// holder has left the pool is lost: using it fails until it is put or
// restored again.
//
// Thread-safe.
#ifndef SHARDMAP_SERVER_RESIDENT_INDEX_H_
#define SHARDMAP_SERVER_RESIDENT_INDEX_H_

#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/mesh.h"
#include "core/partition_spec.h"
#include "core/proto_convert.h"
#include "shardmap/v1/coordinator.pb.h"

namespace shardmap {

struct ResidentArray {
  std::string name;
  ArrayMeta meta;
  Mesh mesh = *Mesh::Create({{"x", 1}});
  PartitionSpec spec;
  std::vector<std::string> worker_ids;  // by device
  std::vector<std::string> addresses;   // by device
  uint64_t version = 0;
};

class ResidentIndex {
 public:
  // `is_live(worker_id)` tells whether a holder is still in the pool.
  explicit ResidentIndex(std::function<bool(const std::string&)> is_live)
      : is_live_(std::move(is_live)) {}

  // NOT_FOUND for an unknown name; FAILED_PRECONDITION naming the lost
  // worker for a lost array.
  absl::StatusOr<ResidentArray> Find(const std::string& name) const;
  // OK if `name` may be written with `meta`, sharded by `spec` over
  // `mesh`: it is new, or has the same dtype, shape and sharding (the same
  // mesh, and the same spec once both are padded with None to the rank),
  // or `overwrite`. FAILED_PRECONDITION otherwise, naming both; a put with
  // another sharding replaces the array's layout, which scripts reading
  // it by its old one would not expect. INVALID_ARGUMENT for a malformed
  // name.
  absl::Status CheckWrite(const std::string& name, const ArrayMeta& meta,
                          const Mesh& mesh, const PartitionSpec& spec,
                          bool overwrite) const;
  uint64_t NextVersion();
  void Commit(ResidentArray array);
  // A worker that restarted with blocks it kept on disk: for each block
  // of an array whose holder of that device is gone, at the same version,
  // the new worker becomes the holder. Returns how many were taken back.
  int Rebind(
      const std::vector<std::tuple<std::string, uint64_t, int64_t>>& held,
      const std::string& worker_id, const std::string& address);
  // NOT_FOUND for an unknown name. Returns the removed entry.
  absl::StatusOr<ResidentArray> Remove(const std::string& name);
  std::vector<v1::ResidentInfo> List(const std::string& prefix) const;
  std::vector<ResidentArray> All() const;

  static v1::ResidentInfo ToInfo(const ResidentArray& a, bool lost);
  // ValidateArrayName (core/array_name.h).
  static absl::Status ValidateName(const std::string& name);

 private:
  // The first holder that is gone, or empty.
  std::string LostHolder(const ResidentArray& a) const;

  const std::function<bool(const std::string&)> is_live_;
  mutable absl::Mutex mu_;
  std::map<std::string, ResidentArray> arrays_ ABSL_GUARDED_BY(mu_);
  uint64_t next_version_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_RESIDENT_INDEX_H_
