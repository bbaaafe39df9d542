// The keepalive settings every shardmap channel (MakeChannel) and server
// (ConfigureServerBuilder) applies; see rpc/channel.h. Invariant (tested
// by KeepaliveTest in ops_core_test): servers accept pings at least as often as
// idle clients send them, so an idle cluster never gets a too_many_pings GOAWAY
// (docs/RELIABILITY.md, scenario 19).
#ifndef SHARDMAP_CORE_KEEPALIVE_H_
#define SHARDMAP_CORE_KEEPALIVE_H_

namespace shardmap {

struct KeepalivePolicy {
  int client_ping_ms;           // an idle client pings this often
  int client_ping_timeout_ms;   // and drops the connection without an ack
  int server_min_ping_ms;       // the most often a server accepts pings
  int server_max_ping_strikes;  // bad pings before GOAWAY; 0 = never
  // Servers ping their clients too, so a call whose client vanished
  // without a RST (a cut link, a frozen host) is cancelled within
  // server_ping_ms + server_ping_timeout_ms: a worker stops a job whose
  // coordinator it can no longer reach (docs/RELIABILITY.md, scenario 3).
  int server_ping_ms;
  int server_ping_timeout_ms;
};
const KeepalivePolicy& Keepalive();

}  // namespace shardmap

#endif  // SHARDMAP_CORE_KEEPALIVE_H_
