// Keeps gRPC's callback threads alive for the whole test binary
// (rpc/callback_pool.h says why): tests start and drop servers and
// channels all the time, and without it a test could abort when the last
// of them ends on one of the pool's own threads. The pool is kept until
// the process exits, never released in a TearDown: a reactor cancelled at
// a test's end may still be finishing then.
#include <gtest/gtest.h>

#include "rpc/callback_pool.h"

namespace shardmap {
namespace {

class CallbackPoolKeeper final : public ::testing::Environment {
 public:
  void SetUp() override { ASSERT_TRUE(KeepCallbackPool()); }
};

[[maybe_unused]] ::testing::Environment* const kKeeper =
    ::testing::AddGlobalTestEnvironment(new CallbackPoolKeeper);

}  // namespace
}  // namespace shardmap
