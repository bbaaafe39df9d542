// The Plan RPC without gRPC: a job's spec planned exactly as RunJob plans
// it (function or program resolved, specs, shapes, program checked), and
// reported (server/plan_report.h) without moving any data or taking locks.
//
// Thread-safe.
#ifndef SHARDMAP_SERVER_PLAN_SERVICE_H_
#define SHARDMAP_SERVER_PLAN_SERVICE_H_

#include "absl/status/statusor.h"
#include "program/program_cache.h"
#include "server/function_catalog.h"
#include "server/resident_index.h"
#include "shardmap/v1/coordinator.pb.h"

namespace shardmap {

class PlanService {
 public:
  // None is owned; `index` and `programs` may be null.
  PlanService(const FunctionCatalog* catalog, const ResidentIndex* index,
              program::ProgramCache* programs)
      : catalog_(catalog), index_(index), programs_(programs) {}

  // Errors: FunctionCatalog::Resolve's and PlanJob's.
  absl::StatusOr<v1::PlanResponse> Plan(const v1::JobSpec& spec) const;

 private:
  const FunctionCatalog* const catalog_;
  const ResidentIndex* const index_;
  program::ProgramCache* const programs_;
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_PLAN_SERVICE_H_
