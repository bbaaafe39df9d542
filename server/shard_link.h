// The coordinator's long-lived stream to one worker (Worker.RunShards),
// over which the device calls of small jobs run side by side instead of
// each opening a RunShard stream: a job then costs each worker a few
// messages on a stream that is already open, not a new call. gRPC glue on
// the callback API: nothing waits on the stream but the callers of a call.
//
// ShardLink is one such stream; ShardLinks keeps one link per worker
// address, made on first use and replaced when it fails or nears its own
// deadline; a device call on a link is a LinkCall (server/link_call.h).
//
// The link's first message from the worker (call 0) says it serves links;
// a worker that predates them answers UNIMPLEMENTED, and ShardLinks then
// tells its callers to use RunShard for a minute.
//
// Thread-safe.
#ifndef SHARDMAP_SERVER_SHARD_LINK_H_
#define SHARDMAP_SERVER_SHARD_LINK_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "rpc/channel_cache.h"
#include "rpc/stream_mux.h"
#include "server/shard_channel.h"
#include "shardmap/v1/worker.grpc.pb.h"

namespace shardmap {

class ShardLink final : public grpc::ClientBidiReactor<v1::ShardLinkRequest,
                                                       v1::ShardLinkResponse> {
 public:
  // Starts the stream; it lives until `expires`. `ended` is called once
  // with the stream's final status. The link keeps itself alive until the
  // stream is done.
  static std::shared_ptr<ShardLink> Start(
      v1::Worker::Stub* stub, absl::Time expires,
      std::function<void(const absl::Status&)> ended);

  // Waits until the worker has said it serves the link (true), or until
  // the link failed, `deadline` passed or `cancelled` turned true (false).
  bool WaitReady(absl::Time deadline, const std::atomic<bool>& cancelled);
  // Whether the worker has said it serves the link, and it has not failed.
  bool ready();
  // Why the link failed (OK while it has not).
  absl::Status status();
  bool failed();
  absl::Time expires() const { return expires_; }

  // Registers a call whose responses go to `inbox` (until EndCall).
  uint64_t NewCall(MuxInbox<v1::ShardResponse>* inbox);
  void EndCall(uint64_t call);
  // Queues a message (see MuxOutbox::Send); false once the link failed.
  bool Send(v1::ShardLinkRequest message, absl::Time deadline, bool urgent);
  // No new calls: the stream is cancelled once its calls have ended.
  void Retire();
  // Cancels the stream; the link fails.
  void Cancel() { context_.TryCancel(); }
  // Waits up to `deadline` for the stream to be done.
  bool WaitDone(absl::Time deadline) {
    return done_.WaitForNotificationWithDeadline(deadline);
  }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override { outbox_.WriteDone(ok); }
  void OnDone(const grpc::Status& status) override;

 private:
  ShardLink(absl::Time expires, std::function<void(const absl::Status&)> ended);

  const absl::Time expires_;
  const std::function<void(const absl::Status&)> ended_;
  grpc::ClientContext context_;
  MuxOutbox<v1::ShardLinkRequest> outbox_;
  v1::ShardLinkResponse response_;   // the read in flight
  std::shared_ptr<ShardLink> self_;  // until OnDone
  absl::Notification done_;

  absl::Mutex mu_;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool retired_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  uint64_t next_call_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, MuxInbox<v1::ShardResponse>*> calls_
      ABSL_GUARDED_BY(mu_);
};

class ShardLinks {
 public:
  // Not owned; outlives the links.
  explicit ShardLinks(ChannelCache* channels) : channels_(channels) {}
  // Cancels the links and waits (briefly) for their streams to end.
  ~ShardLinks();

  // A ready link to `address` for a call that ends by `deadline`; null
  // when the call should use RunShard instead (the worker serves no
  // links, the deadline is further than a link lives, or, unless `wait`,
  // the link is not up yet: it is then made for later calls). Errors: the
  // link's, when it could not be made ready (UNAVAILABLE,
  // DEADLINE_EXCEEDED), CANCELLED if `cancelled` turned true meanwhile.
  absl::StatusOr<std::shared_ptr<ShardLink>> Acquire(
      const std::string& address, absl::Time deadline,
      const std::atomic<bool>& cancelled, bool wait = true);
  // Whether Acquire would hand out a link to `address` for a call that
  // ends by `deadline` at once, without making one or waiting for one to
  // be ready.
  bool Ready(const std::string& address, absl::Time deadline);
  // Starts making the link Acquire would hand out for `deadline`, if there
  // is none, without waiting for it: for the calls after this one.
  void Prepare(const std::string& address, absl::Time deadline);

 private:
  // The link to `address` for a call that ends by `deadline`, started now
  // if there is none (or it failed, or ends too soon; the old one then
  // goes to `retired`, for the caller to retire once it released mu_);
  // null when calls to `address` are to use RunShard.
  std::shared_ptr<ShardLink> FindOrStartLocked(
      const std::string& address, absl::Time deadline,
      std::shared_ptr<ShardLink>* retired) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `address`'s worker serves no links (`link` failed UNIMPLEMENTED): its
  // calls use RunShard for a while, and the link is forgotten.
  void MarkLegacyLocked(const std::string& address,
                        const std::shared_ptr<ShardLink>& link)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ChannelCache* const channels_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<ShardLink>> links_ ABSL_GUARDED_BY(mu_);
  // Addresses whose worker answered UNIMPLEMENTED, until when.
  std::map<std::string, absl::Time> legacy_ ABSL_GUARDED_BY(mu_);
  // Every link started, to cancel and wait for at destruction.
  std::vector<std::shared_ptr<ShardLink>> started_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_SHARD_LINK_H_
