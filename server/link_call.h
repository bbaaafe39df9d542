// One device call over a worker's job link (server/shard_link.h): a
// ShardChannel whose messages go on the link, tagged with the call's
// number, and whose answers come from the link's reader. Falls back to a
// RunShard stream of its own when ShardLinks says so.
//
// Not thread-safe, except Cancel.
#ifndef SHARDMAP_SERVER_LINK_CALL_H_
#define SHARDMAP_SERVER_LINK_CALL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/stream_mux.h"
#include "server/shard_channel.h"
#include "server/shard_link.h"

namespace shardmap {

class LinkCall final : public ShardChannel {
 public:
  // `fallback` makes the RunShard channel. Unless `wait_for_link`, a call
  // whose link is not up when it starts takes the fallback at once instead
  // of waiting for the link to be made.
  LinkCall(ShardLinks* links, std::string address, absl::Time deadline,
           std::function<std::unique_ptr<ShardChannel>()> fallback,
           bool wait_for_link = true);
  ~LinkCall() override;

  bool Write(const v1::ShardRequest& request) override;
  bool WritesDone() override;
  bool WriteLast(const v1::ShardRequest& request) override;
  bool Read(v1::ShardResponse* response) override;
  bool Readable() override;
  bool Complete() override;
  void SetReadableSignal(ChangeSignal* signal) override;
  absl::Status Finish() override;
  void Cancel() override;

 private:
  // Starts the call on first use; false if it could not start.
  bool Start();
  bool Send(const v1::ShardRequest* request, bool writes_done);
  // Sends the cancel message for the call; the caller set cancel_sent_.
  void SendCancelLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ShardLinks* const links_;
  const std::string address_;
  const absl::Time deadline_;
  const std::function<std::unique_ptr<ShardChannel>()> make_fallback_;
  const bool wait_for_link_;
  std::atomic<bool> cancelled_{false};
  bool started_ = false;
  bool first_message_ = true;
  bool finished_ = false;
  absl::Status start_status_;
  MuxInbox<v1::ShardResponse> inbox_;
  ChangeSignal* signal_ = nullptr;  // Not owned; see SetReadableSignal.

  // The fallback, once Start made one; used by the call's own thread.
  ShardChannel* delegate_ = nullptr;

  absl::Mutex mu_;  // Start against Cancel
  std::shared_ptr<ShardLink> link_ ABSL_GUARDED_BY(mu_);
  uint64_t call_ ABSL_GUARDED_BY(mu_) = 0;
  bool cancel_sent_ ABSL_GUARDED_BY(mu_) = false;
  // The call's first message is on the link: the worker knows the call, and
  // a cancel may go out (one sent earlier would name a call it has not
  // seen, and be dropped).
  bool first_queued_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<ShardChannel> fallback_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_LINK_CALL_H_
