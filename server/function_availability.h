// Which workers offer which native functions: each worker registers its
// own (built-ins and the plugins it loaded), and a job may run only where
// every worker of its mesh has the function with one signature.
//
// Pure functions over the pool's worker records; thread-safe.
#ifndef SHARDMAP_SERVER_FUNCTION_AVAILABILITY_H_
#define SHARDMAP_SERVER_FUNCTION_AVAILABILITY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/worker_pool.h"
#include "shardmap/v1/common.pb.h"

namespace shardmap {

// The same function for callers: everything but origin and workers equal
// (workers may load one plugin from different paths).
bool SameSignature(const v1::FunctionSignature& a,
                   const v1::FunctionSignature& b);

// OK when every one of `workers` has `name` with one signature.
// FAILED_PRECONDITION naming the workers (id and address) that lack it, or,
// when signatures differ, each worker's signature and origin.
absl::Status CheckFunctionOnWorkers(
    const std::string& name, const std::vector<WorkerPool::Worker>& workers);

// Every function of `workers`, by name; one entry per distinct signature,
// with `workers` set to the addresses that offer it.
std::vector<v1::FunctionSignature> FunctionsOfWorkers(
    const std::vector<WorkerPool::Worker>& workers);

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_FUNCTION_AVAILABILITY_H_
