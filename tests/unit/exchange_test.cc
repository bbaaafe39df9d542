// Exchange (worker/collectives/exchange.h) against a recording fake
// transport: the pieces, their steps and sizes, the order of sends and
// receives (at most `window` pieces sent ahead), and errors.
#include "worker/collectives/exchange.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

// Speaks for device 0 of 4. Records "S<peer>:<step>:<bytes>" per Send and
// "R<peer>:<step>:<bytes>" per Recv; a Recv copies bytes out of `incoming`
// (what the peer sent as one buffer, cut at the offsets of the piece size
// under test), or fails with `recv_error` at step `fail_step`.
class RecordingTransport : public PeerTransport {
 public:
  int64_t device() const override { return 0; }
  int64_t num_devices() const override { return 4; }
  absl::Status Send(int64_t to, const PeerMessage& m,
                    absl::Span<const uint8_t> data) override {
    log.push_back(absl::StrCat("S", to, ":", m.step, ":", data.size()));
    sent[m.step].assign(data.begin(), data.end());
    return absl::OkStatus();
  }
  absl::Status Recv(int64_t from, const PeerMessage& m,
                    absl::Span<uint8_t> out) override {
    log.push_back(absl::StrCat("R", from, ":", m.step, ":", out.size()));
    if (m.step == fail_step) return absl::UnavailableError("peer lost");
    const size_t at = (m.step - first_step) * piece;
    for (size_t i = 0; i < out.size(); ++i) out[i] = incoming[at + i];
    return absl::OkStatus();
  }

  std::vector<std::string> log;
  std::map<uint32_t, std::vector<uint8_t>> sent;
  std::vector<uint8_t> incoming;
  uint32_t first_step = 0;
  size_t piece = 0;
  uint32_t fail_step = UINT32_MAX;
};

CollectiveTag Tag() { return CollectiveTag{7, {1, "ppermute(axes=('x',))"}}; }

std::vector<uint8_t> Iota(size_t n, uint8_t from) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(from + i);
  return v;
}

TEST(ExchangeTest, SendsAtMostWindowPiecesAheadAndReassembles) {
  RecordingTransport t;
  t.first_step = 5;
  t.piece = 4;
  t.incoming = Iota(10, 100);
  const std::vector<uint8_t> send = Iota(10, 0);
  std::vector<uint8_t> recv(10, 0);
  ExchangeOptions options{/*piece_bytes=*/4, /*window=*/2};
  EXPECT_EQ(ExchangePieces(10, options), 3u);
  ASSERT_TRUE(Exchange(t, Tag(), 5, /*to=*/1, send, /*from=*/3,
                       absl::MakeSpan(recv), options)
                  .ok());
  EXPECT_EQ(t.log, (std::vector<std::string>{"S1:5:4", "S1:6:4", "R3:5:4",
                                             "S1:7:2", "R3:6:4", "R3:7:2"}));
  EXPECT_EQ(recv, t.incoming);
  std::vector<uint8_t> joined;
  for (const auto& [step, bytes] : t.sent) {
    joined.insert(joined.end(), bytes.begin(), bytes.end());
  }
  EXPECT_EQ(joined, send);
}

TEST(ExchangeTest, OneSidedAndEmptyExchanges) {
  const std::vector<uint8_t> send = Iota(5, 0);
  std::vector<uint8_t> recv(5, 0);
  ExchangeOptions options{/*piece_bytes=*/2, /*window=*/1};
  {
    RecordingTransport t;
    ASSERT_TRUE(
        Exchange(t, Tag(), 0, 2, send, -1, absl::MakeSpan(recv), options).ok());
    EXPECT_EQ(t.log, (std::vector<std::string>{"S2:0:2", "S2:1:2", "S2:2:1"}));
  }
  {
    RecordingTransport t;
    t.piece = 2;
    t.incoming = Iota(5, 50);
    ASSERT_TRUE(
        Exchange(t, Tag(), 0, -1, send, 1, absl::MakeSpan(recv), options).ok());
    EXPECT_EQ(t.log, (std::vector<std::string>{"R1:0:2", "R1:1:2", "R1:2:1"}));
    EXPECT_EQ(recv, t.incoming);
  }
  {
    // An empty block is still one (empty) message each way, so the
    // receiver does not wait for something that never comes.
    RecordingTransport t;
    std::vector<uint8_t> none;
    ASSERT_TRUE(
        Exchange(t, Tag(), 0, 1, {}, 1, absl::MakeSpan(none), options).ok());
    EXPECT_EQ(t.log, (std::vector<std::string>{"S1:0:0", "R1:0:0"}));
  }
}

TEST(ExchangeTest, StopsAtTheFirstTransportError) {
  RecordingTransport t;
  t.piece = 1;
  t.incoming = Iota(4, 0);
  t.fail_step = 1;
  const std::vector<uint8_t> send = Iota(4, 0);
  std::vector<uint8_t> recv(4, 0);
  const absl::Status s =
      Exchange(t, Tag(), 0, 1, send, 1, absl::MakeSpan(recv), {1, 1});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(t.log,
            (std::vector<std::string>{"S1:0:1", "R1:0:1", "S1:1:1", "R1:1:1"}));
}

}  // namespace
}  // namespace shardmap
