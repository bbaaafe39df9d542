#include "server/arriving_inputs.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_util.h"
#include "wire/chunking.h"

namespace shardmap {

ArrivingInputs::ArrivingInputs(std::vector<Tensor> arrays)
    : ArrivingInputs(std::move(arrays), /*whole=*/true) {}

ArrivingInputs::ArrivingInputs(std::vector<Tensor> arrays, bool whole)
    : arrays_(std::make_shared<std::vector<Tensor>>(std::move(arrays))),
      arrived_(arrays_->size(), 0) {
  if (!whole) return;
  for (size_t i = 0; i < arrays_->size(); ++i) {
    arrived_[i] = (*arrays_)[i].num_bytes();  // not shared yet: no lock
  }
}

absl::StatusOr<std::unique_ptr<ArrivingInputs>> ArrivingInputs::ForPlan(
    const JobPlan& plan) {
  std::vector<Tensor> arrays;
  for (const ArgPlan& a : plan.args) {
    if (a.resident.has_value()) {
      arrays.emplace_back(DType::kFloat32, Shape{0});  // the workers fetch it
      continue;
    }
    SHARD_ASSIGN_OR_RETURN(Tensor t,
                           Tensor::Create(a.meta.dtype, a.meta.shape));
    arrays.push_back(std::move(t));
  }
  return std::unique_ptr<ArrivingInputs>(
      new ArrivingInputs(std::move(arrays), /*whole=*/false));
}

void ArrivingInputs::Arrived(size_t arg, size_t end) {
  absl::MutexLock lock(&mu_);
  arrived_[arg] = end;
}

void ArrivingInputs::Stop(absl::Status why) {
  absl::MutexLock lock(&mu_);
  if (failed_.ok()) failed_ = std::move(why);
}

absl::Status ArrivingInputs::Receive(JobStream* stream, uint64_t* data_hash) {
  std::vector<size_t> sizes;
  std::vector<ChunkSequencer::Sink> sinks;
  for (size_t i = 0; i < arrays_->size(); ++i) {
    sizes.push_back((*arrays_)[i].num_bytes());
    uint8_t* base = (*arrays_)[i].data();
    sinks.push_back([this, i, base](size_t offset, absl::string_view data) {
      std::memcpy(base + offset, data.data(), data.size());
      Arrived(i, offset + data.size());
    });
  }
  ChunkSequencer sequencer(std::move(sizes), std::move(sinks), "argument");
  absl::Status s = ReadArgumentChunks(stream, data_hash,
                                      [&sequencer](const ReceivedChunk& chunk) {
                                        return sequencer.Accept(chunk);
                                      });
  if (s.ok()) s = sequencer.Finish();
  if (!s.ok() && stream->cancelled()) {
    s = absl::CancelledError(
        absl::StrCat("the client went away while sending its arguments (",
                     s.message(), ")"));
  }
  if (!s.ok()) Stop(s);
  return s;
}

absl::Status ArrivingInputs::Await(size_t arg, size_t end,
                                   absl::Time deadline) const {
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !failed_.ok() || arrived_[arg] >= end;
  };
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  if (arrived_[arg] >= end) return absl::OkStatus();
  if (!failed_.ok()) return failed_;
  return absl::DeadlineExceededError(
      absl::StrCat("argument ", arg, ": ", arrived_[arg], " of its ",
                   (*arrays_)[arg].num_bytes(),
                   " bytes had arrived from the client when the "
                   "job's deadline passed"));
}

void ArrivingInputs::Release() { arrays_.reset(); }

}  // namespace shardmap
