#!/usr/bin/env bash
# Installs everything shardmap needs to build and test, from Debian's
# packages only. Safe to run again: apt-get skips what is already there.
# Usage: scripts/setup.sh [--build-only]   (--build-only: just what the three
# binaries need to compile, as deploy/Dockerfile's build stage uses it)
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libeigen3-dev libspdlog-dev libfmt-dev libcli11-dev
  nlohmann-json3-dev
  libzip-dev zlib1g-dev libxxhash-dev prometheus-cpp-dev
  # The compiler cache scripts/build.sh and deploy/Dockerfile's build share.
  ccache
)
if [[ "${1:-}" != "--build-only" ]]; then
  PACKAGES+=(libgtest-dev libgmock-dev libbenchmark-dev python3 python3-numpy
             python3-grpcio python3-protobuf iproute2 nftables)
  # Deploy manifests (docker-compose config, YAML), fuzzing (libFuzzer),
  # test certificates.
  PACKAGES+=(docker-compose python3-yaml clang-14 libclang-rt-14-dev openssl)
  # The compose test (tests/system/compose_test.py): the image built and the
  # cluster brought up with podman; SHARDMAP_COMPOSE=0 leaves them out.
  if [[ "${SHARDMAP_COMPOSE:-1}" != 0 ]]; then
    # netavark sets up the compose network with the iptables command.
    PACKAGES+=(podman podman-compose runc netavark aardvark-dns iptables
               debootstrap)
  fi
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done

if ((${#missing[@]})); then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  echo "setup: installing ${missing[*]}" >&2
  log=$(mktemp)
  if ! { $SUDO apt-get update -qq &&
         DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
           --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "setup: apt-get failed" >&2
    exit 1
  fi
  rm -f "$log"
fi
