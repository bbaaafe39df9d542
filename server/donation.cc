#include "server/donation.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"

namespace shardmap {
namespace {

// "argument 2 ('big')".
std::string ArgName(int i, const JobPlan& plan) {
  return absl::StrCat("donate_args: argument ", i, " ('",
                      plan.args[i].resident->name, "')");
}

// Why argument `i` cannot be donated, or empty.
std::string RefusedDonation(const JobPlan& plan, int i) {
  const ResidentArray& a = *plan.args[i].resident;
  for (int j = 0; j < static_cast<int>(plan.args.size()); ++j) {
    if (j != i && plan.args[j].resident.has_value() &&
        plan.args[j].resident->name == a.name) {
      return absl::StrCat("the job also reads it as argument ", j);
    }
  }
  for (const StatePlan& st : plan.states) {
    if (st.array.name == a.name) {
      return absl::StrCat("the job also binds it to state '", st.slot, "'");
    }
  }
  const size_t rank = a.meta.shape.size();
  const PartitionSpec& read =
      plan.args[i].spec.unsplit() ? PartitionSpec() : plan.args[i].spec;
  if (!SameSharding(a.mesh, a.spec, plan.mesh, read, rank)) {
    return absl::StrCat("it is held sharded ", a.spec.ToString(), " over ",
                        a.mesh.ToString(), " and the job reads it as ",
                        read.ToString(), " over ", plan.mesh.ToString(),
                        "; a donated array is read in its own sharding");
  }
  for (size_t o = 0; o < plan.resident_outputs.size(); ++o) {
    if (plan.StoredAs(o) != a.name) continue;
    if (!SameSharding(a.mesh, a.spec, plan.mesh, plan.out_specs[o], rank)) {
      return absl::StrCat("output ", o, " stores it sharded ",
                          plan.out_specs[o].ToString(), " over ",
                          plan.mesh.ToString(), ", but it is held sharded ",
                          a.spec.ToString(), " over ", a.mesh.ToString(),
                          "; a donated array is updated in place, in the "
                          "sharding it has");
    }
    return "";
  }
  return absl::StrCat("no output stores it back (--out @", a.name,
                      "); only an array the job replaces can be donated");
}

}  // namespace

absl::Status PlanDonations(const v1::JobSpec& spec, JobPlan* plan) {
  const int n = static_cast<int>(plan->args.size());
  for (int i : spec.donate_args()) {
    if (i < 0 || i >= n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "donate_args: argument ", i, " is not one of the ", n, " arguments"));
    }
    if (!plan->args[i].resident.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "donate_args: argument ", i,
          " is not a resident array; only a resident argument (@NAME) can "
          "be donated"));
    }
    if (const std::string why = RefusedDonation(*plan, i); !why.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(ArgName(i, *plan), " cannot be donated: ", why));
    }
    plan->args[i].donated = true;
  }
  return absl::OkStatus();
}

bool DonationApplies(const ResidentArray& a,
                     const std::vector<WorkerPool::Worker>& workers) {
  if (a.addresses.size() != workers.size()) return false;
  std::set<std::string> seen;
  for (size_t d = 0; d < workers.size(); ++d) {
    if (a.addresses[d] != workers[d].address ||
        !seen.insert(workers[d].address).second) {
      return false;
    }
  }
  return true;
}

}  // namespace shardmap
