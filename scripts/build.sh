#!/usr/bin/env bash
# Installs the dependencies (Debian packages) and builds shardmap into
# build/. Usage: scripts/build.sh [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
launcher=()
# ccache, when present, lets several checkouts share compiled objects.
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$PWD")}"
  # The test command fills the cache with two builds (g++ and clang) and
  # the image build reads it: ccache's default 5 GB evicts between runs.
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-12G}"
  # With -g ccache hashes the build directory too, so a second checkout (CI's
  # clean clone) would miss every object; the cost is that debug info may
  # name the other checkout's directory.
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" "$@" >/dev/null
echo "building shardmap (log: build/build.log)..." >&2
if ! ninja -C build -j"$(nproc)" >build/build.log 2>&1; then
  tail -50 build/build.log >&2
  exit 1
fi
