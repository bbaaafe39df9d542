"""Channels to a coordinator: TLS, the bearer token, and gRPC's settings.

The token is found as shardctl finds it: token= (or token_file=), else
the environment variable SHARDMAP_TOKEN, else the file `shardctl up`
keeps for the address dialled ($XDG_RUNTIME_DIR/shardmap/HOST_PORT.token,
or /tmp/shardmap-UID/...), used only if it is private to this user.
"""
import os
import stat

import grpc

from shardmap.errors import InvalidArgument

TOKEN_ENV = "SHARDMAP_TOKEN"
MAX_MESSAGE_BYTES = 8 << 20  # as the C++ client (wire/chunking.h)


class TLS:
    """TLS settings: ca (PEM file verifying the coordinator; None: the
    system's roots), cert and key (this client's certificate, for mutual
    TLS), server_name (the name to verify instead of the host dialled)."""

    def __init__(self, ca=None, cert=None, key=None, server_name=None):
        if (cert is None) != (key is None):
            raise InvalidArgument("TLS: give both cert and key, or neither")
        self.ca, self.cert, self.key = ca, cert, key
        self.server_name = server_name

    def credentials(self):
        def read(path, what):
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError as e:
                raise InvalidArgument(f"TLS {what} '{path}': {e.strerror}") \
                    from None
            if not data:
                raise InvalidArgument(f"TLS {what} '{path}' is empty")
            return data
        return grpc.ssl_channel_credentials(
            root_certificates=read(self.ca, "ca") if self.ca else None,
            private_key=read(self.key, "key") if self.key else None,
            certificate_chain=read(self.cert, "cert") if self.cert else None)


def token_directory():
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/"):
        return os.path.join(runtime, "shardmap")
    return f"/tmp/shardmap-{os.getuid()}"


def local_token_path(address):
    name = address.replace("/", "_").replace(":", "_")
    return os.path.join(token_directory(), name + ".token")


def read_local_token(address):
    """The token `shardctl up` keeps for `address`, or "" (no file, or
    one others can read)."""
    try:
        fd = os.open(local_token_path(address),
                     os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or
                st.st_mode & 0o077):
            return ""
        return f.read(4096).decode("utf-8", "replace").strip()


def find_token(address, token=None, token_file=None):
    if token:
        return token
    if token_file:
        try:
            with open(token_file, encoding="utf-8") as f:
                text = f.read().strip()
        except OSError as e:
            raise InvalidArgument(
                f"token_file '{token_file}': {e.strerror}") from None
        if not text:
            raise InvalidArgument(f"token_file '{token_file}' is empty")
        return text
    return os.environ.get(TOKEN_ENV) or read_local_token(address)


def make_channel(address, tls=None, aio=False):
    """A channel with the C++ client's settings (rpc/channel.cc); a
    grpc.aio channel (of the running event loop) with aio."""
    options = [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.keepalive_time_ms", 30000),
        ("grpc.keepalive_timeout_ms", 10000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.enable_retries", 0),
        # Bandwidth-delay probing costs loopback streams much throughput.
        ("grpc.http2.bdp_probe", 0),
        ("grpc.experimental.tcp_max_read_chunk_size", 256 << 10),
    ]
    api = grpc.aio if aio else grpc
    if tls is None or tls is False:
        return api.insecure_channel(address, options=options)
    if tls is True:
        tls = TLS()
    if not isinstance(tls, TLS):
        raise InvalidArgument(f"tls: expected None, True or sm.TLS(...), got "
                              f"{tls!r}")
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    return api.secure_channel(address, tls.credentials(), options=options)
