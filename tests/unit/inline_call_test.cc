// Tests of worker/inline_call: which job link calls run on the thread that
// read them. Only a call that can wait for nothing does: a local built-in
// on small arguments that came inside its header, reading and writing no
// resident array, one-phase, and whose turn has come. Also the parts it
// rests on: FunctionDef::local and JobSequencer::TurnIsNow.
#include "worker/inline_call.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "wire/chunking.h"
#include "worker/functions/function_registry.h"

namespace shardmap {
namespace {

constexpr char kWorker[] = "w-1";

class InlineCallTest : public ::testing::Test {
 protected:
  InlineCallTest() : executor_(&registry_) {
    RegisterBuiltins(registry_);
    RegisterCollectiveBuiltins(registry_);
    RegisterStateBuiltins(registry_);
    // Ticket 0 has run: ticket 1's turn has come.
    EXPECT_TRUE(Enter(0).ok());
    sequencer_.Leave(kWorker, 0);
  }

  absl::Status Enter(uint64_t ticket) {
    return sequencer_.Enter(kWorker, ticket, absl::Now() + absl::Seconds(10),
                            [] { return false; });
  }

  // `function` on two float32[8] arguments (64 bytes, inside the
  // header), ticket 1.
  static v1::ShardRequest Call(const std::string& function) {
    v1::ShardRequest r;
    v1::ShardJob* job = r.mutable_job();
    job->set_function(function);
    job->set_worker_id(kWorker);
    job->set_ticket(1);
    job->set_inline_outputs(true);
    for (int i = 0; i < 2; ++i) {
      v1::ArrayHeader* arg = job->add_args();
      arg->set_dtype(v1::DTYPE_FLOAT32);
      arg->add_shape(8);
    }
    job->add_chunks()->set_data(std::string(64, 'x'));
    return r;
  }

  bool Inline(const v1::ShardRequest& r) {
    return RunsInline(r, executor_, &sequencer_);
  }

  FunctionRegistry registry_;
  ShardExecutor executor_;
  JobSequencer sequencer_;
};

TEST_F(InlineCallTest, OnlyTheWorkersOwnLocalFunctionsAreLocal) {
  for (const char* name :
       {"identity", "add", "mul", "scale", "relu", "matmul", "sum"}) {
    EXPECT_TRUE(executor_.IsLocal(name)) << name;
  }
  for (const char* name : {"psum", "all_gather", "ppermute", "mlp_tp",
                           "axis_index", "linear_sgd_step", "accumulate"}) {
    EXPECT_FALSE(executor_.IsLocal(name)) << name;
  }
  EXPECT_FALSE(executor_.IsLocal("no_such_function"));
  // A function registered without saying so (as every plugin is) is not.
  FunctionRegistry other;
  sdk::Function plain("plain", 1);
  plain.Kernel(
      [](sdk::Context&, const std::vector<sdk::TensorView>& args)
          -> absl::StatusOr<std::vector<sdk::TensorView>> { return args; });
  ASSERT_TRUE(other.Register(std::move(plain), "plugin /x.so").ok());
  EXPECT_FALSE((*other.Find("plain"))->local);
}

TEST_F(InlineCallTest, ASmallLocalCallWhoseTurnHasComeRunsInline) {
  EXPECT_TRUE(Inline(Call("identity")));
  EXPECT_TRUE(Inline(Call("matmul")));
  // Arguments of exactly the inline limit still do.
  v1::ShardRequest at_limit = Call("identity");
  at_limit.mutable_job()->mutable_chunks(0)->set_data(
      std::string(kInlineChunkBytes, 'x'));
  EXPECT_TRUE(Inline(at_limit));
  // Without a sequencer, or a job without a worker id, jobs run as they
  // arrive: no turn to wait for.
  EXPECT_TRUE(RunsInline(Call("identity"), executor_, nullptr));
  v1::ShardRequest unordered = Call("identity");
  unordered.mutable_job()->clear_worker_id();
  EXPECT_TRUE(Inline(unordered));
}

TEST_F(InlineCallTest, ACallThatMayWaitOrComputeLongDoesNot) {
  EXPECT_FALSE(Inline(v1::ShardRequest()));       // no job header
  EXPECT_FALSE(Inline(Call("psum")));             // collectives
  EXPECT_FALSE(Inline(Call("linear_sgd_step")));  // states
  EXPECT_FALSE(Inline(Call("no_such_function")));
  v1::ShardRequest program = Call("identity");
  program.mutable_job()->set_program("lambda x: x");
  EXPECT_FALSE(Inline(program));
  v1::ShardRequest big = Call("identity");
  big.mutable_job()->add_chunks()->set_data("y");  // one byte over the limit
  big.mutable_job()->mutable_chunks(0)->set_data(
      std::string(kInlineChunkBytes, 'x'));
  EXPECT_FALSE(Inline(big));
  // A coordinator that does not take outputs inside the answer: its
  // header would leave on its own, and might wait for room on the link.
  v1::ShardRequest outputs_apart = Call("identity");
  outputs_apart.mutable_job()->set_inline_outputs(false);
  EXPECT_FALSE(Inline(outputs_apart));
  v1::ShardRequest two_phase = Call("identity");
  two_phase.mutable_job()->set_two_phase(true);
  EXPECT_FALSE(Inline(two_phase));
  v1::ShardRequest resident_arg = Call("identity");
  resident_arg.mutable_job()->add_resident_args()->set_name("w");
  EXPECT_FALSE(Inline(resident_arg));
  v1::ShardRequest stored = Call("identity");
  stored.mutable_job()->add_resident_outputs()->set_name("y");
  EXPECT_FALSE(Inline(stored));
  v1::ShardRequest reshard = Call("identity");
  reshard.mutable_job()->add_state_out_specs();
  EXPECT_FALSE(Inline(reshard));
  // Empty entries name nothing: still inline.
  v1::ShardRequest unnamed = Call("identity");
  unnamed.mutable_job()->add_resident_args();
  unnamed.mutable_job()->add_resident_outputs();
  EXPECT_TRUE(Inline(unnamed));
}

TEST_F(InlineCallTest, ACallWhoseOutputsMightNotFitInItsAnswerDoesNot) {
  // Two arguments of 8192 elements: an outer product (matmul of a column
  // and a row, or add with broadcasting) could give 64M elements.
  v1::ShardRequest outer = Call("matmul");
  outer.mutable_job()->mutable_args(0)->set_shape(0, 8192);
  outer.mutable_job()->mutable_args(1)->set_shape(0, 8192);
  EXPECT_FALSE(Inline(outer));
  // One argument of 8192 elements: at most 64 KiB of float64 out.
  v1::ShardRequest one = Call("identity");
  one.mutable_job()->mutable_args()->RemoveLast();
  one.mutable_job()->mutable_args(0)->set_shape(0, 8192);
  EXPECT_TRUE(Inline(one));
  one.mutable_job()->mutable_args(0)->set_shape(0, 8193);
  EXPECT_FALSE(Inline(one));
  // 64 x 128 elements: the product counts every dimension.
  one.mutable_job()->mutable_args(0)->set_shape(0, 64);
  one.mutable_job()->mutable_args(0)->add_shape(129);
  EXPECT_FALSE(Inline(one));
  // Counting stops before it overflows.
  one.mutable_job()->mutable_args(0)->set_shape(0, int64_t{1} << 40);
  one.mutable_job()->mutable_args(0)->set_shape(1, int64_t{1} << 40);
  EXPECT_FALSE(Inline(one));
  // An empty argument counts as one element.
  v1::ShardRequest empty = Call("add");
  empty.mutable_job()->mutable_args(0)->set_shape(0, 0);
  EXPECT_TRUE(Inline(empty));
}

TEST_F(InlineCallTest, ACallWhoseTurnHasNotComeDoesNot) {
  v1::ShardRequest later = Call("identity");
  later.mutable_job()->set_ticket(2);  // ticket 1 has not run
  EXPECT_FALSE(Inline(later));
  // Ticket 1 running: neither it again nor the next one.
  ASSERT_TRUE(Enter(1).ok());
  EXPECT_FALSE(Inline(Call("identity")));
  EXPECT_FALSE(Inline(later));
  sequencer_.Leave(kWorker, 1);
  EXPECT_TRUE(Inline(later));
  // A worker id the sequencer has not seen (the worker registered again):
  // its order starts when its first job enters, on a pooled thread.
  v1::ShardRequest other_id = Call("identity");
  other_id.mutable_job()->set_worker_id("w-2");
  other_id.mutable_job()->set_ticket(0);
  EXPECT_FALSE(Inline(other_id));
}

}  // namespace
}  // namespace shardmap
