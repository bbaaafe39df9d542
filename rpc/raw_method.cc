#include "rpc/raw_method.h"

#include <google/protobuf/descriptor.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace shardmap {

int MethodIndex(const std::string& service, const std::string& method) {
  const google::protobuf::ServiceDescriptor* s =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          service);
  const google::protobuf::MethodDescriptor* m =
      s == nullptr ? nullptr : s->FindMethodByName(method);
  if (m == nullptr) {
    std::fprintf(stderr, "no method %s in service %s\n", method.c_str(),
                 service.c_str());
    std::abort();
  }
  return m->index();
}

RawBidiMethod::RawBidiMethod(std::shared_ptr<grpc::Channel> channel,
                             const char* path)
    : channel_(std::move(channel)),
      method_(path, grpc::internal::RpcMethod::BIDI_STREAMING, channel_) {}

std::unique_ptr<RawBidiMethod::Stream> RawBidiMethod::Call(
    grpc::ClientContext* context) const {
  return std::unique_ptr<Stream>(
      grpc::internal::ClientReaderWriterFactory<
          grpc::ByteBuffer, grpc::ByteBuffer>::Create(channel_.get(), method_,
                                                      context));
}

}  // namespace shardmap
