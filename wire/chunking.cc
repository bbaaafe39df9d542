#include "wire/chunking.h"

#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

namespace shardmap {

bool SendChunks(uint32_t index, size_t total,
                const std::function<void(size_t, size_t, uint8_t*)>& fill,
                const std::function<bool(v1::ArrayChunk&&)>& write,
                const ChunkReady& ready) {
  for (size_t offset = 0; offset < total; offset += kChunkBytes) {
    const size_t length = std::min(kChunkBytes, total - offset);
    if (ready && !ready(offset, length)) return false;
    v1::ArrayChunk chunk;
    chunk.set_index(index);
    chunk.set_offset(offset);
    std::string* data = chunk.mutable_data();
    data->resize(length);
    fill(offset, length, reinterpret_cast<uint8_t*>(data->data()));
    if (!write(std::move(chunk))) return false;
  }
  return true;
}

ChunkView ChunkView::Own(v1::ArrayChunk&& chunk) {
  auto bytes = std::make_shared<std::string>(std::move(*chunk.mutable_data()));
  ChunkView own;
  own.index = chunk.index();
  own.offset = chunk.offset();
  if (!bytes->empty()) own.pieces.emplace_back(*bytes);
  own.owner = std::move(bytes);
  return own;
}

size_t ChunkView::size() const {
  size_t size = 0;
  for (absl::string_view piece : pieces) size += piece.size();
  return size;
}

v1::ArrayChunk ChunkView::Copy() const {
  v1::ArrayChunk chunk;
  chunk.set_index(index);
  chunk.set_offset(offset);
  std::string* data = chunk.mutable_data();
  data->reserve(size());
  for (absl::string_view piece : pieces)
    data->append(piece.data(), piece.size());
  return chunk;
}

bool LendBytesChunks(uint32_t index, const uint8_t* data, size_t size,
                     const std::shared_ptr<const void>& owner,
                     const std::function<bool(LentChunk&&)>& lend,
                     const ChunkReady& ready) {
  for (size_t offset = 0; offset < size; offset += kChunkBytes) {
    const size_t length = std::min(kChunkBytes, size - offset);
    if (ready && !ready(offset, length)) return false;
    LentChunk chunk;
    chunk.index = index;
    chunk.offset = offset;
    chunk.pieces.emplace_back(reinterpret_cast<const char*>(data) + offset,
                              length);
    chunk.owner = owner;
    if (!lend(std::move(chunk))) return false;
  }
  return true;
}

bool SendBytesChunks(uint32_t index, const uint8_t* data, size_t size,
                     const std::function<bool(v1::ArrayChunk&&)>& write,
                     const ChunkReady& ready) {
  return LendBytesChunks(
      index, data, size, nullptr,
      [&write](LentChunk&& chunk) { return write(chunk.Copy()); }, ready);
}

bool SendTensorChunks(uint32_t index, const Tensor& tensor,
                      const std::function<bool(v1::ArrayChunk&&)>& write) {
  return SendBytesChunks(index, tensor.data(), tensor.num_bytes(), write);
}

void AppendTensorChunks(
    uint32_t index, const Tensor& tensor,
    google::protobuf::RepeatedPtrField<v1::ArrayChunk>* chunks) {
  SendTensorChunks(index, tensor, [chunks](v1::ArrayChunk&& chunk) {
    *chunks->Add() = std::move(chunk);
    return true;
  });
}

ChunkSequencer::ChunkSequencer(std::vector<size_t> sizes,
                               std::vector<Sink> sinks, std::string what)
    : sizes_(std::move(sizes)),
      sinks_(std::move(sinks)),
      what_(std::move(what)) {
  while (current_ < sizes_.size() && sizes_[current_] == 0) ++current_;
}

ChunkSequencer::Sink ChunkSequencer::Into(Tensor& tensor) {
  uint8_t* base = tensor.data();
  return [base](size_t offset, absl::string_view data) {
    std::memcpy(base + offset, data.data(), data.size());
  };
}

ChunkSequencer ChunkSequencer::ForTensors(std::vector<Tensor>& tensors,
                                          std::string what) {
  std::vector<size_t> sizes;
  std::vector<Sink> sinks;
  for (Tensor& t : tensors) {
    sizes.push_back(t.num_bytes());
    sinks.push_back(Into(t));
  }
  return ChunkSequencer(std::move(sizes), std::move(sinks), std::move(what));
}

absl::Status ChunkSequencer::AcceptAll(
    const google::protobuf::RepeatedPtrField<v1::ArrayChunk>& chunks) {
  for (const v1::ArrayChunk& chunk : chunks) {
    if (absl::Status s = Accept(chunk); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ChunkSequencer::Accept(const v1::ArrayChunk& chunk) {
  ReceivedChunk view;  // the message keeps the bytes
  view.index = chunk.index();
  view.offset = chunk.offset();
  if (!chunk.data().empty()) view.pieces.emplace_back(chunk.data());
  return Accept(view);
}

absl::Status ChunkSequencer::Accept(const ReceivedChunk& chunk) {
  if (chunk.index >= sizes_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk for ", what_, " ", chunk.index, ", but there are ",
                     sizes_.size(), " ", what_, "s"));
  }
  if (chunk.index != current_ || chunk.offset != received_) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk out of order: got ", what_, " ", chunk.index,
                     " at offset ", chunk.offset, ", expected ", what_, " ",
                     current_, " at offset ", received_));
  }
  const size_t size = sizes_[current_];
  if (chunk.size() > size - received_) {
    return absl::InvalidArgumentError(absl::StrCat(
        what_, " ", current_, " has ", size, " bytes, but chunks carry more"));
  }
  for (absl::string_view piece : chunk.pieces) {
    sinks_[current_](received_, piece);
    received_ += piece.size();
  }
  if (received_ == size) {
    ++current_;
    received_ = 0;
    while (current_ < sizes_.size() && sizes_[current_] == 0) ++current_;
  }
  return absl::OkStatus();
}

absl::Status ChunkSequencer::Finish() const {
  if (current_ < sizes_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream ended early: ", what_, " ", current_, " has ",
                     received_, " of its ", sizes_[current_], " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace shardmap
