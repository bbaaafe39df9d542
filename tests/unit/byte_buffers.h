// Test helper shared by the tests of byte-buffer messages: a buffer's
// bytes as one string, whatever slices it is made of, and a buffer over a
// string's bytes (copied).
#ifndef SHARDMAP_TESTS_UNIT_BYTE_BUFFERS_H_
#define SHARDMAP_TESTS_UNIT_BYTE_BUFFERS_H_

#include <grpcpp/support/byte_buffer.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shardmap {

// The whole buffer's bytes, as a peer receives them.
inline std::string BufferBytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string all;
  for (const grpc::Slice& s : slices) {
    all.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return all;
}

inline grpc::ByteBuffer BufferOf(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_BYTE_BUFFERS_H_
