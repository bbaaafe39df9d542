#include "worker/collectives/exchange.h"

#include <algorithm>

#include "core/status_util.h"

namespace shardmap {

uint32_t ExchangePieces(size_t bytes, const ExchangeOptions& options) {
  const size_t piece = std::max<size_t>(1, options.piece_bytes);
  return static_cast<uint32_t>(
      std::max<size_t>(1, (bytes + piece - 1) / piece));
}

absl::Status Exchange(PeerTransport& transport, const CollectiveTag& tag,
                      uint32_t first_step, int64_t to,
                      absl::Span<const uint8_t> send, int64_t from,
                      absl::Span<uint8_t> recv,
                      const ExchangeOptions& options) {
  const size_t piece = std::max<size_t>(1, options.piece_bytes);
  const uint32_t to_send = to < 0 ? 0 : ExchangePieces(send.size(), options);
  const uint32_t to_recv = from < 0 ? 0 : ExchangePieces(recv.size(), options);
  const uint32_t window = static_cast<uint32_t>(std::max(1, options.window));
  auto message = [&](uint32_t i) {
    return PeerMessage{tag.seq, first_step + i, &tag.fingerprint};
  };
  auto part = [piece](auto span, uint32_t i) {
    const size_t begin = std::min(span.size(), size_t{i} * piece);
    return span.subspan(begin, std::min(piece, span.size() - begin));
  };
  // `send` stays as it is until Settle: the pieces are lent.
  auto run = [&]() -> absl::Status {
    uint32_t sent = 0;
    for (uint32_t got = 0; got < to_recv; ++got) {
      for (; sent < to_send && sent < got + window; ++sent) {
        SHARD_RETURN_IF_ERROR(
            transport.Lend(to, message(sent), part(send, sent)));
      }
      SHARD_RETURN_IF_ERROR(
          transport.Recv(from, message(got), part(recv, got)));
    }
    for (; sent < to_send; ++sent) {
      SHARD_RETURN_IF_ERROR(
          transport.Lend(to, message(sent), part(send, sent)));
    }
    return absl::OkStatus();
  };
  return RunAndSettle(transport, run);
}

}  // namespace shardmap
