#!/usr/bin/env bash
# Makes what a TLS shardmap deployment mounts: a private CA, one certificate
# for the coordinator and the workers (servers and, toward each other,
# clients: mTLS), a client certificate for shardctl, and a bearer token.
#
#   deploy/make-certs.sh [OUT_DIR] [EXTRA_DNS_NAME...]    # default deploy/certs
#
# OUT_DIR gets ca.crt ca.key shardmap.crt shardmap.key client.crt client.key
# token. The server certificate names localhost, 127.0.0.1, the
# docker-compose services (coordinator, worker0..worker3) and the Kubernetes
# Services of deploy/k8s (shardmap, shardmap-registry, *.shardmap-workers, in
# namespace shardmap); add more names as arguments. Existing files are kept:
# delete OUT_DIR to make new ones. Uses only the openssl CLI.
#
# Run it with sudo: the containers' user (uid 10001) then owns shardmap.key
# and token, and you own the client files (shardctl needs no sudo).
set -euo pipefail
out=${1:-$(dirname "$0")/certs}
shift || true
days=${SHARDMAP_CERT_DAYS:-365}
# The containers run as uid/gid 10001 (deploy/Dockerfile).
uid=10001

mkdir -p "$out"
cd "$out"
if [[ -e ca.crt ]]; then
  echo "make-certs: $out/ca.crt exists; keeping the files in $out" >&2
  exit 0
fi

ns=shardmap
dns=(localhost coordinator worker0 worker1 worker2 worker3
     shardmap "shardmap.$ns" "shardmap.$ns.svc" "shardmap.$ns.svc.cluster.local"
     shardmap-registry "shardmap-registry.$ns" "shardmap-registry.$ns.svc"
     "shardmap-registry.$ns.svc.cluster.local"
     "*.shardmap-workers" "*.shardmap-workers.$ns.svc"
     "*.shardmap-workers.$ns.svc.cluster.local" "$@")
san="IP:127.0.0.1"
for d in "${dns[@]}"; do san+=",DNS:$d"; done

umask 077
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key ca.key
openssl req -x509 -new -key ca.key -sha256 -days "$days" \
  -subj "/CN=shardmap CA" -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" -out ca.crt

# sign NAME CN EXTENDED_KEY_USAGE [SAN]
sign() {
  local name=$1 cn=$2 eku=$3 alt=${4:-}
  key "$name.key"
  openssl req -new -key "$name.key" -subj "/CN=$cn" -out "$name.csr"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [[ -n "$alt" ]] && echo "subjectAltName=$alt"
  } >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
    -sha256 -days "$days" -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}
sign shardmap shardmap serverAuth,clientAuth "$san"
sign client shardctl clientAuth
rm -f ca.srl
openssl rand -hex 32 >token

# What the containers read must be readable by their user: owned by it when
# we can (root), else readable by all (fine for a local docker-compose try,
# not for a shared machine). Run as root through sudo, the client's files
# (client.crt, client.key, ca.crt) and the directory go to the invoking
# user and the token is readable by that user's group too, so shardctl
# works without sudo; ca.key stays root's.
chmod 0644 ca.crt shardmap.crt client.crt
if [[ $(id -u) -eq 0 ]]; then
  chown "$uid:$uid" shardmap.key token
  chmod 0400 shardmap.key token
  if [[ -n "${SUDO_UID:-}" && "${SUDO_UID}" != 0 ]]; then
    gid=${SUDO_GID:-$SUDO_UID}
    chown "$SUDO_UID:$gid" . ca.crt client.crt client.key
    chgrp "$gid" token
    chmod 0440 token
  fi
else
  chmod 0644 shardmap.key token
  echo "make-certs: not root, so shardmap.key and token are world-readable" \
    "(the containers run as uid $uid); keep $out private" >&2
fi
echo "make-certs: wrote CA, certificates and token to $out" >&2
