#!/usr/bin/env bash
# Trains a linear regression data-parallel on a local cluster, with the
# data and the weights resident on the workers: each step ships only the
# step's kwargs, and prints the loss the workers computed. Then compares
# the trained weights with numpy's least-squares solution.
#   bash scripts/train_example.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-300}
bin=build/bin
[[ -x $bin/shardctl ]] || bash scripts/build.sh
work=$(mktemp -d)
$bin/shardctl up --workers 4 --listen 127.0.0.1:0 >"$work/address" 2>/dev/null &
cluster=$!
trap 'kill $cluster 2>/dev/null; wait $cluster 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [[ -s $work/address ]] && break; sleep 0.1; done
c=(--coordinator "$(head -1 "$work/address")")

/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(0)
x = rng.standard_normal((1024, 4))
y = x @ np.array([2.0, -1.0, 0.5, 3.0]) - 1.0 + 0.1 * rng.standard_normal(1024)
np.save(f"{d}/x.npy", x); np.save(f"{d}/y.npy", y)
np.save(f"{d}/params.npy", np.zeros(5))
PY
$bin/shardctl put data/x "$work/x.npy" --mesh data=4 --spec "P('data')" "${c[@]}"
$bin/shardctl put data/y "$work/y.npy" --mesh data=4 --spec "P('data')" "${c[@]}"
$bin/shardctl put model/params "$work/params.npy" --mesh data=4 --spec "P()" "${c[@]}"

start=$EPOCHREALTIME
for step in $(seq 1 "$steps"); do
  loss=$($bin/shardctl run --mesh data=4 --fn linear_sgd_step \
    --arg @data/x --arg @data/y --in-spec "P('data')" --out-spec "P()" \
    --state params=model/params --kwargs '{"lr": 0.05, "axes": "data"}' \
    "${c[@]}" 2>/dev/null)
  if (( step <= 2 || step == 5 || step == 10 || step == 20 || step % 100 == 0 )); then
    echo "step $step: loss ${loss//[\[\]]/}"
  fi
done
end=$EPOCHREALTIME
/usr/bin/python3 -c "print(f'$steps steps in {$end - $start:.1f} s, {($end - $start) / $steps * 1e3:.1f} ms a step')"

$bin/shardctl get model/params --out "$work/trained.npy" "${c[@]}" 2>/dev/null
/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np
d = sys.argv[1]
x, y, p = (np.load(f"{d}/{n}.npy") for n in ("x", "y", "trained"))
want, *_ = np.linalg.lstsq(np.c_[x, np.ones(len(x))], y, rcond=None)
np.set_printoptions(precision=4, suppress=True)
print("trained params:      ", p)
print("numpy least squares: ", want)
print(f"max difference {np.abs(p - want).max():.2e}")
PY
