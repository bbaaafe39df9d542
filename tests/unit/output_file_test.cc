// Tests of client/output_file: --out onto FIFOs, symlinks, regular files
// and directories.
#include "client/output_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "core/npy.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "output_file_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    for (int i = 0; i < 6; ++i) t_.data_as<int32_t>()[i] = i * 7 - 3;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string P(const std::string& name) const { return dir_ + "/" + name; }
  bool NoTemporaries(const std::string& dir) const {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().filename().string().find(".tmp.") != std::string::npos) {
        return false;
      }
    }
    return true;
  }

  std::string dir_;
  Tensor t_{DType::kInt32, {2, 3}};
};

TEST_F(OutputFileTest, NewAndRegularFilesAreReplacedKeepingTheirMode) {
  ASSERT_TRUE(WriteOutputNpy(P("new.npy"), t_).ok());
  EXPECT_EQ(Slurp(P("new.npy")), SerializeNpy(t_));
  std::ofstream(P("old.npy")) << "old contents";
  ASSERT_EQ(::chmod(P("old.npy").c_str(), 0640), 0);
  ASSERT_TRUE(WriteOutputNpy(P("old.npy"), t_).ok());
  EXPECT_EQ(Slurp(P("old.npy")), SerializeNpy(t_));
  struct stat st;
  ASSERT_EQ(::stat(P("old.npy").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_TRUE(NoTemporaries(dir_));
}

TEST_F(OutputFileTest, ANewFileIsMadeAsARedirectionWouldMakeIt) {
  // 0666 less the umask, as a shell's `> file` creates it.
  const mode_t old_umask = ::umask(027);
  const absl::Status s = WriteOutputNpy(P("made.npy"), t_);
  ::umask(old_umask);
  ASSERT_TRUE(s.ok()) << s;
  struct stat st;
  ASSERT_EQ(::stat(P("made.npy").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
}

TEST_F(OutputFileTest, SymlinksAreFollowedToTheirTarget) {
  fs::create_directory(P("sub"));
  std::ofstream(P("sub/t.npy")) << "x";
  fs::create_symlink("sub/t.npy", P("rel"));
  fs::create_symlink(P("rel"), P("chain"));
  fs::create_symlink(P("sub/new.npy"), P("dangling"));
  auto resolved = ResolveOutputPath(P("chain"));
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(*resolved, P("sub/t.npy"));
  ASSERT_TRUE(WriteOutputNpy(P("chain"), t_).ok());
  EXPECT_TRUE(fs::is_symlink(P("chain")));
  EXPECT_TRUE(fs::is_symlink(P("rel")));
  EXPECT_EQ(Slurp(P("sub/t.npy")), SerializeNpy(t_));
  ASSERT_TRUE(WriteOutputNpy(P("dangling"), t_).ok());
  EXPECT_TRUE(fs::is_symlink(P("dangling")));
  EXPECT_EQ(Slurp(P("sub/new.npy")), SerializeNpy(t_));
  EXPECT_TRUE(NoTemporaries(P("sub")));
  EXPECT_TRUE(NoTemporaries(dir_));
}

TEST_F(OutputFileTest, SymlinkLoopIsAnError) {
  fs::create_symlink(P("b"), P("a"));
  fs::create_symlink(P("a"), P("b"));
  EXPECT_TRUE(StatusIs(WriteOutputNpy(P("a"), t_),
                       absl::StatusCode::kFailedPrecondition,
                       {P("a"), "Too many levels of symbolic links"}));
}

TEST_F(OutputFileTest, FifoIsWrittenIntoAndStaysAFifo) {
  ASSERT_EQ(::mkfifo(P("fifo").c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = Slurp(P("fifo")); });
  const absl::Status s = WriteOutputNpy(P("fifo"), t_);
  reader.join();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(got, SerializeNpy(t_));
  struct stat st;
  ASSERT_EQ(::lstat(P("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_TRUE(NoTemporaries(dir_));
}

TEST_F(OutputFileTest, DirectoriesAndMissingDirectoriesAreRefused) {
  EXPECT_TRUE(StatusIs(WriteOutputNpy(dir_, t_),
                       absl::StatusCode::kFailedPrecondition,
                       {dir_, "Is a directory"}));
  EXPECT_TRUE(StatusIs(WriteOutputNpy(P("no/such.npy"), t_),
                       absl::StatusCode::kFailedPrecondition,
                       {"no/such.npy", "No such file or directory"}));
}

}  // namespace
}  // namespace shardmap
