#!/usr/bin/env bash
# Installs, builds and runs the whole test suite: unit tests (GoogleTest)
# and system tests (real processes on 127.0.0.1 checked against numpy).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
