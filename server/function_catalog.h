// What a job can call: the native functions the workers registered and
// the expression programs registered on the coordinator, under one
// namespace (a program may not take a built-in's name), plus a program
// given inline with the job.
//
// Thread-safe, as the pool and the store it reads.
#ifndef SHARDMAP_SERVER_FUNCTION_CATALOG_H_
#define SHARDMAP_SERVER_FUNCTION_CATALOG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/program_store.h"
#include "server/worker_pool.h"
#include "shardmap/v1/coordinator.pb.h"

namespace shardmap {

class FunctionCatalog {
 public:
  // Neither is owned; both must outlive the catalog.
  FunctionCatalog(const WorkerPool* pool, ProgramStore* programs)
      : pool_(pool), programs_(programs) {}

  // The signature a job runs by: its inline program's (signature.program
  // set to the source), a registered program's, or a worker function's.
  // INVALID_ARGUMENT for both a function and a program, neither, or a
  // program that does not parse; NOT_FOUND listing the known functions;
  // FAILED_PRECONDITION when the name is both a registered program's and
  // a worker function's.
  absl::StatusOr<v1::FunctionSignature> Resolve(const v1::JobSpec& spec) const;

  // Native functions first, then programs, each by name.
  std::vector<v1::FunctionSignature> List() const;

  // ProgramStore::Register, refusing a worker function's name
  // (ALREADY_EXISTS), and every name while no worker has registered
  // (FAILED_PRECONDITION: the functions' names are not known yet).
  absl::StatusOr<v1::FunctionSignature> Register(const std::string& name,
                                                 const std::string& source,
                                                 bool replace);
  absl::Status Unregister(const std::string& name);
  bool persistent() const { return programs_->persistent(); }

 private:
  const WorkerPool* const pool_;
  ProgramStore* const programs_;
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_FUNCTION_CATALOG_H_
