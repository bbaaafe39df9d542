// Test helper: a fresh directory under the system's temporary directory,
// removed with everything in it when the object goes.
#ifndef SHARDMAP_TESTS_UNIT_TEMP_DIR_H_
#define SHARDMAP_TESTS_UNIT_TEMP_DIR_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace shardmap {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix) {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX"))
            .string();
    EXPECT_NE(mkdtemp(tmpl.data()), nullptr) << std::strerror(errno);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_TEMP_DIR_H_
