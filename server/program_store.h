// Expression programs registered by name on the coordinator (shardctl
// register). With a data directory they are kept in
// <data-dir>/programs.json, written atomically on every change and read
// back at start, so they survive a restart; without one, in memory only.
//
// Thread-safe.
#ifndef SHARDMAP_SERVER_PROGRAM_STORE_H_
#define SHARDMAP_SERVER_PROGRAM_STORE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "shardmap/v1/common.pb.h"

namespace shardmap {

class ProgramStore {
 public:
  // Reads <data_dir>/programs.json if there is one; empty `data_dir`:
  // memory only. Errors: DATA_LOSS naming the file and what is wrong with
  // it (a program that no longer parses is not dropped silently).
  static absl::StatusOr<std::unique_ptr<ProgramStore>> Open(
      const std::string& data_dir);

  bool persistent() const { return !path_.empty(); }

  // Parses `source` and stores it. INVALID_ARGUMENT for a bad name or a
  // source that does not parse (line, column, caret); ALREADY_EXISTS if
  // the name is registered and `replace` is false; RESOURCE_EXHAUSTED
  // past 1,000 programs; the write's error if it cannot be kept (then
  // nothing changes).
  absl::StatusOr<v1::FunctionSignature> Register(const std::string& name,
                                                 const std::string& source,
                                                 bool replace);
  // NOT_FOUND if `name` is not registered.
  absl::Status Unregister(const std::string& name);
  std::optional<v1::FunctionSignature> Find(const std::string& name) const;
  std::vector<v1::FunctionSignature> List() const;

  // The signature a program's source declares, as a job or `functions`
  // shows it: its name, arity and (when the source shows it) outputs.
  static absl::StatusOr<v1::FunctionSignature> SignatureOf(
      const std::string& name, const std::string& source);

 private:
  explicit ProgramStore(std::string path) : path_(std::move(path)) {}
  // Writes `programs` to path_ (if any).
  absl::Status Save(const std::map<std::string, std::string>& programs) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const std::string path_;  // empty: memory only
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> sources_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::FunctionSignature> signatures_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_PROGRAM_STORE_H_
