#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang-14 (coverage, ASan,
# UBSan) into build-fuzz/ and runs each for SECONDS (default 15), starting
# from its seeds in fuzz/corpus/<target>/. New inputs go to
# build-fuzz/corpus/<target>/; a crash leaves its input in
# build-fuzz/crashes/ and fails the script (turn it into a unit test).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
#   (targets: spec_mesh npy job_spec kwargs manifest program)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
seconds=${1:-15}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(spec_mesh npy job_spec kwargs manifest program)

launcher=()
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
# -O1 and line tables: the usual sanitizer build, a sixth faster to compile.
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHARDMAP_BUILD_TESTS=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DSHARDMAP_FUZZ=ON "${launcher[@]}" >/dev/null
echo "building fuzz targets (log: build-fuzz/build.log)..." >&2
if ! ninja -C build-fuzz -j"$(nproc)" "${targets[@]/%/_fuzzer}" \
    >build-fuzz/build.log 2>&1; then
  tail -50 build-fuzz/build.log >&2
  exit 1
fi

failed=()
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t" build-fuzz/crashes
  log="build-fuzz/$t.log"
  echo "fuzz: $t for ${seconds}s (log: $log)" >&2
  # kwargs' seeds nest 75,000 levels deep (150 KB): keep them whole.
  max_len=4096
  [[ $t == kwargs ]] && max_len=262144
  if ! "build-fuzz/bin/${t}_fuzzer" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -max_len="$max_len" -print_final_stats=1 \
      -artifact_prefix="build-fuzz/crashes/$t-" \
      "build-fuzz/corpus/$t" "fuzz/corpus/$t" >"$log" 2>&1; then
    tail -40 "$log" >&2
    failed+=("$t")
  fi
  grep -E "^stat::number_of_executed_units|^Done" "$log" | tr '\n' ' ' >&2 || true
  echo >&2
done
if ((${#failed[@]})); then
  echo "fuzz: crashed: ${failed[*]} (inputs in build-fuzz/crashes/)" >&2
fi
echo "fuzz: $((${#targets[@]} - ${#failed[@]})) passed, ${#failed[@]} failed"
((${#failed[@]} == 0))
