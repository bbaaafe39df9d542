// Reads a protobuf message laid out over several gRPC slices, front to
// back, without copying it: varints, skips, and ranges of the message as
// sub-slices (the parts of a message that are not parsed into strings).
#ifndef SHARDMAP_RPC_SLICE_READER_H_
#define SHARDMAP_RPC_SLICE_READER_H_

#include <grpcpp/support/slice.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardmap {

// Not thread-safe; `slices` must outlive the reader.
class SliceReader {
 public:
  explicit SliceReader(const std::vector<grpc::Slice>& slices)
      : slices_(slices) {
    for (const grpc::Slice& s : slices) total_ += s.size();
  }

  size_t position() const { return position_; }
  size_t remaining() const { return total_ - position_; }

  bool ReadByte(uint8_t* byte) {
    while (slice_ < slices_.size() && in_slice_ == slices_[slice_].size()) {
      ++slice_;
      in_slice_ = 0;
    }
    if (slice_ == slices_.size()) return false;
    *byte = slices_[slice_].begin()[in_slice_++];
    ++position_;
    return true;
  }

  bool ReadVarint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t byte;
      if (!ReadByte(&byte)) return false;
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  bool Skip(uint64_t n) {
    if (n > remaining()) return false;
    position_ += n;
    while (n > 0) {
      const size_t left = slices_[slice_].size() - in_slice_;
      const size_t step = std::min<uint64_t>(n, left);
      in_slice_ += step;
      n -= step;
      if (in_slice_ == slices_[slice_].size() && n > 0) {
        ++slice_;
        in_slice_ = 0;
      }
    }
    return true;
  }

  // Bytes [begin, end) as sub-slices of the message's slices (no copy).
  std::vector<grpc::Slice> Range(size_t begin, size_t end) const {
    std::vector<grpc::Slice> out;
    size_t base = 0;
    for (const grpc::Slice& s : slices_) {
      const size_t lo = std::max(begin, base);
      const size_t hi = std::min(end, base + s.size());
      if (lo < hi) out.push_back(s.sub(lo - base, hi - base));
      base += s.size();
    }
    return out;
  }

 private:
  const std::vector<grpc::Slice>& slices_;
  size_t total_ = 0;
  size_t position_ = 0;
  size_t slice_ = 0;
  size_t in_slice_ = 0;
};

}  // namespace shardmap

#endif  // SHARDMAP_RPC_SLICE_READER_H_
