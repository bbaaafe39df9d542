#!/usr/bin/env bash
# Installs, builds and runs the whole test suite: clang's check of the
# thread-safety annotations, unit tests (GoogleTest) and system tests (real
# processes on 127.0.0.1 checked against numpy), then the fuzz targets for
# a few seconds each.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
# clang's thread-safety analysis over every source (syntax only, a few
# minutes): a guarded member touched without its lock fails the run.
bash scripts/thread_safety.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
# The libFuzzer targets (fuzz/), briefly: SHARDMAP_FUZZ_SECONDS per target
# (default 15; 0 skips them).
if [[ "${SHARDMAP_FUZZ_SECONDS:-15}" != 0 ]]; then
  bash scripts/fuzz.sh "${SHARDMAP_FUZZ_SECONDS:-15}"
fi
