#include "server/function_availability.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "wire/signature.h"

namespace shardmap {
namespace {

std::string Bare(const v1::FunctionSignature& s) {
  v1::FunctionSignature copy = s;
  copy.clear_origin();
  copy.clear_workers();
  return copy.SerializeAsString();
}

std::string Who(const WorkerPool::Worker& w) {
  return absl::StrCat(w.id, " (", w.address, ")");
}

const v1::FunctionSignature* Lookup(const WorkerPool::Worker& w,
                                    const std::string& name) {
  if (w.functions == nullptr) return nullptr;
  auto it = w.functions->find(name);
  return it == w.functions->end() ? nullptr : &it->second;
}

}  // namespace

bool SameSignature(const v1::FunctionSignature& a,
                   const v1::FunctionSignature& b) {
  return Bare(a) == Bare(b);
}

absl::Status CheckFunctionOnWorkers(
    const std::string& name, const std::vector<WorkerPool::Worker>& workers) {
  std::vector<std::string> lacking;
  const v1::FunctionSignature* first = nullptr;
  bool differ = false;
  for (const WorkerPool::Worker& w : workers) {
    const v1::FunctionSignature* sig = Lookup(w, name);
    if (sig == nullptr) {
      lacking.push_back(Who(w));
    } else if (first == nullptr) {
      first = sig;
    } else if (!SameSignature(*first, *sig)) {
      differ = true;
    }
  }
  if (!lacking.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "function '", name, "' is missing on worker",
        lacking.size() == 1 ? " " : "s ", absl::StrJoin(lacking, ", "),
        " of the mesh; start them with the same --plugin libraries"));
  }
  if (!differ) return absl::OkStatus();
  std::vector<std::string> each;
  for (const WorkerPool::Worker& w : workers) {
    const v1::FunctionSignature* sig = Lookup(w, name);
    each.push_back(absl::StrCat(Who(w), " has ", SignatureText(*sig), " [",
                                sig->origin(), "]"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "function '", name, "' has different signatures on the mesh's workers: ",
      absl::StrJoin(each, "; "),
      "; load the same plugin build on every worker"));
}

std::vector<v1::FunctionSignature> FunctionsOfWorkers(
    const std::vector<WorkerPool::Worker>& workers) {
  std::vector<v1::FunctionSignature> out;
  for (const WorkerPool::Worker& w : workers) {
    if (w.functions == nullptr) continue;
    for (const auto& entry : *w.functions) {
      const std::string& name = entry.first;
      const v1::FunctionSignature& sig = entry.second;
      auto same = std::find_if(out.begin(), out.end(), [&](const auto& o) {
        return o.name() == name && SameSignature(o, sig);
      });
      if (same == out.end()) {
        out.push_back(sig);
        out.back().clear_workers();
        same = out.end() - 1;
      }
      same->add_workers(w.address);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.name() < b.name();
  });
  return out;
}

}  // namespace shardmap
