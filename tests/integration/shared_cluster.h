// A gtest fixture whose tests share one in-process cluster of 4 workers
// (TestCluster), started before a suite's first test and stopped after its
// last. Suites derive from it: class MyTest : public SharedClusterTest {};
#ifndef SHARDMAP_TESTS_INTEGRATION_SHARED_CLUSTER_H_
#define SHARDMAP_TESTS_INTEGRATION_SHARED_CLUSTER_H_

#include <gtest/gtest.h>

#include <memory>

#include "client/shard_client.h"
#include "tests/integration/test_cluster.h"

namespace shardmap {

class SharedClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new TestCluster({4}); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  std::unique_ptr<ShardClient> Client() {
    return *ShardClient::Create({cluster_->address()});
  }
  static inline TestCluster* cluster_ = nullptr;
};

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_INTEGRATION_SHARED_CLUSTER_H_
