#include "rpc/credentials.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "core/status_util.h"
#include "rpc/reflection.h"
#include "rpc/token_auth.h"

namespace shardmap {
namespace {

absl::StatusOr<std::string> ReadFlagFile(const char* flag,
                                         const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream content;
  content << in.rdbuf();
  if (content.str().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": the file is empty"));
  }
  return content.str();
}

// A token is the file's or variable's text without surrounding whitespace.
absl::StatusOr<std::string> LoadToken(const SecurityOptions& options) {
  if (!options.token_file.empty()) {
    SHARD_ASSIGN_OR_RETURN(std::string text,
                           ReadFlagFile("--token-file", options.token_file));
    std::string token(absl::StripAsciiWhitespace(text));
    if (token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--token-file ", options.token_file, ": holds only whitespace"));
    }
    struct stat st;
    if (stat(options.token_file.c_str(), &st) == 0 && (st.st_mode & 077)) {
      spdlog::warn("--token-file {} is readable by other users (chmod 600)",
                   options.token_file);
    }
    return token;
  }
  const char* env = std::getenv(kTokenEnv);
  return env == nullptr ? std::string()
                        : std::string(absl::StripAsciiWhitespace(env));
}

// "h:p" -> "h", "[v6]:p" -> "v6"; a bare IPv6 address stays whole.
std::string HostOf(const std::string& address) {
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    return address.substr(
        1, close == std::string::npos ? std::string::npos : close - 1);
  }
  const size_t colon = address.find(':');
  if (colon == std::string::npos || address.rfind(':') != colon) {
    return address;
  }
  return address.substr(0, colon);
}

std::string TokenDirectory() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime != nullptr && runtime[0] == '/') {
    return absl::StrCat(runtime, "/shardmap");
  }
  return absl::StrCat("/tmp/shardmap-", getuid());
}

// True if `st` is owned by this user and closed to everyone else.
bool Private(const struct stat& st) {
  return st.st_uid == getuid() && (st.st_mode & 077) == 0;
}

// std::mutex carries no annotations in libstdc++: absl::Mutex lets clang
// check that the default is only touched under its lock.
ABSL_CONST_INIT absl::Mutex default_mu(absl::kConstInit);
ChannelSecurity& DefaultSecurity() ABSL_EXCLUSIVE_LOCKS_REQUIRED(default_mu) {
  static ChannelSecurity* security = new ChannelSecurity();
  return *security;
}

}  // namespace

void AddSecurityFlags(CLI::App& app, SecurityOptions& options, bool server) {
  options.server = server;
  const std::string role = server ? "this process's" : "the client's";
  app.add_option("--tls-cert", options.tls_cert,
                 "PEM certificate chain: " + role + " TLS identity" +
                     (server ? " (its servers and its channels)" : ""));
  app.add_option("--tls-key", options.tls_key, "PEM private key of --tls-cert");
  app.add_option("--tls-ca", options.tls_ca,
                 server ? "PEM CA bundle: servers require and verify client "
                          "certificates signed by it (mutual TLS); channels "
                          "verify servers with it"
                        : "PEM CA bundle that verifies the coordinator's "
                          "certificate");
  app.add_option("--tls-server-name", options.tls_server_name,
                 "name to verify in servers' certificates instead of the "
                 "host dialled");
  app.add_option(
      "--token-file", options.token_file,
      std::string("file holding the bearer token ") +
          (server ? "every RPC must carry and this process sends" : "to send") +
          " (default: env SHARDMAP_TOKEN)");
  if (server) {
    app.add_flag("--insecure", options.insecure,
                 "allow listening on a non-loopback address without TLS or "
                 "client authentication (warns loudly)");
    app.add_flag("--reflection", options.reflection,
                 "serve gRPC server reflection (off by default)");
  }
}

absl::StatusOr<Security> Security::Load(const SecurityOptions& options) {
  Security s;
  s.options_ = options;
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together: give both or neither");
  }
  if (options.server && !options.tls_ca.empty() && options.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-ca needs --tls-cert and --tls-key: a server with a CA "
        "serves TLS with its own certificate");
  }
  if (!options.tls_cert.empty()) {
    SHARD_ASSIGN_OR_RETURN(s.cert_,
                           ReadFlagFile("--tls-cert", options.tls_cert));
    SHARD_ASSIGN_OR_RETURN(s.key_, ReadFlagFile("--tls-key", options.tls_key));
  }
  if (!options.tls_ca.empty()) {
    SHARD_ASSIGN_OR_RETURN(s.ca_, ReadFlagFile("--tls-ca", options.tls_ca));
  }
  SHARD_ASSIGN_OR_RETURN(s.token_, LoadToken(options));
  return s;
}

absl::StatusOr<Security> Security::ForServer(
    const SecurityOptions& options, const std::vector<std::string>& listen,
    const std::string& binary) {
  SHARD_ASSIGN_OR_RETURN(Security security, Load(options));
  SHARD_RETURN_IF_ERROR(security.CheckListen(listen, binary));
  if (options.reflection) SHARD_RETURN_IF_ERROR(EnableServerReflection());
  SetDefaultChannelSecurity(security.Channels());
  return security;
}

int ReportConfigError(const absl::Status& status) {
  std::cerr << "error: " << StatusCodeName(status.code()) << ": "
            << status.message() << std::endl;
  return kExitConfig;
}

absl::Status Security::CheckListen(const std::vector<std::string>& addresses,
                                   const std::string& binary) const {
  for (const std::string& address : addresses) {
    if (IsLoopbackAddress(address)) continue;
    std::string missing;
    if (!tls()) {
      missing =
          "without TLS: give --tls-cert and --tls-key (and --tls-ca "
          "for mutual TLS)";
    } else if (!mutual_tls() && token_.empty()) {
      missing =
          "with TLS but no client authentication: give --tls-ca "
          "(mutual TLS) or a token (--token-file or SHARDMAP_TOKEN)";
    } else {
      continue;
    }
    if (!options_.insecure) {
      return absl::FailedPreconditionError(
          absl::StrCat("refusing to listen on ", address, " ", missing,
                       ", or pass --insecure to accept the risk"));
    }
    const std::string warning = absl::StrCat(
        "WARNING: ", binary, " listens on ", address, " ", missing,
        ". --insecure was given: ",
        tls() ? "anyone who can reach it"
              : "anyone on the network can read and alter its traffic, and "
                "anyone who can reach it",
        token_.empty() ? " can run jobs and read arrays"
                       : " and holds the token can run jobs");
    std::cerr << warning << std::endl;
    spdlog::warn("{}", warning);
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ServerCredentials> Security::ServerCredentials(
    const std::string& component) const {
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (tls()) {
    grpc::SslServerCredentialsOptions ssl(
        ca_.empty()
            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = ca_;
    ssl.pem_key_cert_pairs.push_back({key_, cert_});
    creds = grpc::SslServerCredentials(ssl);
  } else if (!token_.empty()) {
    creds = PlaintextServerCredentials();
  } else {
    return grpc::InsecureServerCredentials();
  }
  if (!token_.empty()) {
    creds->SetAuthMetadataProcessor(
        std::make_shared<TokenAuthProcessor>(token_, component));
  }
  return creds;
}

ChannelSecurity Security::Channels() const {
  ChannelSecurity channels;
  if (!cert_.empty() || !ca_.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ca_;
    ssl.pem_private_key = key_;
    ssl.pem_cert_chain = cert_;
    channels.credentials = grpc::SslCredentials(ssl);
  }
  channels.token = token_;
  channels.server_name = options_.tls_server_name;
  return channels;
}

std::vector<std::string> Security::ChildArgs() const {
  std::vector<std::string> args;
  auto add = [&args](const char* flag, const std::string& value) {
    if (value.empty()) return;
    args.push_back(flag);
    args.push_back(value);
  };
  add("--tls-cert", options_.tls_cert);
  add("--tls-key", options_.tls_key);
  add("--tls-ca", options_.tls_ca);
  add("--tls-server-name", options_.tls_server_name);
  return args;
}

void SetDefaultChannelSecurity(ChannelSecurity security) {
  absl::MutexLock lock(&default_mu);
  DefaultSecurity() = std::move(security);
}

ChannelSecurity DefaultChannelSecurity() {
  absl::MutexLock lock(&default_mu);
  return DefaultSecurity();
}

bool IsLoopbackAddress(const std::string& address) {
  if (absl::StartsWith(address, "unix:")) return true;
  const std::string host = HostOf(address);
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

absl::StatusOr<std::string> NewRandomToken() {
  unsigned char bytes[32];
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read(fd, bytes, sizeof(bytes)) != sizeof(bytes)) {
    if (fd >= 0) close(fd);
    return absl::InternalError(
        absl::StrCat("reading /dev/urandom: ", std::strerror(errno)));
  }
  close(fd);
  std::string hex;
  for (unsigned char b : bytes)
    absl::StrAppend(&hex, absl::Hex(b, absl::kZeroPad2));
  return hex;
}

std::string LocalTokenPath(const std::string& address) {
  std::string name = absl::StrReplaceAll(address, {{"/", "_"}, {":", "_"}});
  return absl::StrCat(TokenDirectory(), "/", name, ".token");
}

absl::Status WriteLocalToken(const std::string& address,
                             const std::string& token) {
  const std::string dir = TokenDirectory();
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(
        absl::StrCat("creating ", dir, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || !Private(st)) {
    return absl::PermissionDeniedError(absl::StrCat(
        dir, " must be a directory owned by this user with mode 0700"));
  }
  const std::string path = LocalTokenPath(address);
  const std::string tmp = absl::StrCat(path, ".", getpid());
  const int fd = open(
      tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("creating ", tmp, ": ", std::strerror(errno)));
  }
  const std::string line = token + "\n";
  const bool written =
      write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(fd);
  if (!written || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("writing ", path));
  }
  return absl::OkStatus();
}

std::string ReadLocalToken(const std::string& address) {
  const std::string path = LocalTokenPath(address);
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st;
  std::string text;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && Private(st)) {
    char buffer[256];
    ssize_t n;
    while ((n = read(fd, buffer, sizeof(buffer))) > 0) text.append(buffer, n);
  }
  close(fd);
  return std::string(absl::StripAsciiWhitespace(text));
}

}  // namespace shardmap
