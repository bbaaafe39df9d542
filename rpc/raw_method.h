// Methods called and served over byte buffers, so that their callers and
// handlers can send memory by reference (rpc/chunk_message.h). On the
// wire nothing changes: they read and write the method's own messages,
// serialized.
//
// A server replaces the generated handler of a method of its synchronous
// service in the service's constructor:
//
//   MarkMethodStreamed(MethodIndex("shardmap.v1.Worker", "RunShard"),
//                      RawBidiHandler(this, &WorkerService::RunShard));
//
// A client calls it through a RawBidiMethod.
#ifndef SHARDMAP_RPC_RAW_METHOD_H_
#define SHARDMAP_RPC_RAW_METHOD_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/method_handler.h>

#include <memory>
#include <string>

namespace shardmap {

using RawServerStream =
    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;

// The position of `method` in the generated service `service` (its full
// protobuf name): generated services register their methods in the
// proto's order. Aborts if there is no such method (a programming error).
int MethodIndex(const std::string& service, const std::string& method);

// A handler that runs `method` of `service` on the call's raw stream.
template <typename Service>
grpc::internal::MethodHandler* RawBidiHandler(
    Service* service,
    grpc::Status (Service::*method)(grpc::ServerContext*, RawServerStream*)) {
  return new grpc::internal::BidiStreamingHandler<Service, grpc::ByteBuffer,
                                                  grpc::ByteBuffer>(
      [method](Service* s, grpc::ServerContext* context,
               RawServerStream* stream) {
        return (s->*method)(context, stream);
      },
      service);
}

// The client's side: a bidirectional-streaming method called over byte
// buffers, registered once on its channel as a generated stub's are.
// Thread-safe.
class RawBidiMethod {
 public:
  using Stream = grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;

  // `path` ("/shardmap.v1.Worker/RunShard") must outlive the method (a
  // string literal).
  RawBidiMethod(std::shared_ptr<grpc::Channel> channel, const char* path);

  // Starts a call, as a generated stub's method does.
  std::unique_ptr<Stream> Call(grpc::ClientContext* context) const;

 private:
  const std::shared_ptr<grpc::Channel> channel_;
  const grpc::internal::RpcMethod method_;
};

}  // namespace shardmap

#endif  // SHARDMAP_RPC_RAW_METHOD_H_
