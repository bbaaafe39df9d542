// The peer frame codec against protobuf's own parser: whatever DecodeFrame
// returns must equal what v1::PeerFrame::ParseFromString makes of the same
// bytes, however the bytes are cut into slices.
#include "worker/transport/grpc/peer_frame.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/unit/byte_buffers.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

v1::PeerFrame Header() {
  v1::PeerFrame h;
  h.set_from_address("127.0.0.1:4242");
  h.set_incarnation(77);
  h.set_job_id("job-9");
  h.set_from_device(3);
  h.set_seq(12);
  h.set_step(40000);
  h.set_fingerprint(0xfedcba9876543210ull);
  h.set_fingerprint_text("psum(axes=('x',), float32[1024])");
  h.set_total_bytes(1 << 22);
  h.set_offset(1 << 20);
  return h;
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

absl::Span<const uint8_t> Bytes(const std::string& s) {
  return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(s.data()),
                             s.size());
}

// `bytes` cut into slices at the given sizes, cycling through them.
grpc::ByteBuffer Sliced(const std::string& bytes,
                        const std::vector<size_t>& cuts) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  for (size_t i = 0; at < bytes.size(); ++i) {
    const size_t n = std::min(cuts[i % cuts.size()], bytes.size() - at);
    slices.emplace_back(bytes.data() + at, n);
    at += n;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string PayloadOf(const DecodedFrame& f) {
  std::string out(f.payload.size(), '\0');
  f.payload.CopyTo(reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

DecodedFrame MustDecode(const grpc::ByteBuffer& wire) {
  absl::StatusOr<DecodedFrame> frame = DecodeFrame(wire);
  if (!frame.ok()) {
    ADD_FAILURE() << frame.status();
    return DecodedFrame();
  }
  return *std::move(frame);
}

// Checks `frame` against protobuf's parse of `bytes`.
void ExpectMatchesProtobuf(const DecodedFrame& frame,
                           const std::string& bytes) {
  v1::PeerFrame reference;
  ASSERT_TRUE(reference.ParseFromString(bytes));
  EXPECT_EQ(PayloadOf(frame), reference.data());
  reference.clear_data();
  EXPECT_TRUE(frame.header.data().empty());
  EXPECT_EQ(frame.header.SerializeAsString(), reference.SerializeAsString());
}

TEST(PeerFrameTest, EncodedFrameIsAProtobufPeerFrame) {
  const std::string data = RandomBytes(3 << 20, 1);
  const grpc::ByteBuffer wire = EncodeFrame(Header(), Bytes(data));
  v1::PeerFrame parsed;
  ASSERT_TRUE(parsed.ParseFromString(BufferBytes(wire)));
  EXPECT_EQ(parsed.data(), data);
  EXPECT_EQ(parsed.job_id(), "job-9");
  EXPECT_EQ(parsed.step(), 40000u);
  EXPECT_EQ(parsed.fingerprint(), 0xfedcba9876543210ull);
}

TEST(PeerFrameTest, RoundTripKeepsHeaderAndPayload) {
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{127}, size_t{128}, size_t{1} << 20}) {
    const std::string data = RandomBytes(n, 2);
    const grpc::ByteBuffer wire = EncodeFrame(Header(), Bytes(data));
    DecodedFrame frame = MustDecode(wire);
    EXPECT_EQ(frame.payload.size(), n);
    ExpectMatchesProtobuf(frame, BufferBytes(wire));
  }
}

// The point of the codec: the payload stays in the received slices.
TEST(PeerFrameTest, ThePayloadIsKeptByReferenceNotCopied) {
  const std::string data = RandomBytes(1 << 20, 4);
  v1::PeerFrame h = Header();
  h.set_data(data);
  // Cut into many slices, as a socket delivers them.
  const grpc::ByteBuffer wire = Sliced(h.SerializeAsString(), {65536, 777});
  std::vector<grpc::Slice> wire_slices;
  ASSERT_TRUE(wire.Dump(&wire_slices).ok());
  DecodedFrame frame = MustDecode(wire);
  ASSERT_EQ(PayloadOf(frame), data);
  ASSERT_GT(frame.payload.slices().size(), 1u);
  for (const grpc::Slice& s : frame.payload.slices()) {
    bool inside = false;
    for (const grpc::Slice& w : wire_slices) {
      inside = inside || (s.begin() >= w.begin() && s.end() <= w.end());
    }
    EXPECT_TRUE(inside) << "a payload slice of " << s.size()
                        << " bytes was copied out of the received buffer";
  }
}

TEST(PeerFrameTest, AnySlicingDecodesTheSame) {
  v1::PeerFrame h = Header();
  h.set_data(RandomBytes(70000, 3));
  const std::string bytes = h.SerializeAsString();
  for (const std::vector<size_t>& cuts :
       std::vector<std::vector<size_t>>{{1}, {2, 3}, {7}, {64, 1}, {4096}}) {
    DecodedFrame frame = MustDecode(Sliced(bytes, cuts));
    ExpectMatchesProtobuf(frame, bytes);
  }
}

TEST(PeerFrameTest, FieldsAfterThePayloadAreParsedToo) {
  v1::PeerFrame h = Header();
  h.set_data("payload bytes");
  v1::PeerFrame later;
  later.set_job_id("job-later");
  later.set_seq(99);
  // Protobuf merges concatenated messages: the later fields win.
  const std::string bytes = h.SerializeAsString() + later.SerializeAsString();
  DecodedFrame frame = MustDecode(Sliced(bytes, {5}));
  ExpectMatchesProtobuf(frame, bytes);
  EXPECT_EQ(frame.header.job_id(), "job-later");
}

TEST(PeerFrameTest, TheLastOfRepeatedPayloadsWins) {
  v1::PeerFrame first = Header();
  first.set_data("first payload");
  v1::PeerFrame second;
  second.set_data("second");
  const std::string bytes =
      first.SerializeAsString() + second.SerializeAsString();
  DecodedFrame frame = MustDecode(Sliced(bytes, {3}));
  ExpectMatchesProtobuf(frame, bytes);
  EXPECT_EQ(PayloadOf(frame), "second");
}

TEST(PeerFrameTest, MalformedBytesAreRejected) {
  const std::string good = BufferBytes(EncodeFrame(Header(), Bytes("abcdef")));
  const std::vector<std::string> bad = {
      std::string("\x80", 1),  // a tag cut short
      std::string("\x1b", 1),  // wire type 3 (group)
      std::string("\x5a\x05"
                  "abc",
                  5),                    // payload shorter than said
      good.substr(0, good.size() - 10),  // header cut off
  };
  for (const std::string& b : bad) {
    EXPECT_TRUE(StatusIs(DecodeFrame(Sliced(b, {2})).status(),
                         absl::StatusCode::kInvalidArgument,
                         {"malformed peer frame"}))
        << "bytes of size " << b.size();
  }
}

}  // namespace
}  // namespace shardmap
