#include "client/job_answer.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "wire/chunking.h"
#include "wire/proto_convert.h"

namespace shardmap {

absl::Status ReadJobAnswer(RawReader* stream, JobResult* result) {
  absl::Status status;
  v1::RunJobResponse response;
  // False at the end of the stream; a message that is not a RunJobResponse
  // ends the call, as with gRPC's own typed streams.
  // A chunk comes as `chunk`, its bytes left where they arrived.
  std::optional<ReceivedChunk> chunk;
  auto read = [&]() {
    bool malformed = false;
    if (ReadChunked(stream, v1::RunJobResponse::kChunkFieldNumber, &response,
                    &chunk, &malformed)) {
      return true;
    }
    if (malformed) {
      status = absl::InternalError(
          "the coordinator sent a message that is not a RunJobResponse");
    }
    return false;
  };
  if (read()) {
    if (chunk.has_value() || !response.has_result()) {
      status = absl::InternalError("coordinator sent chunks before the result");
    } else {
      result->job_id = response.result().job_id();
      result->coordinator_seconds = response.result().seconds();
      result->num_devices = response.result().num_devices();
      if (response.result().has_output_tree()) {
        result->output_tree = response.result().output_tree();
      }
      for (const auto& s : response.result().output_specs()) {
        result->output_specs.push_back(SpecFromProto(s));
      }
      for (int i = 0; status.ok() && i < response.result().outputs_size();
           ++i) {
        auto meta = HeaderFromProto(response.result().outputs(i),
                                    absl::StrCat("output ", i));
        if (!meta.ok()) {
          status = meta.status();
          break;
        }
        const auto& stored_as = response.result().stored_as();
        if (i < stored_as.size() && !stored_as[i].empty()) {
          result->stored.emplace_back(stored_as[i], *meta);
          continue;  // stays on the workers; no chunks follow
        }
        auto t = Tensor::Create(meta->dtype, meta->shape);
        if (!t.ok()) {
          status = t.status();
          break;
        }
        result->outputs.push_back(*std::move(t));
      }
      // Chunks are numbered by output index; stored outputs send none.
      std::vector<size_t> sizes;
      std::vector<ChunkSequencer::Sink> sinks;
      size_t next_returned = 0;
      for (int i = 0; i < response.result().outputs_size(); ++i) {
        const auto& stored_as = response.result().stored_as();
        if ((i < stored_as.size() && !stored_as[i].empty()) ||
            next_returned >= result->outputs.size()) {
          sizes.push_back(0);
          sinks.push_back(nullptr);
          continue;
        }
        Tensor& t = result->outputs[next_returned++];
        sizes.push_back(t.num_bytes());
        sinks.push_back(ChunkSequencer::Into(t));
      }
      ChunkSequencer sequencer(std::move(sizes), std::move(sinks), "output");
      // Small outputs come inside the result (JobSpec.inline_outputs).
      if (status.ok()) status = sequencer.AcceptAll(response.result().chunks());
      while (status.ok() && read()) {
        status =
            chunk.has_value()
                ? sequencer.Accept(*chunk)
                : absl::InternalError("unexpected message after the result");
      }
      if (status.ok()) status = sequencer.Finish();
    }
  }
  return status;
}

}  // namespace shardmap
