// Tests of core/atomic_file: the file is replaced whole or not at all, and
// every failure names the path and the system's reason.
#include "core/atomic_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/unit/status_matchers.h"
#include "tests/unit/temp_dir.h"

namespace shardmap {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)),
                       std::istreambuf_iterator<char>());
  }
  int Entries() {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) {
      (void)e;
      ++n;
    }
    return n;
  }
  TempDir tmp_{"atomic_file_test"};
  const std::string dir_ = tmp_.path();
};

TEST_F(AtomicFileTest, WritesThePiecesAndReplaces) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, {"abc", "", "def"}).ok());
  EXPECT_EQ(Read(path), "abcdef");
  ASSERT_TRUE(WriteFileAtomically(path, {"x"}).ok());
  EXPECT_EQ(Read(path), "x");
  EXPECT_EQ(Entries(), 1);  // no temporary file left
}

TEST_F(AtomicFileTest, AMissingDirectoryNamesThePath) {
  const std::string path = dir_ + "/no/such/f";
  EXPECT_TRUE(StatusIs(
      WriteFileAtomically(path, {"x"}), absl::StatusCode::kInternal,
      {"cannot create " + dir_ + "/no/such/f:", "No such file or directory"}));
}

TEST_F(AtomicFileTest, AFileInPlaceOfTheDirectory) {
  std::ofstream(dir_ + "/file") << "x";
  EXPECT_TRUE(StatusIs(WriteFileAtomically(dir_ + "/file/f", {"x"}),
                       absl::StatusCode::kInternal, {"Not a directory"}));
}

TEST_F(AtomicFileTest, ReadingAFifoInPlaceOfAFileIsRefusedAtOnce) {
  // Without a writer, a blocking open of a FIFO would never return.
  const std::string path = dir_ + "/manifest.json";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  EXPECT_TRUE(StatusIs(ReadSmallFile(path, 1024).status(),
                       absl::StatusCode::kInvalidArgument,
                       {path, "is not a regular file"}));
}

TEST_F(AtomicFileTest, ADirectoryInPlaceOfTheFileIsLeftAlone) {
  fs::create_directories(dir_ + "/d/inside");
  EXPECT_TRUE(StatusIs(
      WriteFileAtomically(dir_ + "/d", {"x"}), absl::StatusCode::kInternal,
      {"cannot rename a temporary file to", dir_ + "/d", "Is a directory"}));
  EXPECT_TRUE(fs::is_directory(dir_ + "/d/inside"));
  EXPECT_EQ(Entries(), 1);
}

// A write the file system refuses midway (here: a file size limit, as a
// full disk would): the old file stays whole and no temporary is left.
TEST_F(AtomicFileTest, AFailedWriteLeavesTheOldFile) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, {"old"}).ok());
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
    struct rlimit limit = {4096, 4096};
    setrlimit(RLIMIT_FSIZE, &limit);
    const std::string big(10000, 'b');
    absl::Status s = WriteFileAtomically(path, {big});
    const std::string report =
        absl::StrCat(static_cast<int>(s.code()), " ", s.message());
    (void)!write(pipe_fds[1], report.data(), report.size());
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string report;
  char buf[512];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0) report.append(buf, n);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(
      report.substr(0, report.find(' ')),
      std::to_string(static_cast<int>(absl::StatusCode::kResourceExhausted)))
      << report;
  EXPECT_NE(report.find("cannot write " + path + ": File too large"),
            std::string::npos)
      << report;
  EXPECT_EQ(Read(path), "old");
  EXPECT_EQ(Entries(), 1);
}

TEST_F(AtomicFileTest, SyncDirectoryOfAMissingDirectory) {
  EXPECT_TRUE(StatusIs(SyncDirectory(dir_ + "/none"),
                       absl::StatusCode::kInternal,
                       {dir_ + "/none", "No such file or directory"}));
  EXPECT_TRUE(SyncDirectory(dir_).ok());
}

TEST_F(AtomicFileTest, WritingAtADirectoryFdStaysInThatDirectory) {
  // The directory is opened, then its path is swapped for a symbolic link
  // to another directory: the write still lands in the opened one.
  fs::create_directories(dir_ + "/blocks");
  fs::create_directories(dir_ + "/elsewhere");
  const int fd =
      ::open((dir_ + "/blocks").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  fs::rename(dir_ + "/blocks", dir_ + "/moved");
  fs::create_directory_symlink(dir_ + "/elsewhere", dir_ + "/blocks");
  const std::string shown = dir_ + "/blocks/f";
  absl::Status s = WriteFileAtomicallyAt(fd, "f", shown, {"abc", "def"});
  ::close(fd);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(Read(dir_ + "/moved/f"), "abcdef");
  EXPECT_TRUE(fs::is_empty(dir_ + "/elsewhere"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ + "/moved"),
                          fs::directory_iterator()),
            1);  // no temporary file left
}

TEST_F(AtomicFileTest, AFailedWriteAtADirectoryFdNamesThePath) {
  fs::create_directories(dir_ + "/d/f");  // a directory where the file goes
  const int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  absl::Status s = WriteFileAtomicallyAt(fd, "d/f", "shown/path", {"x"});
  ::close(fd);
  EXPECT_TRUE(StatusIs(
      s, absl::StatusCode::kInternal,
      {"cannot rename a temporary file to shown/path", "Is a directory"}));
  EXPECT_EQ(Entries(), 1);  // only "d": the temporary file is gone
}

TEST_F(AtomicFileTest, ModeBitsLessTheUmaskOrExact) {
  const mode_t old_umask = ::umask(022);
  const std::string made = dir_ + "/made";
  const std::string kept = dir_ + "/kept";
  ASSERT_TRUE(WriteFileAtomically(made, {"x"}, FileMode{0666}).ok());
  ASSERT_TRUE(WriteFileAtomically(kept, {"x"}, FileMode{0662, true}).ok());
  ::umask(old_umask);
  struct stat st;
  ASSERT_EQ(::stat(made.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  ASSERT_EQ(::stat(kept.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0662u);
}

TEST_F(AtomicFileTest, AWriterByNameReplacesTheFile) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, {"old"}).ok());
  std::string given;
  ASSERT_TRUE(ReplaceFileAtomically(path, [&given](const std::string& tmp) {
                given = tmp;
                std::ofstream(tmp) << "new";
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(Read(path), "new");
  EXPECT_NE(given, path);
  EXPECT_EQ(given.rfind(path + ".tmp.", 0), 0u) << given;
  EXPECT_EQ(Entries(), 1);
}

TEST_F(AtomicFileTest, AWriterByNameThatFailsLeavesTheOldFile) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, {"old"}).ok());
  EXPECT_TRUE(StatusIs(ReplaceFileAtomically(path,
                                             [](const std::string& tmp) {
                                               std::ofstream(tmp) << "half";
                                               return absl::DataLossError(
                                                   "writer gave up");
                                             }),
                       absl::StatusCode::kDataLoss, {"writer gave up"}));
  // A writer that made no file: syncing it names the path.
  EXPECT_TRUE(
      StatusIs(ReplaceFileAtomically(
                   path, [](const std::string&) { return absl::OkStatus(); }),
               absl::StatusCode::kInternal,
               {"cannot sync " + path, "No such file or directory"}));
  EXPECT_EQ(Read(path), "old");
  EXPECT_EQ(Entries(), 1);
}

}  // namespace
}  // namespace shardmap
