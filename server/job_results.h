// What a job's devices send back, and what the job hands its client: the
// data the job runner's pieces pass between them (server/shard_call.h
// fills DeviceResult, server/output_assembly.h turns them into JobOutputs).
#ifndef SHARDMAP_SERVER_JOB_RESULTS_H_
#define SHARDMAP_SERVER_JOB_RESULTS_H_

#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "server/replication_check.h"
#include "wire/proto_convert.h"

namespace shardmap {

// What one device sent back.
struct DeviceResult {
  // Per output of the function: the header of this device's block.
  std::vector<ArrayMeta> outputs;
  DeviceDigests digests;
  // Per output: the block's data, only where the coordinator asked for it
  // (returned outputs, on their representative devices).
  std::vector<std::optional<Tensor>> blocks;
};

// One output of a job: returned (data set) or stored as a resident array.
struct JobOutput {
  ArrayMeta meta;  // the whole output
  std::optional<Tensor> data;
  std::string stored_as;
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_JOB_RESULTS_H_
