#include "program/eval_fusion.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "core/status_util.h"
#include "program/eval_elementwise.h"
#include "program/eval_layout.h"
#include "program/types.h"

namespace shardmap {
namespace program {
namespace {

// Where one operand of a member reads its tile from.
struct Source {
  enum Kind { kMember, kInPlace, kTile } kind = kTile;
  int slot = 0;                   // kMember: member slot; kTile: tile slot
  const uint8_t* base = nullptr;  // kInPlace: the operand's data
  size_t elem_bytes = 4;
};

// An operand from outside the group that needs a tile of its own.
struct TiledInput {
  StridedView view;
  bool scalar = false;  // filled once
  int slot = 0;
};

bool SameShapeReusable(const Value& v, const ValueType& root, int operand,
                       int root_index, const std::vector<int>& last_use) {
  return last_use[operand] == root_index && v.shape == root.shape &&
         StorageOf(v.elem) == StorageOf(root.elem) &&
         v.storage.use_count() == 1 && v.storage->num_bytes() == v.bytes();
}

}  // namespace

FusionPlan PlanFusion(const Program& program, bool fuse) {
  const int n = static_cast<int>(program.instrs.size());
  FusionPlan plan;
  plan.runs_at.resize(n);
  plan.members.resize(n);
  plan.folded_transpose.assign(n, false);
  std::vector<std::vector<int>> users(n);
  for (int i = 0; i < n; ++i) {
    for (int o : program.instrs[i].operands) users[o].push_back(i);
  }
  std::vector<bool> is_output(n, false);
  for (int o : program.outputs) is_output[o] = true;
  for (int i = n - 1; i >= 0; --i) {
    const Instr& in = program.instrs[i];
    plan.runs_at[i] = i;
    if (!fuse || is_output[i] || users[i].empty()) continue;
    const bool one_user = std::all_of(users[i].begin(), users[i].end(),
                                      [&](int u) { return u == users[i][0]; });
    if (in.op == OpCode::kTranspose &&
        in.attrs.perm == std::vector<int64_t>{1, 0} && one_user &&
        program.instrs[users[i][0]].op == OpCode::kMatMul) {
      plan.runs_at[i] = users[i][0];
      plan.folded_transpose[i] = true;
      continue;
    }
    if (!IsElementwise(in.op)) continue;
    const int root = plan.runs_at[users[i][0]];
    const bool fusable =
        std::all_of(users[i].begin(), users[i].end(), [&](int u) {
          return IsElementwise(program.instrs[u].op) && plan.runs_at[u] == root;
        });
    if (fusable && program.instrs[root].type.shape == in.type.shape) {
      plan.runs_at[i] = root;
    }
  }
  for (int i = 0; i < n; ++i) {
    if (IsElementwise(program.instrs[i].op)) {
      plan.members[plan.runs_at[i]].push_back(i);
    }
  }
  return plan;
}

absl::StatusOr<Value> RunGroup(const Program& program,
                               const std::vector<int>& members,
                               const std::vector<Value>& values,
                               const std::vector<int>& last_use,
                               Budget& budget) {
  const int root = members.back();
  const Instr& root_instr = program.instrs[root];
  const Shape& shape = root_instr.type.shape;
  const int64_t total = NumElements(shape);

  // The result: an operand's buffer that dies here, or a new one.
  Value result;
  for (int m : members) {
    for (int o : program.instrs[m].operands) {
      if (result.storage == nullptr && values[o].storage != nullptr &&
          SameShapeReusable(values[o], root_instr.type, o, root, last_use)) {
        result = values[o];
        result.elem = root_instr.type.elem;
      }
    }
  }
  if (result.storage == nullptr) {
    SHARD_ASSIGN_OR_RETURN(result, budget.Allocate(root_instr.type));
  }

  // Sources of every member's operands; member slots first, then tiles of
  // operands from outside that are not read in place.
  std::map<int, int> member_slot;
  for (size_t k = 0; k < members.size(); ++k) member_slot[members[k]] = k;
  std::map<int, int> tile_of;  // outside operand -> index in `tiled`
  std::vector<TiledInput> tiled;
  std::vector<std::vector<Source>> sources(members.size());
  std::vector<std::vector<ElemType>> elems(members.size());
  const int num_slots = static_cast<int>(members.size());
  for (size_t k = 0; k < members.size(); ++k) {
    for (int o : program.instrs[members[k]].operands) {
      Source s;
      s.elem_bytes = ElemBytes(program.instrs[o].type.elem);
      elems[k].push_back(program.instrs[o].type.elem);
      auto it = member_slot.find(o);
      if (it != member_slot.end()) {
        s.kind = Source::kMember;
        s.slot = it->second;
      } else if (values[o].shape == shape) {
        s.kind = Source::kInPlace;
        s.base = values[o].data();
      } else {
        auto [t, fresh] = tile_of.emplace(o, static_cast<int>(tiled.size()));
        if (fresh) {
          TiledInput in;
          in.view.src = values[o].data();
          in.view.elem_bytes = s.elem_bytes;
          in.view.shape = shape;
          in.view.strides = BroadcastStrides(values[o].shape, shape);
          in.scalar = values[o].count() == 1;
          in.slot = num_slots + static_cast<int>(tiled.size());
          tiled.push_back(std::move(in));
        }
        s.kind = Source::kTile;
        s.slot = tiled[t->second].slot;
      }
      sources[k].push_back(s);
    }
  }

  // Scratch: one tile of 8-byte elements per slot, counted while it lives.
  const size_t slots = members.size() + tiled.size();
  // Small groups take tiles of their own size.
  const int64_t tile_len = std::max<int64_t>(1, std::min(kTileElements, total));
  const uint64_t scratch_bytes = slots * tile_len * sizeof(uint64_t);
  SHARD_RETURN_IF_ERROR(budget.Reserve(scratch_bytes));
  std::unique_ptr<uint64_t[]> scratch(new uint64_t[slots * tile_len]);
  auto tile = [&](int slot) {
    return reinterpret_cast<uint8_t*>(scratch.get() + slot * tile_len);
  };
  for (const TiledInput& t : tiled) {
    if (t.scalar) {
      for (int64_t j = 0; j < tile_len; ++j) {
        std::memcpy(tile(t.slot) + j * t.view.elem_bytes, t.view.src,
                    t.view.elem_bytes);
      }
    }
  }

  const size_t out_bytes = ElemBytes(root_instr.type.elem);
  std::vector<const void*> ins;
  for (int64_t start = 0; start < total; start += tile_len) {
    const int64_t n = std::min(tile_len, total - start);
    for (const TiledInput& t : tiled) {
      if (!t.scalar) Gather(t.view, start, n, tile(t.slot));
    }
    for (size_t k = 0; k < members.size(); ++k) {
      ins.clear();
      for (const Source& s : sources[k]) {
        ins.push_back(s.kind == Source::kInPlace ? s.base + start * s.elem_bytes
                                                 : tile(s.slot));
      }
      void* out = k + 1 == members.size()
                      ? result.mutable_data() + start * out_bytes
                      : tile(static_cast<int>(k));
      ApplyElementwise(program.instrs[members[k]], elems[k].data(), n,
                       ins.data(), out);
    }
  }
  budget.Release(scratch_bytes);
  return result;
}

}  // namespace program
}  // namespace shardmap
