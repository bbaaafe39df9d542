// Tests of server/program_store and server/function_catalog: registered
// programs kept in a data directory and read back as a restarted
// coordinator does, damaged files refused, names checked, built-in names
// protected, inline programs resolved.
#include "server/program_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "server/function_catalog.h"
#include "server/worker_pool.h"
#include "tests/unit/status_matchers.h"
#include "wire/signature.h"

namespace shardmap {
namespace {

class ProgramStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/shardmap-programs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::remove((dir_ + "/programs.json").c_str());
    rmdir(dir_.c_str());
  }
  void WriteFile(const std::string& text) {
    std::ofstream(dir_ + "/programs.json") << text;
  }
  std::string dir_;
};

TEST_F(ProgramStoreTest, KeepsProgramsAcrossARestart) {
  {
    auto store = ProgramStore::Open(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_TRUE((*store)->persistent());
    auto f = (*store)->Register("mlp", "lambda x, w: x @ w", false);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->arity(), 2);
    ASSERT_TRUE(
        (*store)->Register("neg", "def neg(x):\n  return -x\n", false).ok());
    ASSERT_TRUE((*store)->Unregister("neg").ok());
  }
  auto reopened = ProgramStore::Open(dir_);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  auto f = (*reopened)->Find("mlp");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->program(), "lambda x, w: x @ w");
  EXPECT_EQ(f->arity(), 2);
  EXPECT_FALSE((*reopened)->Find("neg").has_value());
  EXPECT_EQ((*reopened)->List().size(), 1u);
}

TEST_F(ProgramStoreTest, RefusesADamagedFileNamingIt) {
  for (const char* text :
       {"{", "[]", "{\"format\": 2, \"programs\": {}}",
        "{\"format\": 1, \"programs\": {\"a\": 3}}",
        "{\"format\": 1, \"programs\": {\"../x\": \"lambda x: x\"}}",
        "{\"format\": 1, \"programs\": {\"bad\": \"lambda x: x +\"}}"}) {
    WriteFile(text);
    auto store = ProgramStore::Open(dir_);
    ASSERT_FALSE(store.ok()) << text;
    EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << text;
    EXPECT_TRUE(absl::StrContains(store.status().message(), "programs.json"))
        << store.status();
  }
}

TEST_F(ProgramStoreTest, ChecksNamesSourcesAndReplacement) {
  auto store = ProgramStore::Open("");
  ASSERT_TRUE(store.ok());
  EXPECT_FALSE((*store)->persistent());
  for (const char* name : {"", "../x", "a/b", "1abc", "has space"}) {
    EXPECT_EQ((*store)->Register(name, "lambda x: x", false).status().code(),
              absl::StatusCode::kInvalidArgument)
        << name;
  }
  auto broken = (*store)->Register("broken", "lambda x: x +", false);
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(broken.status().message(), "line 1"))
      << broken.status();
  ASSERT_TRUE((*store)->Register("f", "lambda x: x", false).ok());
  EXPECT_EQ((*store)->Register("f", "lambda x: -x", false).status().code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE((*store)->Register("f", "lambda x: -x", true).ok());
  EXPECT_EQ((*store)->Find("f")->program(), "lambda x: -x");
  EXPECT_EQ((*store)->Unregister("g").code(), absl::StatusCode::kNotFound);
}

TEST_F(ProgramStoreTest, CatalogResolvesProgramsBesideTheWorkersFunctions) {
  WorkerPool::Options options;
  options.clock = [now = absl::Now()] { return now; };
  WorkerPool pool(options);
  ASSERT_TRUE(
      pool.Register("127.0.0.1:1", 1, {Signature("identity", 1).proto()}).ok());
  auto store = ProgramStore::Open("");
  ASSERT_TRUE(store.ok());
  FunctionCatalog catalog(&pool, store->get());
  EXPECT_EQ(catalog.Register("identity", "lambda x: x", false).status().code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(catalog.Register("twice", "lambda x: x * 2", false).ok());
  v1::JobSpec spec;
  spec.set_function("twice");
  auto f = catalog.Resolve(spec);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->program(), "lambda x: x * 2");
  spec.set_function("identity");
  EXPECT_TRUE(catalog.Resolve(spec)->program().empty());
  spec.set_program("lambda a, b: a + b");
  EXPECT_EQ(catalog.Resolve(spec).status().code(),
            absl::StatusCode::kInvalidArgument);  // both
  spec.clear_function();
  auto inline_program = catalog.Resolve(spec);
  ASSERT_TRUE(inline_program.ok()) << inline_program.status();
  EXPECT_EQ(inline_program->arity(), 2);
  spec.clear_program();
  spec.set_function("nope");
  auto missing = catalog.Resolve(spec);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "twice"))
      << missing.status();
  EXPECT_EQ(catalog.List().size(), 2u);
  // A program kept from before that a worker's function now shadows.
  ASSERT_TRUE((*store)->Register("relu", "lambda x: x", false).ok());
  ASSERT_TRUE(pool.Register("127.0.0.1:2", 2,
                            {Signature("identity", 1).proto(),
                             Signature("relu", 1).proto()})
                  .ok());
  spec.set_function("relu");
  auto clash = catalog.Resolve(spec);
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(clash.status().message(), "unregister"))
      << clash.status();
}

}  // namespace
}  // namespace shardmap
