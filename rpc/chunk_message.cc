#include "rpc/chunk_message.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/support/slice.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rpc/slice_reader.h"

namespace shardmap {
namespace {

using google::protobuf::internal::WireFormatLite;

// Appends the tag and length of length-delimited field `field` whose
// contents (`length` bytes) follow.
void AppendFieldHeader(uint32_t field, size_t length, std::string* out) {
  google::protobuf::io::StringOutputStream stream(out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.WriteTag(WireFormatLite::MakeTag(
      field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
  coded.WriteVarint64(length);
}

// Chunks smaller than this are copied even when they could be lent: a
// loan costs a release callback on gRPC's thread, and a caller waiting for
// it (the C++ client) a thread hop, which a small copy does not.
constexpr size_t kLendMinBytes = kInlineChunkBytes;

// What gRPC calls when it drops a lent slice: `owner` is the slice's own
// reference to the chunk's owner.
void ReleaseOwner(void* owner) {
  delete static_cast<std::shared_ptr<const void>*>(owner);
}

// The chunk's bytes as slices: each piece lent when an owner keeps it
// alive and the chunk is not small, else all of them copied into one.
std::vector<grpc::Slice> BytesSlices(const LentChunk& chunk) {
  std::vector<grpc::Slice> slices;
  if (chunk.owner == nullptr || chunk.size() < kLendMinBytes) {
    // One copy, straight into a slice of gRPC's.
    grpc_slice copy = grpc_slice_malloc(chunk.size());
    uint8_t* out = GRPC_SLICE_START_PTR(copy);
    for (absl::string_view piece : chunk.pieces) {
      std::memcpy(out, piece.data(), piece.size());
      out += piece.size();
    }
    slices.emplace_back(copy, grpc::Slice::STEAL_REF);
    return slices;
  }
  for (absl::string_view piece : chunk.pieces) {
    // gRPC never writes through a slice it sends.
    slices.emplace_back(const_cast<char*>(piece.data()), piece.size(),
                        &ReleaseOwner,
                        new std::shared_ptr<const void>(chunk.owner));
  }
  return slices;
}

// A tag protobuf accepts: a field number from 1 to 2^29-1.
bool ValidTag(uint64_t tag) {
  const uint64_t field = tag >> 3;
  return field >= 1 && field <= (uint64_t{1} << 29) - 1;
}

// Reads a length-delimited field's header: its field number and that its
// contents run to the end of the message.
bool ReadLastField(SliceReader& reader, uint32_t* field) {
  uint64_t tag = 0;
  uint64_t length = 0;
  if (!reader.ReadVarint(&tag) || !ValidTag(tag) ||
      (tag & 7) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED ||
      !reader.ReadVarint(&length) || length != reader.remaining()) {
    return false;
  }
  *field = static_cast<uint32_t>(tag >> 3);
  return true;
}

}  // namespace

std::optional<ReceivedChunk> DecodeChunkMessage(const grpc::ByteBuffer& buffer,
                                                uint32_t chunk_field) {
  // Every message of the stream comes here, most of them not chunks: the
  // shared owner is made only for a chunk.
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return std::nullopt;
  SliceReader reader(slices);
  uint32_t field = 0;
  if (!ReadLastField(reader, &field) || field != chunk_field) {
    return std::nullopt;
  }
  ReceivedChunk chunk;
  // The ArrayChunk's fields: index and offset, then the data to the end.
  while (reader.remaining() > 0) {
    uint64_t tag = 0;
    uint64_t value = 0;
    if (!reader.ReadVarint(&tag) || !ValidTag(tag)) return std::nullopt;
    const uint32_t number = static_cast<uint32_t>(tag >> 3);
    const uint32_t wire = static_cast<uint32_t>(tag & 7);
    if (wire == WireFormatLite::WIRETYPE_VARINT &&
        (number == v1::ArrayChunk::kIndexFieldNumber ||
         number == v1::ArrayChunk::kOffsetFieldNumber)) {
      if (!reader.ReadVarint(&value)) return std::nullopt;
      if (number == v1::ArrayChunk::kIndexFieldNumber) {
        chunk.index = static_cast<uint32_t>(value);
      } else {
        chunk.offset = value;
      }
      continue;
    }
    // Anything else but the data, last, is for the full parse.
    uint64_t length = 0;
    if (wire != WireFormatLite::WIRETYPE_LENGTH_DELIMITED ||
        number != v1::ArrayChunk::kDataFieldNumber ||
        !reader.ReadVarint(&length) || length != reader.remaining()) {
      return std::nullopt;
    }
    // Views into the slices themselves (a small slice keeps its bytes
    // inline, in the grpc::Slice the owner holds).
    const size_t begin = reader.position();
    size_t base = 0;
    for (const grpc::Slice& s : slices) {
      const size_t lo = std::max(begin, base);
      const size_t hi = base + s.size();
      if (lo < hi) {
        chunk.pieces.emplace_back(
            reinterpret_cast<const char*>(s.begin()) + (lo - base), hi - lo);
      }
      base = hi;
    }
    break;
  }
  // Moving the vector keeps its elements where they are, so the pieces
  // (even those in a small slice's inline bytes) stay valid.
  chunk.owner = std::make_shared<std::vector<grpc::Slice>>(std::move(slices));
  return chunk;
}

grpc::ByteBuffer EncodeChunkMessage(uint32_t chunk_field,
                                    const LentChunk& chunk) {
  const size_t size = chunk.size();
  v1::ArrayChunk fields;  // all but the bytes, which come last
  fields.set_index(chunk.index);
  fields.set_offset(chunk.offset);
  std::string inner = fields.SerializeAsString();
  if (size > 0) {
    AppendFieldHeader(v1::ArrayChunk::kDataFieldNumber, size, &inner);
  }
  std::string head;
  AppendFieldHeader(chunk_field, inner.size() + size, &head);
  head += inner;
  std::vector<grpc::Slice> slices;
  slices.emplace_back(head);
  if (size > 0) {
    for (grpc::Slice& s : BytesSlices(chunk)) slices.push_back(std::move(s));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

bool WriteChunkMessage(RawWriter* stream, uint32_t chunk_field,
                       const LentChunk& chunk, bool last) {
  grpc::WriteOptions options;
  if (last) options.set_last_message();
  return stream->Write(EncodeChunkMessage(chunk_field, chunk), options);
}

}  // namespace shardmap
