#include "rpc/credentials.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "rpc/token_auth.h"

namespace shardmap {
namespace {

TEST(ConstantTimeEqualsTest, ComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("secret", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secreT", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secre", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secrets", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("", "secret"));
  // A prefix padded with NULs must not pass for the secret.
  EXPECT_FALSE(ConstantTimeEquals(std::string("sec\0\0\0", 6), "sec"));
}

TEST(IsLoopbackAddressTest, OnlyLoopbackHosts) {
  for (const char* a : {"127.0.0.1:0", "127.1.2.3:7070", "localhost:1",
                        "[::1]:7070", "::1", "unix:/tmp/s"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a : {"0.0.0.0:7070", "[::]:7070", ":7070", "10.0.0.1:1",
                        "example.com:7070", "[::ffff:10.0.0.1]:1"}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

TokenAuthProcessor::InputMetadata Metadata(const std::string& path,
                                           const std::string* header) {
  static std::string storage[2];
  storage[0] = path;
  TokenAuthProcessor::InputMetadata md;
  md.emplace(":path", grpc::string_ref(storage[0]));
  if (header != nullptr) {
    storage[1] = *header;
    md.emplace("authorization", grpc::string_ref(storage[1]));
  }
  return md;
}

TEST(TokenAuthProcessorTest, NeedsTheTokenExceptForHealth) {
  TokenAuthProcessor processor("s3cret", "test");
  TokenAuthProcessor::OutputMetadata consumed, response;
  const std::string good = "Bearer s3cret", bad = "Bearer s3creT",
                    raw = "s3cret";
  const std::string method = "/shardmap.v1.Coordinator/RunJob";
  EXPECT_TRUE(
      processor.Process(Metadata(method, &good), nullptr, &consumed, &response)
          .ok());
  for (const std::string* h :
       {&bad, &raw, static_cast<const std::string*>(nullptr)}) {
    grpc::Status s =
        processor.Process(Metadata(method, h), nullptr, &consumed, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(s.error_message().find("s3cret"), std::string::npos);
  }
  EXPECT_TRUE(processor
                  .Process(Metadata("/grpc.health.v1.Health/Check", nullptr),
                           nullptr, &consumed, &response)
                  .ok());
}

TEST(SecurityTest, LoadsTokenFileAndRefusesPlaintextOffLoopback) {
  char dir[] = "/tmp/credentials-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string token_file = std::string(dir) + "/token";
  std::ofstream(token_file) << "  tok-123\n";
  SecurityOptions options;
  options.token_file = token_file;
  options.server = true;
  auto security = Security::Load(options);
  ASSERT_TRUE(security.ok()) << security.status();
  EXPECT_EQ(security->token(), "tok-123");
  EXPECT_TRUE(security->CheckListen({"127.0.0.1:0"}, "test").ok());
  EXPECT_EQ(security->CheckListen({"0.0.0.0:0"}, "test").code(),
            absl::StatusCode::kFailedPrecondition);
  options.insecure = true;
  EXPECT_TRUE(Security::Load(options)->CheckListen({"0.0.0.0:0"}, "t").ok());

  SecurityOptions half;
  half.tls_cert = token_file;
  EXPECT_EQ(Security::Load(half).status().code(),
            absl::StatusCode::kInvalidArgument);
  SecurityOptions missing;
  missing.token_file = std::string(dir) + "/none";
  EXPECT_EQ(Security::Load(missing).status().code(),
            absl::StatusCode::kInvalidArgument);
  unlink(token_file.c_str());
  rmdir(dir);
}

TEST(LocalTokenTest, WrittenPrivateAndReadBack) {
  char dir[] = "/tmp/credentials-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  setenv("XDG_RUNTIME_DIR", dir, 1);
  ASSERT_TRUE(WriteLocalToken("127.0.0.1:4242", "abc").ok());
  const std::string path = LocalTokenPath("127.0.0.1:4242");
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  EXPECT_EQ(ReadLocalToken("127.0.0.1:4242"), "abc");
  EXPECT_EQ(ReadLocalToken("127.0.0.1:4243"), "");
  chmod(path.c_str(), 0644);  // readable by others: not trusted
  EXPECT_EQ(ReadLocalToken("127.0.0.1:4242"), "");
  unlink(path.c_str());
  rmdir((std::string(dir) + "/shardmap").c_str());
  rmdir(dir);
  unsetenv("XDG_RUNTIME_DIR");
}

TEST(NewRandomTokenTest, DistinctHex) {
  auto a = NewRandomToken(), b = NewRandomToken();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace shardmap
