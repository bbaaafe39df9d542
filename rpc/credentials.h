// Where every shardmap binary gets its transport security: the flags
// (--tls-cert, --tls-key, --tls-ca, --tls-server-name, --token-file,
// --insecure; env SHARDMAP_TOKEN), the credentials of its servers and
// channels, and the safe-default rule for listen addresses.
//
//   SecurityOptions options;
//   AddSecurityFlags(app, options, /*server=*/true);
//   ... parse ...
//   auto security = Security::ForServer(options, {listen}, "shardmap-worker");
//   if (!security.ok()) return ReportConfigError(security.status());  // 78
//   builder.AddListeningPort(listen, security->ServerCredentials("worker"));
//   // ... and MakeChannel uses security->Channels() from now on.
#ifndef SHARDMAP_CORE_CREDENTIALS_H_
#define SHARDMAP_CORE_CREDENTIALS_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace CLI {
class App;
}

namespace shardmap {

// sysexits(3) EX_CONFIG: what the binaries exit with when the security
// configuration is refused (unreadable files, plaintext off loopback).
inline constexpr int kExitConfig = 78;

// The environment variable holding the bearer token (--token-file wins).
inline constexpr char kTokenEnv[] = "SHARDMAP_TOKEN";

struct SecurityOptions {
  std::string tls_cert;         // PEM certificate chain of this process
  std::string tls_key;          // its PEM private key
  std::string tls_ca;           // PEM CA bundle: verifies the other side
  std::string tls_server_name;  // name to verify in servers' certificates
  std::string token_file;       // bearer token; else env SHARDMAP_TOKEN
  bool insecure = false;        // allow plaintext off loopback
  bool reflection = false;      // serve gRPC reflection (servers)
  bool server = false;          // set by AddSecurityFlags(..., true)
};

// Registers the flags above on `app`. `server` adds --insecure and
// --reflection and words the help for a binary that also serves.
void AddSecurityFlags(CLI::App& app, SecurityOptions& options, bool server);

// What a channel needs: TLS credentials (null: plaintext), the token to
// send (empty: none), and the name to verify in the server's certificate
// (empty: the host dialled).
struct ChannelSecurity {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string token;
  std::string server_name;
  // When no token is set: look for the token a local cluster (shardctl up)
  // wrote for the address dialled (LocalTokenPath). Only shardctl does.
  bool discover_local_token = false;
};

// Credentials loaded from SecurityOptions.
class Security {
 public:
  // Reads the files and the token. INVALID_ARGUMENT naming the flag and the
  // file when one cannot be read, is empty, or only one of --tls-cert and
  // --tls-key is given.
  static absl::StatusOr<Security> Load(const SecurityOptions& options);
  // For a server binary: Load, CheckListen(listen, binary), loads
  // reflection if asked, then makes the result the process's default
  // channel security.
  static absl::StatusOr<Security> ForServer(
      const SecurityOptions& options, const std::vector<std::string>& listen,
      const std::string& binary);

  bool tls() const { return !cert_.empty(); }
  // Servers: TLS verifies client certificates (mutual TLS).
  bool mutual_tls() const { return tls() && !ca_.empty(); }
  const std::string& token() const { return token_; }

  // The safe default: plaintext only on loopback. A non-loopback address
  // needs TLS and some client authentication (--tls-ca or a token), or
  // --insecure; FAILED_PRECONDITION saying so otherwise. With --insecure,
  // logs a loud warning for each such address and prints it on stderr.
  absl::Status CheckListen(const std::vector<std::string>& addresses,
                           const std::string& binary) const;

  // TLS (mTLS with --tls-ca) or plaintext; with a token, every call but
  // health checks must carry it (UNAUTHENTICATED otherwise). `component`
  // names the server in the log of refused calls.
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials(
      const std::string& component) const;

  // The security of this process's channels.
  ChannelSecurity Channels() const;

  // Flags that give a child process the same TLS files (not the token:
  // give it to children through SHARDMAP_TOKEN).
  std::vector<std::string> ChildArgs() const;

 private:
  SecurityOptions options_;
  std::string cert_, key_, ca_, token_;
};

// Prints "error: <CODE>: <message>" on stderr; returns kExitConfig.
int ReportConfigError(const absl::Status& status);

// The default security of MakeChannel(address). Set once in main, before
// any channel is made; plaintext without a token until then.
void SetDefaultChannelSecurity(ChannelSecurity security);
ChannelSecurity DefaultChannelSecurity();

// True for 127.0.0.0/8, ::1 and "localhost" (HOST or HOST:PORT).
bool IsLoopbackAddress(const std::string& address);

// A fresh random token: 32 bytes from /dev/urandom, hex.
absl::StatusOr<std::string> NewRandomToken();

// The file in which a local cluster listening on `address` keeps its token:
// $XDG_RUNTIME_DIR/shardmap (or /tmp/shardmap-<uid>), a directory only
// this user can read.
std::string LocalTokenPath(const std::string& address);
// Writes `token` there (directory 0700, file 0600, replaced atomically).
absl::Status WriteLocalToken(const std::string& address,
                             const std::string& token);
// The token in that file, or "" if there is none or it is not private to
// this user.
std::string ReadLocalToken(const std::string& address);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_CREDENTIALS_H_
