#include "server/output_buffers.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace shardmap {

OutputBuffers::OutputBuffers(const JobPlan& plan, uint64_t max_job_bytes)
    : plan_(plan),
      num_devices_(plan.mesh.num_devices()),
      budget_(max_job_bytes > plan.input_bytes()
                  ? max_job_bytes - plan.input_bytes()
                  : 0),
      outputs_(plan.out_specs.size()),
      announced_(plan.mesh.num_devices()) {
  for (size_t o = 0; o < outputs_.size(); ++o) {
    Output& out = outputs_[o];
    out.regions.resize(num_devices_);
    out.placed.resize(num_devices_, 0);
    for (int64_t d = 0; d < num_devices_; ++d) {
      if (plan.IsOutputRepresentative(static_cast<int>(o), d)) {
        out.senders.push_back(d);
      }
    }
  }
}

ChunkSequencer::Sink OutputBuffers::SinkFor(size_t o, int64_t d,
                                            const ArrayMeta& block) {
  absl::MutexLock lock(&mu_);
  Output& out = outputs_[o];
  if (!out.tried) {
    out.tried = true;
    out.block = block;
    // Errors are the assembly's to report, with their full context.
    absl::StatusOr<BlockLayout> layout = BlockLayout::FromBlockShape(
        plan_.mesh, plan_.out_specs[o], block.shape, "out_specs", "output");
    if (!layout.ok()) {
      out.unplaced = true;
      return nullptr;
    }
    absl::StatusOr<Tensor> whole =
        Tensor::Create(block.dtype, layout->global_shape(), budget_);
    if (!whole.ok()) {
      out.unplaced = true;
      return nullptr;
    }
    budget_ -= whole->num_bytes();
    out.layout = *std::move(layout);
    out.whole = std::make_shared<Tensor>(*std::move(whole));
  }
  if (out.whole == nullptr || block.dtype != out.block.dtype ||
      block.shape != out.block.shape) {
    out.unplaced = true;
    return nullptr;
  }
  const BlockRegion& region = out.regions[d].emplace(
      out.layout->global_shape(), out.layout->block_shape(),
      out.layout->BlockOrigin(d), ItemSize(block.dtype));
  uint8_t* base = out.whole->data();
  return [this, o, d, region, base](size_t offset, absl::string_view data) {
    region.CopyIn(reinterpret_cast<const uint8_t*>(data.data()), offset,
                  data.size(), base);
    absl::MutexLock lock(&mu_);
    outputs_[o].placed[d] += data.size();
  };
}

void OutputBuffers::Announce(int64_t d, const DeviceResult& headers) {
  DeviceResult kept;
  kept.outputs = headers.outputs;
  kept.digests = headers.digests;
  kept.blocks.resize(headers.outputs.size());
  absl::MutexLock lock(&mu_);
  if (announced_[d].has_value()) return;
  announced_[d] = std::move(kept);
  ++num_announced_;
}

void OutputBuffers::Finished(int64_t d) {
  absl::MutexLock lock(&mu_);
  ++num_finished_;
}

void OutputBuffers::Stop(absl::Status why) {
  absl::MutexLock lock(&mu_);
  if (stopped_.ok()) stopped_ = std::move(why);
}

bool OutputBuffers::AwaitLocked(const absl::Condition& cond,
                                absl::Time deadline, const Watch& watch) {
  for (;;) {
    const absl::Time now = absl::Now();
    if (now >= deadline) return cond.Eval();
    if (mu_.AwaitWithTimeout(cond, std::min(watch.poll, deadline - now))) {
      return true;
    }
    if (watch.watch) {
      mu_.Unlock();
      watch.watch();
      mu_.Lock();
    }
  }
}

bool OutputBuffers::StreamableLocked() const {
  if (num_announced_ < num_devices_) return false;
  for (size_t o = 0; o < outputs_.size(); ++o) {
    if (!plan_.StoredAs(o).empty()) continue;
    const Output& out = outputs_[o];
    if (out.unplaced || out.whole == nullptr) return false;
    for (int64_t d : out.senders) {
      if (!out.regions[d].has_value()) return false;
    }
  }
  return true;
}

size_t OutputBuffers::ReturnedBytesLocked() const {
  size_t bytes = 0;
  for (size_t o = 0; o < outputs_.size(); ++o) {
    if (plan_.StoredAs(o).empty() && outputs_[o].whole != nullptr) {
      bytes += outputs_[o].whole->num_bytes();
    }
  }
  return bytes;
}

absl::StatusOr<std::optional<std::vector<const DeviceResult*>>>
OutputBuffers::AwaitStreamable(size_t min_bytes, absl::Time deadline,
                               const Watch& watch) {
  // A job that need not stream keeps waiting for its devices to finish,
  // so that its thread wakes once, as it would without streaming.
  auto settled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!stopped_.ok() || num_finished_ == num_devices_) return true;
    if (num_announced_ < num_devices_) return false;
    return !StreamableLocked() || ReturnedBytesLocked() > min_bytes;
  };
  absl::MutexLock lock(&mu_);
  AwaitLocked(absl::Condition(&settled), deadline, watch);
  if (!stopped_.ok()) return stopped_;
  if (num_announced_ < num_devices_ && num_finished_ < num_devices_) {
    return absl::DeadlineExceededError(
        absl::StrCat(num_announced_, " of the job's ", num_devices_,
                     " devices had sent their outputs' headers when the "
                     "job's deadline passed"));
  }
  if (!StreamableLocked() || ReturnedBytesLocked() <= min_bytes) {
    return std::nullopt;
  }
  std::vector<const DeviceResult*> headers;
  for (const std::optional<DeviceResult>& h : announced_)
    headers.push_back(&*h);
  return headers;
}

size_t OutputBuffers::PlacedPrefix(size_t o) const {
  const Output& out = outputs_[o];
  if (out.whole == nullptr) return 0;
  size_t prefix = out.whole->num_bytes();
  for (int64_t d : out.senders) {
    if (!out.regions[d].has_value()) return 0;
    const BlockRegion& region = *out.regions[d];
    if (out.placed[d] >= region.num_bytes()) continue;
    // The first byte of the block not in yet, and so every byte of the
    // whole array from there on, may still be missing.
    prefix = std::min(prefix, region.GlobalEnd(out.placed[d], 1) - 1);
  }
  return prefix;
}

absl::Status OutputBuffers::AwaitPlaced(size_t o, size_t end,
                                        absl::Time deadline,
                                        const Watch& watch) {
  auto in = [this, o, end]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !stopped_.ok() || PlacedPrefix(o) >= end;
  };
  absl::MutexLock lock(&mu_);
  AwaitLocked(absl::Condition(&in), deadline, watch);
  if (!stopped_.ok()) return stopped_;
  const size_t prefix = PlacedPrefix(o);
  if (prefix < end) {
    return absl::DeadlineExceededError(absl::StrCat(
        "output ", o, ": ", prefix, " of its ", outputs_[o].whole->num_bytes(),
        " bytes had come from the workers when the job's "
        "deadline passed"));
  }
  return absl::OkStatus();
}

std::shared_ptr<const Tensor> OutputBuffers::Lend(size_t o) {
  absl::MutexLock lock(&mu_);
  return outputs_[o].whole;
}

std::optional<Tensor> OutputBuffers::Take(size_t o) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Tensor> whole = std::move(outputs_[o].whole);
  if (whole == nullptr) return std::nullopt;
  // Still lent (never, as the runner uses it): gRPC may read the bytes, so
  // they are not handed over.
  if (whole.use_count() > 1) return whole->Clone();
  return std::move(*whole);
}

}  // namespace shardmap
