// Tests of server/replication_check and the planner's refusal of
// --no-check-rep for stored copies: plans made by PlanJob over a
// ResidentIndex of hand-made arrays, and per-device digests made up for
// each case (equal numbers stand for equal copies).
#include "server/replication_check.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/unit/status_matchers.h"
#include "wire/signature.h"

namespace shardmap {
namespace {

absl::StatusOr<v1::FunctionSignature> Lookup(const std::string& name) {
  static const auto* catalog = [] {
    auto* m = new std::map<std::string, v1::FunctionSignature>;
    for (const Signature& s : {
             Signature("identity", 1),
             Signature("accumulate", 1).State("buffer", /*write=*/true),
             Signature("peek", 1).State("table", /*write=*/false),
         }) {
      (*m)[s.proto().name()] = s.proto();
    }
    return m;
  }();
  auto it = catalog->find(name);
  if (it == catalog->end()) return absl::NotFoundError(name);
  return it->second;
}

v1::PartitionSpec Spec(const char* text) {
  return SpecToProto(*PartitionSpec::Parse(text));
}

class ReplicationCheckTest : public ::testing::Test {
 protected:
  ReplicationCheckTest() {
    // S: float64[4] replicated over x=4, as a P() state is.
    ResidentArray s;
    s.name = "S";
    s.meta = ArrayMeta{DType::kFloat64, {4}};
    s.mesh = *Mesh::Parse("x=4");
    for (int d = 0; d < 4; ++d) {
      s.worker_ids.push_back(absl::StrCat("w", d));
      s.addresses.push_back(absl::StrCat("127.0.0.1:", 1000 + d));
    }
    s.version = index_.NextVersion();
    index_.Commit(s);
  }

  // A job over x=4 taking a float64[16] split by P('x') (a [4] block per
  // device), or the resident S as it is stored.
  v1::JobSpec Job(const std::string& fn, const char* out_spec,
                  bool resident_arg = false) {
    v1::JobSpec job;
    job.set_function(fn);
    *job.mutable_mesh() = MeshToProto(*Mesh::Parse("x=4"));
    *job.add_args() = HeaderToProto(DType::kFloat64, {resident_arg ? 4 : 16});
    *job.add_in_specs() = Spec(resident_arg ? "P()" : "P('x')");
    if (resident_arg) job.add_resident_args("S");
    *job.add_out_specs() = Spec(out_spec);
    if (fn != "identity") {
      v1::StateBinding* b = job.add_states();
      b->set_slot(fn == "accumulate" ? "buffer" : "table");
      b->set_name("S");
    }
    return job;
  }

  JobPlan Plan(const v1::JobSpec& job) {
    absl::StatusOr<JobPlan> plan = PlanJob(job, Lookup, &index_);
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan.ok() ? *std::move(plan) : JobPlan();
  }

  // Four devices whose digests agree everywhere.
  static std::vector<DeviceDigests> Agreeing(const JobPlan& plan) {
    DeviceDigests d;
    d.outputs.assign(plan.out_specs.size(), 11);
    d.written_states.assign(plan.states.size(), 22);
    d.read_states.assign(plan.states.size(), 33);
    d.resident_args.assign(plan.args.size(), 44);
    return std::vector<DeviceDigests>(4, d);
  }

  static absl::Status Check(const JobPlan& plan,
                            const std::vector<DeviceDigests>& digests) {
    std::vector<const DeviceDigests*> p;
    for (const DeviceDigests& d : digests) p.push_back(&d);
    return CheckReplication(plan, p);
  }

  ResidentIndex index_{[](const std::string&) { return true; }};
};

TEST_F(ReplicationCheckTest, AgreeingCopiesPass) {
  for (const char* fn : {"identity", "accumulate", "peek"}) {
    const JobPlan plan = Plan(Job(fn, "P()"));
    EXPECT_TRUE(Check(plan, Agreeing(plan)).ok()) << fn;
  }
}

TEST_F(ReplicationCheckTest, DivergentWrittenStateNamesSlotAxisAndDevices) {
  const JobPlan plan = Plan(Job("accumulate", "P('x')"));
  std::vector<DeviceDigests> d = Agreeing(plan);
  for (int i = 0; i < 4; ++i) d[i].written_states[0] = 100 + i;
  EXPECT_TRUE(StatusIs(
      Check(plan, d), absl::StatusCode::kInvalidArgument,
      {"state slot 'buffer' (array 'S') is written with spec P()",
       "differ along mesh axis 'x'", "device 0 (mesh coordinates (0,))",
       "device 1 (mesh coordinates (1,)) disagree", "Nothing was stored"}));
  // Even with --no-check-rep (which the planner refuses for such a job).
  JobPlan unchecked = plan;
  unchecked.check_rep = false;
  EXPECT_EQ(Check(unchecked, d).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ReplicationCheckTest, DivergentStoredOutputNamesTheArray) {
  v1::JobSpec job = Job("identity", "P()");
  job.add_resident_outputs("D");
  const JobPlan plan = Plan(job);
  std::vector<DeviceDigests> d = Agreeing(plan);
  d[2].outputs[0] = 7;
  const absl::Status s = Check(plan, d);
  EXPECT_TRUE(StatusIs(
      s, absl::StatusCode::kInvalidArgument,
      {"identity output 0 is stored as 'D' with spec P()", "mesh axis 'x'",
       "device 0", "device 2", "Nothing was stored"}));
  EXPECT_FALSE(absl::StrContains(s.message(), "--no-check-rep")) << s;
}

TEST_F(ReplicationCheckTest, ReturnedOutputsAreCheckedOnlyWithCheckRep) {
  JobPlan plan = Plan(Job("identity", "P()"));
  std::vector<DeviceDigests> d = Agreeing(plan);
  d[3].outputs[0] = 7;
  EXPECT_TRUE(StatusIs(Check(plan, d), absl::StatusCode::kInvalidArgument,
                       {"out_specs is P() which implies that identity output "
                        "0 is replicated across mesh axis 'x'",
                        "device 0", "device 3", "--no-check-rep"}));
  plan.check_rep = false;  // JAX's check_rep=False: the first copy returns
  EXPECT_TRUE(Check(plan, d).ok());
}

// The outputs whose digests the devices must send are exactly those whose
// copies the check compares: a digest left out (0) never fails the check.
TEST_F(ReplicationCheckTest, ComparesOutputIsWhatTheCheckLooksAt) {
  v1::JobSpec stored = Job("identity", "P()");
  stored.add_resident_outputs("D");
  JobPlan unchecked = Plan(Job("identity", "P()"));
  unchecked.check_rep = false;
  const struct {
    const char* what;
    JobPlan plan;
    bool compared;
  } cases[] = {
      {"sharded over every axis", Plan(Job("identity", "P('x')")), false},
      {"replicated, returned", Plan(Job("identity", "P()")), true},
      {"replicated, stored", Plan(stored), true},
      {"replicated, returned, check_rep off", unchecked, false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ComparesOutput(c.plan, 0), c.compared) << c.what;
    std::vector<DeviceDigests> d = Agreeing(c.plan);
    d[1].outputs[0] = 0;  // left out
    EXPECT_EQ(Check(c.plan, d).ok(), !c.compared) << c.what;
  }
}

TEST_F(ReplicationCheckTest, DivergentReadOfAStoredArrayIsDataLoss) {
  // A get: identity of S in its own layout.
  const JobPlan plan = Plan(Job("identity", "P()", /*resident_arg=*/true));
  std::vector<DeviceDigests> d = Agreeing(plan);
  d[1].resident_args[0] = 1;
  d[1].outputs[0] = 1;  // what it read is what it returns
  const absl::Status s =
      CheckReplication(plan, {&d[0], &d[1], &d[2], &d[3]}, [](int64_t dev) {
        return absl::StrCat("device ", dev, " (worker w", dev, ")");
      });
  EXPECT_TRUE(StatusIs(
      s, absl::StatusCode::kDataLoss,
      {"resident array 'S'", "holds copies that differ",
       "device 0 (worker w0) and device 1 (worker w1)", "mesh axis 'x'"}));
  // In its own words: nothing of the job that reads it.
  for (const char* word : {"identity", "out_specs", "--no-check-rep"}) {
    EXPECT_FALSE(absl::StrContains(s.message(), word)) << word << ": " << s;
  }
  // A state read the same way says the same.
  const JobPlan peek = Plan(Job("peek", "P('x')"));
  d = Agreeing(peek);
  d[3].read_states[0] = 1;
  EXPECT_TRUE(StatusIs(Check(peek, d), absl::StatusCode::kDataLoss,
                       {"resident array 'S'", "device 0", "device 3"}));
}

TEST_F(ReplicationCheckTest, ComparesOnlyTheCopiesOfOneBlock) {
  // Written as P('x'): every device its own block, nothing to compare.
  v1::JobSpec job = Job("accumulate", "P('x')");
  *job.mutable_states(0)->mutable_spec() = Spec("P('x')");
  // S is [4] over x=4: one element per device.
  const JobPlan plan = Plan(job);
  std::vector<DeviceDigests> d = Agreeing(plan);
  for (int i = 0; i < 4; ++i) d[i].written_states[0] = 100 + i;
  EXPECT_TRUE(Check(plan, d).ok());
}

TEST_F(ReplicationCheckTest, DigestsFromProtoNeedOneOfEach) {
  const JobPlan plan = Plan(Job("accumulate", "P('x')"));
  v1::ShardOutputs got;
  *got.add_outputs() = HeaderToProto(DType::kFloat64, {4});
  got.add_digests(1);
  got.add_state_digests(2);
  got.add_read_state_digests(3);
  got.add_resident_arg_digests(0);
  absl::StatusOr<DeviceDigests> d = DigestsFromProto(plan, got);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->outputs, std::vector<uint64_t>{1});
  EXPECT_EQ(d->written_states, std::vector<uint64_t>{2});
  EXPECT_EQ(d->read_states, std::vector<uint64_t>{3});
  got.clear_state_digests();  // a worker that does not send them
  EXPECT_EQ(DigestsFromProto(plan, got).status().code(),
            absl::StatusCode::kInternal);
}

TEST_F(ReplicationCheckTest, PlannerRefusesNoCheckRepForStoredCopies) {
  v1::JobSpec job = Job("accumulate", "P('x')");
  job.set_no_check_rep(true);
  EXPECT_TRUE(StatusIs(PlanJob(job, Lookup, &index_).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"--no-check-rep", "state slot 'buffer' (array 'S')",
                        "P()", "mesh axis 'x'", "--state-spec buffer="}));
  job = Job("identity", "P()");
  job.add_resident_outputs("D");
  job.set_no_check_rep(true);
  EXPECT_TRUE(StatusIs(PlanJob(job, Lookup, &index_).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"--no-check-rep", "identity output 0 stored as 'D'",
                        "P()", "mesh axis 'x'"}));
  // Still allowed: a returned output, a stored output split over every
  // axis, a state only read.
  for (v1::JobSpec ok : {Job("identity", "P()"), Job("identity", "P('x')"),
                         Job("peek", "P()")}) {
    if (ok.out_specs(0).entries_size() > 0) ok.add_resident_outputs("E");
    ok.set_no_check_rep(true);
    EXPECT_TRUE(PlanJob(ok, Lookup, &index_).ok()) << ok.DebugString();
  }
}

}  // namespace
}  // namespace shardmap
