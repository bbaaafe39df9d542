#include "program/eval_value.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_util.h"

namespace shardmap {
namespace program {

std::string Where(const Program& program, int index) {
  const Instr& in = program.instrs[index];
  std::string s = absl::StrCat("instruction ", index, " (", OpName(in.op));
  if (in.pos.line > 0) {
    absl::StrAppend(&s, " at line ", in.pos.line, ", column ", in.pos.column);
  }
  return s + ")";
}

absl::Status Budget::Reserve(uint64_t bytes) {
  if (bytes > max_bytes_ || live_ > max_bytes_ - bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        Where(program_, index_), " needs ", bytes, " bytes with ", live_,
        " bytes of intermediate values alive, over the program's limit of ",
        max_bytes_, " bytes per device"));
  }
  live_ += bytes;
  if (live_ > peak_) peak_ = live_;
  return absl::OkStatus();
}

absl::StatusOr<Value> Budget::Allocate(const ValueType& type) {
  Value v;
  v.shape = type.shape;
  v.elem = type.elem;
  const uint64_t bytes = v.bytes();
  SHARD_RETURN_IF_ERROR(Reserve(bytes));
  absl::StatusOr<Tensor> t = Tensor::Create(StorageOf(type.elem), v.shape);
  if (!t.ok()) {
    Release(bytes);
    return Annotate(t.status(), Where(program_, index_));
  }
  v.storage = std::make_shared<Tensor>(*std::move(t));
  v.counted = true;
  return v;
}

void Free(Budget& budget, Value& v) {
  if (v.storage != nullptr && v.counted && v.storage.use_count() == 1) {
    budget.Release(v.storage->num_bytes());
  }
  v.storage.reset();
}

}  // namespace program
}  // namespace shardmap
