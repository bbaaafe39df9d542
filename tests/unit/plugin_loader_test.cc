// Tests of worker/plugin_loader: the paths from --plugin and
// $SHARDMAP_PLUGINS, the checks on a plugin's entry points (with fake
// entry points), and real libraries from tests/plugins/ (built into
// build/plugins/): each way a plugin is refused, and a good one whose
// functions then run through the worker's executor.
#include "worker/plugin_loader.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shardmap/sdk.h"
#include "tests/unit/status_matchers.h"
#include "worker/functions/function_registry.h"
#include "worker/shard_executor.h"

namespace shardmap {
namespace {

using sdk::Context;
using sdk::TensorView;

std::string PluginPath(const std::string& name) {
  const char* bin = std::getenv("SHARDMAP_BIN_DIR");
  return std::string(bin != nullptr ? bin : "build/bin") + "/../plugins/lib" +
         name + ".so";
}

absl::StatusOr<std::vector<TensorView>> Echo(Context&,
                                             const std::vector<TensorView>& a) {
  return a;
}

// Fake entry points: what each test's registration adds.
std::vector<sdk::Function>* g_functions = nullptr;
int g_abi = SHARDMAP_SDK_ABI_VERSION;
bool g_throw = false;

int FakeAbi() { return g_abi; }
const char* FakeSdk() { return "7.7.7"; }
void FakeRegister(void* r) {
  if (g_throw) throw std::runtime_error("boom in registration");
  for (const sdk::Function& f : *g_functions) {
    static_cast<sdk::Registrar*>(r)->Add(f);
  }
}

class RegisterPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_functions = &functions_;
    g_abi = SHARDMAP_SDK_ABI_VERSION;
    g_throw = false;
    RegisterBuiltins(registry_);
  }
  absl::Status Register() {
    return RegisterPlugin("/p/libfake.so", {FakeAbi, FakeSdk, FakeRegister},
                          registry_);
  }
  std::vector<sdk::Function> functions_;
  FunctionRegistry registry_;
};

TEST(PluginPathsTest, FlagsThenEnvironmentSkippingEmptyParts) {
  EXPECT_EQ(PluginPaths({"/a.so"}, "/b.so::/c.so:"),
            (std::vector<std::string>{"/a.so", "/b.so", "/c.so"}));
  EXPECT_EQ(PluginPaths({}, nullptr), std::vector<std::string>{});
}

TEST_F(RegisterPluginTest, RegistersWithItsOrigin) {
  functions_.push_back(sdk::Function("fake_fn", 1).Kernel(Echo));
  ASSERT_TRUE(Register().ok());
  auto def = registry_.Find("fake_fn");
  ASSERT_TRUE(def.ok());
  EXPECT_EQ((*def)->signature.origin(), "plugin /p/libfake.so");
  EXPECT_EQ((*registry_.Find("add"))->signature.origin(), "builtin");
}

TEST_F(RegisterPluginTest, AbiMismatchNamesBothVersions) {
  g_abi = SHARDMAP_SDK_ABI_VERSION + 1;
  functions_.push_back(sdk::Function("fake_fn", 1).Kernel(Echo));
  EXPECT_TRUE(StatusIs(
      Register(), absl::StatusCode::kFailedPrecondition,
      {"/p/libfake.so",
       absl::StrCat("ABI version ", SHARDMAP_SDK_ABI_VERSION + 1), "7.7.7",
       absl::StrCat("ABI version ", SHARDMAP_SDK_ABI_VERSION)}));
  EXPECT_FALSE(registry_.Find("fake_fn").ok());
}

TEST_F(RegisterPluginTest, ThrowingRegistrationIsRefused) {
  g_throw = true;
  EXPECT_TRUE(StatusIs(Register(), absl::StatusCode::kFailedPrecondition,
                       {"/p/libfake.so", "boom in registration"}));
}

TEST_F(RegisterPluginTest, NoFunctionsIsRefused) {
  EXPECT_TRUE(StatusIs(Register(), absl::StatusCode::kFailedPrecondition,
                       {"/p/libfake.so", "registers no functions"}));
}

TEST_F(RegisterPluginTest, BuiltinNameIsRefused) {
  functions_.push_back(sdk::Function("matmul", 2).Kernel(Echo));
  EXPECT_TRUE(StatusIs(Register(), absl::StatusCode::kFailedPrecondition,
                       {"/p/libfake.so", "'matmul'", "builtin"}));
}

TEST_F(RegisterPluginTest, MalformedSignaturesAreRefused) {
  struct Case {
    sdk::Function fn;
    const char* problem;
  };
  std::vector<Case> cases = {
      {sdk::Function("9lives", 1).Kernel(Echo), "identifier"},
      {sdk::Function("f", -1).Kernel(Echo), "arity"},
      {sdk::Function("f", 1, 0).Kernel(Echo), "output"},
      {sdk::Function("f", 1), "no Kernel()"},
      {sdk::Function("f", 1).Kwarg("a", "bogus").Kernel(Echo),
       "unknown type 'bogus'"},
      {sdk::Function("f", 1)
           .Kwarg("a", "number")
           .Kwarg("a", "number")
           .Kernel(Echo),
       "declared twice"},
      {sdk::Function("f", 1).Kwarg("a", "number", "{oops", "").Kernel(Echo),
       "not JSON"},
      {sdk::Function("f", 1).Kwarg("a", "integer", "1.5", "").Kernel(Echo),
       "not of its type"},
      {sdk::Function("f", 1).ShapeProgram("lambda x: x * {b}").Kernel(Echo),
       "{b}"},
      {sdk::Function("f", 1).Collective("psum_all").Kernel(Echo), "psum_all"},
      {sdk::Function("f", 1).State("s", true).State("s", false).Kernel(Echo),
       "state slot 's'"},
  };
  for (Case& c : cases) {
    functions_ = {c.fn};
    FunctionRegistry registry;
    EXPECT_TRUE(StatusIs(
        RegisterPlugin("/p/libfake.so", {FakeAbi, FakeSdk, FakeRegister},
                       registry),
        absl::StatusCode::kFailedPrecondition, {"/p/libfake.so", c.problem}))
        << c.problem;
  }
}

TEST(LoadPluginTest, MissingFile) {
  FunctionRegistry registry;
  EXPECT_TRUE(StatusIs(LoadPlugin("/nonexistent/libx.so", registry),
                       absl::StatusCode::kFailedPrecondition,
                       {"/nonexistent/libx.so", "no such file"}));
}

TEST(LoadPluginTest, NotASharedLibrary) {
  const std::string path = ::testing::TempDir() + "/not_a_library.so";
  std::ofstream(path) << "plain text\n";
  FunctionRegistry registry;
  EXPECT_TRUE(StatusIs(LoadPlugin(path, registry),
                       absl::StatusCode::kFailedPrecondition,
                       {path, "cannot load it as a shared library"}));
}

TEST(LoadPluginTest, RealLibrariesRefused) {
  struct Case {
    const char* name;
    const char* problem;
  };
  for (const Case& c :
       {Case{"test_plugin_no_symbol", "no registration symbol"},
        Case{"test_plugin_bad_abi", "ABI version 999"},
        Case{"test_plugin_clash", "'add'"},
        Case{"test_plugin_malformed", "unknown type 'bogus_type'"}}) {
    FunctionRegistry registry;
    RegisterBuiltins(registry);
    const std::string path = PluginPath(c.name);
    EXPECT_TRUE(StatusIs(LoadPlugin(path, registry),
                         absl::StatusCode::kFailedPrecondition,
                         {path, c.problem}))
        << c.name;
  }
}

TEST(LoadPluginTest, TwoPluginsWithOneNameRefused) {
  FunctionRegistry registry;
  const std::string path = PluginPath("test_plugin_good");
  ASSERT_TRUE(LoadPlugin(path, registry).ok());
  EXPECT_TRUE(StatusIs(LoadPlugins({path}, registry),
                       absl::StatusCode::kFailedPrecondition,
                       {"plug_twice", "already registered", "plugin " + path}));
}

// The good plugin's functions through the worker's executor: a result,
// a thrown exception, an output of the wrong shape.
TEST(LoadPluginTest, GoodPluginRunsAndIsChecked) {
  FunctionRegistry registry;
  ASSERT_TRUE(LoadPlugin(PluginPath("test_plugin_good"), registry).ok());
  ShardExecutor executor(&registry);
  auto call = [&](const std::string& fn) {
    ShardCall c;
    c.function = fn;
    Tensor x(DType::kFloat64, {3});
    for (int i = 0; i < 3; ++i) x.data_as<double>()[i] = i + 0.5;
    c.args.push_back(std::move(x));
    return executor.Run(std::move(c));
  };
  auto twice = call("plug_twice");
  ASSERT_TRUE(twice.ok()) << twice.status();
  ASSERT_EQ((*twice)[0].shape(), (Shape{3}));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*twice)[0].data_as<double>()[i], 2 * (i + 0.5));
  }
  EXPECT_TRUE(StatusIs(call("plug_throws").status(),
                       absl::StatusCode::kInternal,
                       {"plug_throws", "plug_throws always throws"}));
  EXPECT_TRUE(StatusIs(call("plug_bad_shape").status(),
                       absl::StatusCode::kInternal,
                       {"plug_bad_shape", "float64[1]", "float64[3]"}));
}

}  // namespace
}  // namespace shardmap
