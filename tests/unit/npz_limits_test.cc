// Tests of ReadNpz's size checks: the declared total against max_bytes and
// each member's size in the zip directory against its .npy header, both
// before a member is inflated.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/npy.h"
#include "core/npz.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

namespace fs = std::filesystem;

class NpzLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "npz_limits_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    for (int64_t i = 0; i < 1000; ++i) a_.data_as<double>()[i] = i * 0.5;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_;
  Tensor a_{DType::kFloat64, {1000}};
};

TEST_F(NpzLimitsTest, DeclaredTotalOverTheLimitIsRefused) {
  const std::string path = dir_ + "/two.npz";
  ASSERT_TRUE(WriteNpz(path, {{"a", &a_}, {"b", &a_}}, true).ok());
  const uint64_t one = NpyHeader(a_).size() + a_.num_bytes();
  auto all = ReadNpz(path, 2 * one);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ(SerializeNpy((*all)[1].second), SerializeNpy(a_));
  EXPECT_TRUE(StatusIs(ReadNpz(path, 2 * one - 1).status(),
                       absl::StatusCode::kInvalidArgument,
                       {path, "holds more than", "'b.npy'"}));
}

TEST_F(NpzLimitsTest, MemberWhoseHeaderDisagreesWithTheDirectoryIsRefused) {
  const std::string path = dir_ + "/lies.npz";
  // Larger than the header's read (kNpyMaxHeadBytes), so that the refusal
  // comes before the member's end (where libzip would check its CRC).
  Tensor big(DType::kFloat64, {300000});
  std::memset(big.data(), 0, big.num_bytes());
  ASSERT_TRUE(WriteNpz(path, {{"a", &big}}, /*compress=*/false).ok());
  // The stored member's header now declares 3000 elements (same length,
  // so the archive stays well-formed) while its data holds 300000.
  std::stringstream s;
  s << std::ifstream(path, std::ios::binary).rdbuf();
  std::string bytes = s.str();
  const size_t at = bytes.find("(300000,)");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 9, "(3000,)  ");
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  const uint64_t header = NpyHeader(big).size();
  EXPECT_TRUE(StatusIs(
      ReadNpz(path).status(), absl::StatusCode::kInvalidArgument,
      {"a.npy",
       absl::StrCat("gives the member ", header + 2400000,
                    " bytes but its .npy header declares ", header + 24000)}));
}

}  // namespace
}  // namespace shardmap
