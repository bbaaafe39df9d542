#include "worker/transport/grpc/peer_frame.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "rpc/slice_reader.h"

namespace shardmap {
namespace {

constexpr uint32_t kDataField = 11;
constexpr uint32_t kWireVarint = 0;
constexpr uint32_t kWireFixed64 = 1;
constexpr uint32_t kWireLengthDelimited = 2;
constexpr uint32_t kWireFixed32 = 5;

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

std::string Flatten(const std::vector<grpc::Slice>& slices, size_t end) {
  std::string out;
  out.reserve(end);
  for (const grpc::Slice& s : slices) {
    if (out.size() >= end) break;
    const size_t n = std::min(s.size(), end - out.size());
    out.append(reinterpret_cast<const char*>(s.begin()), n);
  }
  return out;
}

absl::Status Malformed(const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed peer frame: ", why));
}

// The general path: the whole frame parsed by protobuf, the payload copied
// out of it.
absl::StatusOr<DecodedFrame> ParseWhole(const std::vector<grpc::Slice>& slices,
                                        size_t total) {
  DecodedFrame frame;
  if (!frame.header.ParseFromString(Flatten(slices, total))) {
    return Malformed("not a shardmap.v1.PeerFrame");
  }
  std::string data = std::move(*frame.header.mutable_data());
  frame.header.clear_data();
  std::vector<grpc::Slice> payload;
  if (!data.empty()) payload.emplace_back(data);
  frame.payload = PeerPayload(std::move(payload));
  return frame;
}

}  // namespace

PeerPayload::PeerPayload(std::vector<grpc::Slice> slices)
    : slices_(std::move(slices)) {
  for (const grpc::Slice& s : slices_) size_ += s.size();
}

void PeerPayload::CopyTo(uint8_t* out) const {
  for (const grpc::Slice& s : slices_) {
    std::memcpy(out, s.begin(), s.size());
    out += s.size();
  }
}

grpc::ByteBuffer EncodeFrame(const v1::PeerFrame& header,
                             absl::Span<const uint8_t> payload) {
  return EncodeFrame(header, payload.empty()
                                 ? grpc::Slice()
                                 : grpc::Slice(payload.data(), payload.size()));
}

grpc::ByteBuffer EncodeFrame(const v1::PeerFrame& header, grpc::Slice payload) {
  std::string head = header.SerializeAsString();
  if (payload.size() == 0) {
    grpc::Slice only(head);
    return grpc::ByteBuffer(&only, 1);
  }
  AppendVarint((kDataField << 3) | kWireLengthDelimited, &head);
  AppendVarint(payload.size(), &head);
  grpc::Slice slices[2] = {grpc::Slice(head), std::move(payload)};
  return grpc::ByteBuffer(slices, 2);
}

absl::StatusOr<DecodedFrame> DecodeFrame(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return Malformed("unreadable buffer");
  SliceReader reader(slices);
  const size_t total = reader.remaining();
  // Walk the fields until the payload; everything before it is header.
  while (reader.remaining() > 0) {
    const size_t field_start = reader.position();
    uint64_t tag;
    if (!reader.ReadVarint(&tag)) return Malformed("truncated field tag");
    const uint32_t field = static_cast<uint32_t>(tag >> 3);
    const uint32_t wire = static_cast<uint32_t>(tag & 7);
    uint64_t value;
    bool ok = true;
    switch (wire) {
      case kWireVarint:
        ok = reader.ReadVarint(&value);
        break;
      case kWireFixed64:
        ok = reader.Skip(8);
        break;
      case kWireFixed32:
        ok = reader.Skip(4);
        break;
      case kWireLengthDelimited: {
        ok = reader.ReadVarint(&value);
        if (!ok) break;
        if (field == kDataField && value == reader.remaining()) {
          DecodedFrame frame;
          if (!frame.header.ParseFromString(Flatten(slices, field_start))) {
            return Malformed("bad header fields");
          }
          // A protobuf parser keeps the last of repeated `data` fields.
          frame.header.clear_data();
          frame.payload = PeerPayload(reader.Range(reader.position(), total));
          return frame;
        }
        ok = reader.Skip(value);
        break;
      }
      default:
        return Malformed(
            absl::StrCat("field ", field, " has wire type ", wire));
    }
    if (!ok) return Malformed(absl::StrCat("field ", field, " is truncated"));
  }
  // No payload last: parse it all.
  return ParseWhole(slices, total);
}

}  // namespace shardmap
