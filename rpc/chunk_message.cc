#include "rpc/chunk_message.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/support/slice.h>

#include <memory>
#include <string>
#include <utility>

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

// What gRPC calls when it drops a lent slice: `owner` is the slice's own
// reference to the chunk's owner.
void ReleaseOwner(void* owner) {
  delete static_cast<std::shared_ptr<const void>*>(owner);
}

// The chunk's bytes as a slice: lent when an owner keeps them alive, else
// copied.
grpc::Slice BytesSlice(const LentChunk& chunk) {
  if (chunk.owner == nullptr) {
    return grpc::Slice(chunk.bytes.data(), chunk.bytes.size());
  }
  // gRPC never writes through a slice it sends.
  return grpc::Slice(const_cast<uint8_t*>(chunk.bytes.data()),
                     chunk.bytes.size(), &ReleaseOwner,
                     new std::shared_ptr<const void>(chunk.owner));
}

}  // namespace

grpc::ByteBuffer EncodeChunkMessage(uint32_t chunk_field,
                                    const LentChunk& chunk) {
  v1::ArrayChunk fields;  // all but the bytes, which come last
  fields.set_index(chunk.index);
  fields.set_offset(chunk.offset);
  std::string inner = fields.SerializeAsString();
  if (!chunk.bytes.empty()) {
    AppendFieldHeader(v1::ArrayChunk::kDataFieldNumber, chunk.bytes.size(),
                      &inner);
  }
  std::string head;
  AppendFieldHeader(chunk_field, inner.size() + chunk.bytes.size(), &head);
  head += inner;
  if (chunk.bytes.empty()) {
    grpc::Slice only(head);
    return grpc::ByteBuffer(&only, 1);
  }
  grpc::Slice slices[2] = {grpc::Slice(head), BytesSlice(chunk)};
  return grpc::ByteBuffer(slices, 2);
}

bool WriteChunkMessage(RawWriter* stream, uint32_t chunk_field,
                       const LentChunk& chunk, bool last) {
  grpc::WriteOptions options;
  if (last) options.set_last_message();
  return stream->Write(EncodeChunkMessage(chunk_field, chunk), options);
}

}  // namespace shardmap
