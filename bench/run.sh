#!/usr/bin/env bash
# bench/run.sh: shardmap's collectives and jobs against OpenMPI, Gloo and a
# bare gRPC stream, measured in the same run, interleaved (shardmap, then
# its references, then shardmap again ...), on loopback only; and
# expression programs (issue 13) against the same computation written
# natively (program_bench: a fused elementwise chain, an MLP body); and the
# built-in functions' kernels through the worker's call path (builtin_bench:
# add, mul, scale, relu, sum, matmul at sizes where compute shows); and a
# worker's peak RSS over in-place updates of a 128 MiB resident array,
# copied and donated (donation_rss.py); and the README's training step
# (linear_sgd_step, data resident) through the C++ client beside the same
# step in-process (train_bench).
#
#   bash bench/run.sh            # full: every size, 5 repetitions (~6 min)
#   bash bench/run.sh --quick    # fewer sizes and iterations, 3 repetitions
#                                # (~2 min)
#   (the first run also installs packages and builds: add ~5-10 min)
#   options: --repeats N  --out DIR  --no-install  --threads (in-process
#            workers instead of one process per worker)
#
# Installs what it needs with apt-get when missing (the project's packages
# through scripts/setup.sh, plus openmpi-bin libopenmpi-dev libgloo-dev
# iproute2), builds the shardmap benchmarks with CMake into ${BUILD_DIR:-build}
# and the MPI/Gloo drivers with mpicxx/g++ into $BUILD_DIR/bench-ref, then
# prints one markdown table (also written to $OUT/report.md; raw lines in
# $OUT/results.txt, per-step logs in $OUT/logs/).
#
# Network: every server binds 127.0.0.1 (gRPC, Gloo); Open MPI listens on the
# wildcard address, so each mpirun runs in a private network namespace
# (unshare --net) holding only its own loopback. Every step has a timeout,
# and the processes a step started are killed with it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
[[ $BUILD == /* ]] || BUILD=$ROOT/$BUILD
QUICK=0
REPEATS=""
OUT=""
INSTALL=1
MODE=procs
while (($#)); do
  case $1 in
    --quick) QUICK=1 ;;
    --repeats) REPEATS=$2; shift ;;
    --out) OUT=$2; shift ;;
    --no-install) INSTALL=0 ;;
    --threads) MODE=threads ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 64 ;;
  esac
  shift
done

# ---------------------------------------------------------------- settings
KiB=1024; MiB=$((1024 * 1024))
if ((QUICK)); then
  REPEATS=${REPEATS:-3}
  SCALE=0.25                       # iterations 50/13/9/3, not 200/50/20/5
  ALL="4,$((4 * KiB)),$((256 * KiB)),$((4 * MiB)),$((64 * MiB))"
  declare -A PSUM_SIZES=([2]=$ALL [4]=$ALL [8]="4,$((4 * KiB)),$((4 * MiB))")
  GATHER_SIZES="$((4 * MiB)),$((64 * MiB))"
  GRPC_ARGS=(--push-iters 3 --duplex-iters 2 --rtt-iters 1000 --seconds 1.5)
  JOB_ARGS=(--tiny-iters 200 --seconds 2 --big-iters 1)
  TRAIN_ARGS=(--steps 50)
  PROGRAM_ARGS=(--benchmark_repetitions=3 --benchmark_min_time=0.05)
  PYTHON_ARGS=(--tiny-iters 200 --big-iters 1)
else
  REPEATS=${REPEATS:-5}
  SCALE=1
  ALL="4,$((4 * KiB)),$((256 * KiB)),$((4 * MiB)),$((64 * MiB))"
  declare -A PSUM_SIZES=([2]=$ALL [4]=$ALL [8]=$ALL)
  GATHER_SIZES="$((4 * MiB)),$((64 * MiB))"
  GRPC_ARGS=(--push-iters 5 --duplex-iters 3 --rtt-iters 5000 --seconds 3)
  JOB_ARGS=(--tiny-iters 500 --seconds 3 --big-iters 2)
  TRAIN_ARGS=(--steps 200)
  PROGRAM_ARGS=(--benchmark_repetitions=5 --benchmark_min_time=0.5)
  PYTHON_ARGS=(--tiny-iters 500 --big-iters 2)
fi
WORKER_COUNTS=(2 4 8)
# shardmap's collectives over both of its transports between co-located
# workers: gRPC (--no-shm, impl=shardmap) and shared memory (the default,
# impl=shardmap-shm).
declare -A SHM_FLAG=([grpc]=--no-shm [shm]=)
GATHER_N=4
PERMUTE_NS=(2 4)
PERMUTE_SIZE=$((64 * MiB))
STEP_TIMEOUT=600                   # seconds, any one step
OUT=${OUT:-$BUILD/bench-results/$(date +%Y%m%d-%H%M%S)$( ((QUICK)) && echo -quick)}
mkdir -p "$OUT/logs" "$OUT/tmp"
export TMPDIR=$OUT/tmp               # rendezvous files; removed at exit
RESULTS=$OUT/results.txt
: >"$RESULTS"
START=$(date +%s)
say() { echo "[$(($(date +%s) - START))s] $*" >&2; }

# ------------------------------------------------------- process cleanup
# Steps run in the background so a signal reaches this script at once;
# `timeout` puts each step in its own process group and kills the group.
STEP_PIDS=()
cleanup() {
  local p
  for p in "${STEP_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 0.5
  for p in "${STEP_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$OUT/tmp"
}
trap cleanup EXIT
trap 'echo "run.sh: interrupted" >&2; exit 130' INT TERM

# ------------------------------------------------------------- packages
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
missing_packages() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
      || echo "$p"
  done
}
if ((INSTALL)); then
  say "checking packages"
  timeout 1800 bash "$ROOT/scripts/setup.sh"
  mapfile -t need < <(missing_packages openmpi-bin libopenmpi-dev libgloo-dev iproute2 util-linux)
  if ((${#need[@]})); then
    say "installing ${need[*]}"
    # as_root is a shell function, so it wraps timeout (timeout cannot run
    # a function); env carries DEBIAN_FRONTEND through sudo.
    if ! { as_root timeout 600 apt-get update -qq &&
           as_root env DEBIAN_FRONTEND=noninteractive timeout 1200 apt-get \
             install -y -qq --no-install-recommends "${need[@]}"; } \
         >"$OUT/logs/apt.log" 2>&1; then
      tail -20 "$OUT/logs/apt.log" >&2
      echo "run.sh: apt-get failed (log: $OUT/logs/apt.log)" >&2
      exit 1
    fi
  fi
fi

# ---------------------------------------------------------------- build
say "building (log: $OUT/logs/build.log)"
{
  if [[ ! -f $BUILD/CMakeCache.txt ]]; then
    gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
    timeout 600 cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  fi
  timeout 3600 cmake --build "$BUILD" -j"$(nproc)" --target \
    collective_bench job_bench train_bench grpc_stream_bench tuned_stream_bench exchange_bench psum_bench program_bench builtin_bench \
    shardmap-coordinator shardmap-worker shardctl python_client
} >"$OUT/logs/build.log" 2>&1 || {
  tail -30 "$OUT/logs/build.log" >&2
  echo "run.sh: build failed (log: $OUT/logs/build.log)" >&2
  exit 1
}
BIN=$BUILD/bin
REF=$BUILD/bench-ref
mkdir -p "$REF"
HAVE_MPI=0; HAVE_GLOO=0
if command -v mpicxx >/dev/null; then
  if [[ ! -x $REF/mpi_bench || $ROOT/bench/ref/mpi_bench.cc -nt $REF/mpi_bench ]]; then
    timeout 300 mpicxx -O2 -std=c++17 -o "$REF/mpi_bench" "$ROOT/bench/ref/mpi_bench.cc" -I "$ROOT" \
      >>"$OUT/logs/build.log" 2>&1 || echo "run.sh: mpi_bench did not build" >&2
  fi
  [[ -x $REF/mpi_bench ]] && HAVE_MPI=1
fi
if [[ -f /usr/include/gloo/allreduce.h ]]; then
  if [[ ! -x $REF/gloo_bench || $ROOT/bench/ref/gloo_bench.cc -nt $REF/gloo_bench ]]; then
    timeout 300 g++ -O2 -std=c++17 -o "$REF/gloo_bench" "$ROOT/bench/ref/gloo_bench.cc" -I "$ROOT" \
      -lgloo -pthread >>"$OUT/logs/build.log" 2>&1 || echo "run.sh: gloo_bench did not build" >&2
  fi
  [[ -x $REF/gloo_bench ]] && HAVE_GLOO=1
fi
# mpirun only ever runs inside a private network namespace.
if ((HAVE_MPI)) && ! timeout 20 unshare --net sh -c 'ip link set lo up' >/dev/null 2>&1; then
  echo "run.sh: cannot create a private network namespace (unshare --net):" \
       "skipping the MPI references" >&2
  HAVE_MPI=0
fi
((HAVE_MPI)) || echo "run.sh: no OpenMPI driver: MPI rows will be missing" >&2
((HAVE_GLOO)) || echo "run.sh: no Gloo driver: Gloo rows will be missing" >&2

# ------------------------------------------------------------- metadata
pkgver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo none; }
{
  echo "META mode=$( ((QUICK)) && echo quick || echo full) repeats=$REPEATS"
  echo "META machine=$(nproc)_vCPU,_$(free -g | awk '/Mem:/{print $2}')_GiB;_N=4_and_N=8_oversubscribed_(2x,_4x)"
  echo "META shardmap_workers=$( [[ $MODE == procs ]] && echo one_process_each || echo threads_of_one_process)"
  echo "META commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo +local_changes)"
  echo "META versions=openmpi_$(pkgver libopenmpi-dev),_gloo_$(pkgver libgloo-dev),_grpc_$(pkgver libgrpc++-dev)"
  echo "META iterations=scale_${SCALE}_of_200/50/20/5_(<=64KiB/256KiB/4MiB/64MiB),_3_minimum_(9_up_to_4MiB)"
} >>"$RESULTS"

# ---------------------------------------------------------------- steps
FAILED=0
# step REP NAME TIMEOUT CMD...: runs CMD bounded, tags its RESULT lines.
step() {
  local rep=$1 name=$2 limit=$3 rc=0
  shift 3
  local log=$OUT/logs/$name.rep$rep.log
  timeout -k 5 "$limit" "$@" >"$log.out" 2>"$log" </dev/null &
  STEP_PIDS=($!)
  wait "${STEP_PIDS[0]}" || rc=$?
  STEP_PIDS=()
  sed -n "s/^RESULT /RESULT rep=$rep /p" "$log.out" >>"$RESULTS"
  cat "$log.out" >>"$log"; rm -f "$log.out"
  if ((rc != 0)); then
    FAILED=1
    echo "FAIL rep=$rep step=$name rc=$rc" >>"$RESULTS"
    echo "run.sh: $name (rep $rep) failed with exit $rc; log $log:" >&2
    tail -5 "$log" >&2
  fi
  return 0
}
in_netns() { unshare --net sh -c 'ip link set lo up && exec "$@"' sh "$@"; }
mpi() {  # mpi LABEL(mpi-tcp|mpi-shm) NP OP SIZES
  local label=$1 np=$2; shift 2
  unset TMPDIR  # Open MPI's session directory where it is by default
  local btl=()
  [[ $label == mpi-tcp ]] && btl=(--mca btl tcp,self --mca btl_tcp_if_include lo)
  in_netns mpirun --allow-run-as-root --oversubscribe --mca oob_tcp_if_include lo \
    "${btl[@]}" -np "$np" "$REF/mpi_bench" "$label" "$@" "$SCALE"
}
gloo() {  # gloo N SIZES: one process per rank, FileStore rendezvous
  local n=$1 sizes=$2 dir rc=0 r
  dir=$(mktemp -d "$TMPDIR/gloo_bench.XXXXXX")
  local pids=()
  for ((r = 0; r < n; r++)); do
    "$REF/gloo_bench" "$r" "$n" "$dir" "$sizes" "$SCALE" >"$dir/out.$r" &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || rc=1; done
  cat "$dir/out.0"
  rm -rf "$dir"
  return $rc
}
export -f in_netns mpi gloo
export REF SCALE

say "results: $OUT ($REPEATS repetitions, $( ((QUICK)) && echo quick || echo full) mode)"
for ((rep = 1; rep <= REPEATS; rep++)); do
  for n in "${WORKER_COUNTS[@]}"; do
    sizes=${PSUM_SIZES[$n]}
    say "rep $rep/$REPEATS: psum / allreduce, N=$n"
    for t in grpc shm; do
      step "$rep" "psum_${t}_n$n" "$STEP_TIMEOUT" "$BIN/collective_bench" --op psum \
        --workers "$n" --sizes "$sizes" --scale "$SCALE" --mode "$MODE" \
        --timeout $((STEP_TIMEOUT - 10)) ${SHM_FLAG[$t]}
    done
    if ((HAVE_MPI)); then
      step "$rep" "mpi-tcp_allreduce_n$n" "$STEP_TIMEOUT" bash -c 'mpi "$@"' _ mpi-tcp "$n" allreduce "$sizes"
      step "$rep" "mpi-shm_allreduce_n$n" "$STEP_TIMEOUT" bash -c 'mpi "$@"' _ mpi-shm "$n" allreduce "$sizes"
    fi
    if ((HAVE_GLOO)); then
      step "$rep" "gloo_allreduce_n$n" "$STEP_TIMEOUT" bash -c 'gloo "$@"' _ "$n" "$sizes"
    fi
  done
  say "rep $rep/$REPEATS: all_gather, N=$GATHER_N"
  for t in grpc shm; do
    step "$rep" "all_gather_${t}_n$GATHER_N" "$STEP_TIMEOUT" "$BIN/collective_bench" --op all_gather \
      --workers "$GATHER_N" --sizes "$GATHER_SIZES" --scale "$SCALE" --mode "$MODE" \
      --timeout $((STEP_TIMEOUT - 10)) ${SHM_FLAG[$t]}
  done
  if ((HAVE_MPI)); then
    step "$rep" "mpi-tcp_allgather_n$GATHER_N" "$STEP_TIMEOUT" bash -c 'mpi "$@"' _ mpi-tcp "$GATHER_N" allgather "$GATHER_SIZES"
    step "$rep" "mpi-shm_allgather_n$GATHER_N" "$STEP_TIMEOUT" bash -c 'mpi "$@"' _ mpi-shm "$GATHER_N" allgather "$GATHER_SIZES"
  fi
  for n in "${PERMUTE_NS[@]}"; do
    say "rep $rep/$REPEATS: ppermute (cyclic shift), N=$n"
    for t in grpc shm; do
      step "$rep" "ppermute_${t}_n$n" "$STEP_TIMEOUT" "$BIN/collective_bench" --op ppermute \
        --workers "$n" --sizes "$PERMUTE_SIZE" --scale "$SCALE" --mode "$MODE" \
        --timeout $((STEP_TIMEOUT - 10)) ${SHM_FLAG[$t]}
    done
    if ((HAVE_MPI)); then
      step "$rep" "mpi-tcp_sendrecv_n$n" "$STEP_TIMEOUT" bash -c 'mpi "$@"' _ mpi-tcp "$n" sendrecv "$PERMUTE_SIZE"
      step "$rep" "mpi-shm_sendrecv_n$n" "$STEP_TIMEOUT" bash -c 'mpi "$@"' _ mpi-shm "$n" sendrecv "$PERMUTE_SIZE"
    fi
  done
  say "rep $rep/$REPEATS: bare gRPC stream"
  step "$rep" "grpc_stream" "$STEP_TIMEOUT" "$BIN/grpc_stream_bench" "${GRPC_ARGS[@]}"
  say "rep $rep/$REPEATS: tuned gRPC stream (the ceiling)"
  step "$rep" "tuned_stream" "$STEP_TIMEOUT" "$BIN/tuned_stream_bench" --iters 3
  say "rep $rep/$REPEATS: gRPC's floor for an 8-byte exchange (the 4 B psum's step)"
  step "$rep" "grpc_exchange" "$STEP_TIMEOUT" "$BIN/exchange_bench" --iters 2000
  say "rep $rep/$REPEATS: end-to-end jobs"
  step "$rep" "jobs" "$STEP_TIMEOUT" "$BIN/job_bench" --workers 4 --clients 8 \
    "${JOB_ARGS[@]}" --timeout $((STEP_TIMEOUT - 10))
  say "rep $rep/$REPEATS: the README's training step, cluster vs in-process"
  step "$rep" "train" "$STEP_TIMEOUT" "$BIN/train_bench" --workers 4 \
    "${TRAIN_ARGS[@]}" --timeout $((STEP_TIMEOUT - 10))
  # Right after the C++ client's jobs, on the same kind of cluster.
  say "rep $rep/$REPEATS: the Python client"
  step "$rep" "python_client" "$STEP_TIMEOUT" /usr/bin/python3 \
    "$ROOT/bench/python_client_bench.py" --no-cpp --reps 1 --workers 4 \
    --bin-dir "$BIN" "${PYTHON_ARGS[@]}"
  say "rep $rep/$REPEATS: expression programs vs native code"
  step "$rep" "programs" "$STEP_TIMEOUT" "$BIN/program_bench" "${PROGRAM_ARGS[@]}"
  step "$rep" "builtins" "$STEP_TIMEOUT" "$BIN/builtin_bench" "${PROGRAM_ARGS[@]}"
  say "rep $rep/$REPEATS: a worker's peak memory, updates in place vs donated"
  step "$rep" "donation_rss" "$STEP_TIMEOUT" /usr/bin/python3 \
    "$ROOT/bench/donation_rss.py" --bin-dir "$BIN"
done

say "done; report: $OUT/report.md"
python3 "$ROOT/bench/report.py" "$RESULTS" | tee "$OUT/report.md"
echo >&2
say "total $(($(date +%s) - START)) s"
exit $FAILED
