// The coordinator's index of resident arrays: for each name, the whole
// array's dtype and shape, the mesh and spec it is sharded by, which
// worker holds each device's block, and its version. An array whose
// holder has left the pool is lost: using it fails until it is put or
// restored again.
//
// The workers are the truth for what they hold: after a coordinator
// restart the index starts empty and is rebuilt from the blocks each
// worker reports when it registers (Report). An array comes back at the
// newest version whose every device's block has been reported; until one
// has, it is listed lost, naming the devices of its newest version still
// missing. An older version's blocks are never dropped for a newer one
// that is not complete (a write whose commit failed on some workers may
// have left it on the others).
//
// Versions are unique across coordinator lifetimes: each is at least the
// wall clock in microseconds and above every version issued or reported
// before, so a version issued after a restart is never one a worker still
// holds from before it (as long as the clock is not stepped back by more
// than the restart took).
//
// Thread-safe.
#ifndef SHARDMAP_SERVER_RESIDENT_INDEX_H_
#define SHARDMAP_SERVER_RESIDENT_INDEX_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/mesh.h"
#include "core/partition_spec.h"
#include "shardmap/v1/coordinator.pb.h"
#include "wire/proto_convert.h"

namespace shardmap {

struct ResidentArray {
  std::string name;
  ArrayMeta meta;
  Mesh mesh = *Mesh::Create({{"x", 1}});
  PartitionSpec spec;
  std::vector<std::string> worker_ids;  // by device
  std::vector<std::string> addresses;   // by device
  uint64_t version = 0;
  // Why it cannot be used although its holders are live (MarkLost), or
  // empty.
  std::string lost;
};

// A block a worker reports holding when it registers.
struct ReportedBlock {
  std::string name;
  uint64_t version = 0;
  int64_t device = 0;
  // The whole array it belongs to; without it (an older worker) the block
  // can only be given back to an array the index still knows.
  std::optional<ArrayMeta> meta;
  std::optional<Mesh> mesh;
  PartitionSpec spec;
};

class ResidentIndex {
 public:
  // `is_live(worker_id)` tells whether a holder is still in the pool.
  // `now_micros` is the wall clock versions start from (injectable for
  // tests).
  explicit ResidentIndex(std::function<bool(const std::string&)> is_live,
                         std::function<uint64_t()> now_micros = WallMicros);

  // NOT_FOUND for an unknown name; FAILED_PRECONDITION naming the lost
  // worker, or the devices no worker has reported yet, for a lost array.
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
  // Above every version issued or reported so far, and at least the wall
  // clock in microseconds.
  uint64_t NextVersion();
  // A block of a version the index no longer serves that a worker may
  // still keep: the worker at `address` must drop `version` of the name,
  // or every version of it when `version` is 0 (it holds no block of the
  // current one).
  struct Superseded {
    std::string address;
    uint64_t version = 0;
    bool operator==(const Superseded& o) const {
      return address == o.address && version == o.version;
    }
  };
  // Publishes `array` as the current version of its name. Returns where
  // blocks of the versions it replaces may still be kept, other than next
  // to a block of `array` for the same device (a worker keeps its
  // previous version there): the holders of the replaced version and of
  // the other versions reported for it (per address, one entry of
  // version 0, or one per version for a holder of `array`). The
  // caller has them dropped before it acknowledges the write: a worker
  // keeps its blocks until told, so the holders of a replaced version
  // placed elsewhere (device placement follows registration order, which
  // a restart reshuffles) would otherwise still hold all of it, and a
  // coordinator restarted later, hearing from them before the new
  // holders, would serve that older version and let writes build on it.
  std::vector<Superseded> Commit(ResidentArray array);

  // What a worker registering as `worker_id` at `address` reported:
  // `taken` blocks now count it as their holder; `drop` are blocks nobody
  // can use (older than the array's version, of a name deleted or written
  // since), which the worker should free.
  struct Outcome {
    int taken = 0;
    std::vector<ReportedBlock> drop;
  };
  // Takes a worker's report. A block of an array's current version whose
  // device has no live holder (not yet reported, or its holder left) gets
  // this worker as holder. For a name the index knows only from reports,
  // every reported version is a candidate: the newest one complete on
  // every device (with live holders) is the array, or, while none is, the
  // newest one reported (lost until complete). A block older than a
  // complete version is dropped; blocks of newer versions that are not
  // complete are kept (and logged), and win once they are complete.
  // Blocks of a name written or deleted in this coordinator's lifetime
  // that are not of its current version are dropped. Blocks whose version
  // this coordinator issued and has not committed (a job committing right
  // now, or one whose commit failed) are left alone.
  Outcome Report(const std::string& worker_id, const std::string& address,
                 const std::vector<ReportedBlock>& blocks);
  // Marks `version` of `name` lost for `reason` (a job it was donated to
  // failed, server/donation.h) until a write replaces it; does nothing if
  // the name is at another version or unknown.
  void MarkLost(const std::string& name, uint64_t version,
                const std::string& reason);
  // NOT_FOUND for an unknown name. Returns the removed entry.
  absl::StatusOr<ResidentArray> Remove(const std::string& name);
  std::vector<v1::ResidentInfo> List(const std::string& prefix) const;
  std::vector<ResidentArray> All() const;

  static v1::ResidentInfo ToInfo(const ResidentArray& a, bool lost);
  static uint64_t WallMicros();
  // ValidateArrayName (core/array_name.h).
  static absl::Status ValidateName(const std::string& name);

 private:
  struct Entry {
    ResidentArray array;
    // Built from workers' reports, not written in this coordinator's
    // lifetime: a newer reported version replaces it.
    bool rebuilt = false;
    // Rebuilt only: the other versions reported and still candidates, by
    // version (older ones while none is complete, newer incomplete ones).
    std::map<uint64_t, ResidentArray> others;
    // Rebuilt only: versions below this one were superseded by a version
    // complete on every device, and are never taken again.
    uint64_t superseded_below = 0;
  };
  // Why `a` cannot be used (the first holder that is gone, or the devices
  // nobody reported), or empty.
  std::string LostReason(const ResidentArray& a) const;
  // One block of `Report`; true if this worker now holds it.
  bool TakeLocked(const std::string& worker_id, const std::string& address,
                  const ReportedBlock& b, std::vector<ReportedBlock>* drop)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A reported block of a rebuilt entry's candidate versions.
  bool TakeCandidateLocked(Entry& e, const std::string& worker_id,
                           const std::string& address, const ReportedBlock& b,
                           std::vector<ReportedBlock>* drop)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records `worker_id` as holder of `b`'s device of `a`, unless the block
  // does not fit or a live worker holds that device already.
  bool HoldLocked(ResidentArray& a, bool check_layout,
                  const std::string& worker_id, const std::string& address,
                  const ReportedBlock& b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether every device of `a` has a live holder.
  bool CompleteLocked(const ResidentArray& a) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes a rebuilt entry's array its newest complete candidate (or its
  // newest, if none is complete) and forgets candidates older than a
  // complete one.
  void SettleLocked(Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::function<bool(const std::string&)> is_live_;
  const std::function<uint64_t()> now_micros_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> arrays_ ABSL_GUARDED_BY(mu_);
  // The highest version issued or reported.
  uint64_t last_version_ ABSL_GUARDED_BY(mu_) = 0;
  // The versions this lifetime issued are in [first_issued_,
  // last_issued_] (none while first_issued_ is 0).
  uint64_t first_issued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_issued_ ABSL_GUARDED_BY(mu_) = 0;
  // Per deleted name: reported versions up to this one are gone for good.
  std::map<std::string, uint64_t> deleted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_RESIDENT_INDEX_H_
