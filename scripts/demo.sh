#!/usr/bin/env bash
# Installs, builds, then runs a real job on a local cluster of 4 worker
# processes: a matmul with x split by rows over 'data' and w split by
# columns over 'model', each worker computing one block of x @ w, the
# blocks reassembled by the out spec, and the result checked with numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(0)
np.save(f"{d}/x.npy", rng.standard_normal((8, 6)).astype(np.float32))
np.save(f"{d}/w.npy", rng.standard_normal((6, 4)).astype(np.float32))
np.save(f"{d}/w1.npy", rng.standard_normal((6, 16)).astype(np.float32))
np.save(f"{d}/w2.npy", rng.standard_normal((16, 5)).astype(np.float32))
PY
echo "\$ shardctl run --local 4 --mesh data=2,model=2 --fn matmul \\
    --arg x.npy --in-spec \"P('data', None)\" \\
    --arg w.npy --in-spec \"P(None, 'model')\" \\
    --out y.npy --out-spec \"P('data', 'model')\""
build/bin/shardctl run --local 4 --mesh data=2,model=2 --fn matmul \
  --arg "$work/x.npy" --in-spec "P('data', None)" \
  --arg "$work/w.npy" --in-spec "P(None, 'model')" \
  --out "$work/y.npy" --out-spec "P('data', 'model')"
/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np
d = sys.argv[1]
x, w, y = (np.load(f"{d}/{n}.npy") for n in "xwy")
np.set_printoptions(precision=4, suppress=True)
print("y = x @ w, computed in 4 blocks by 4 worker processes:")
print(y)
err = np.abs(y - x @ w).max()
print(f"max |y - numpy(x @ w)| = {err:.2e}")
sys.exit(0 if err < 1e-5 else 1)
PY

# The same cluster shape running your own function: an expression program
# (flax nnx's tensor-parallel MLP), checked like a JAX trace, then run.
echo
echo "\$ shardctl run --local 4 --mesh data=2,model=2 \\
    --expr 'lambda x, w1, w2: psum(relu(x @ w1) @ w2, \"model\")' \\
    --arg x.npy --arg w1.npy --arg w2.npy --in-spec \"P('data', None)\" \\
    --in-spec \"P(None, 'model')\" --in-spec \"P('model', None)\" \\
    --out h.npy --out-spec \"P('data', None)\""
build/bin/shardctl run --local 4 --mesh data=2,model=2 \
  --expr 'lambda x, w1, w2: psum(relu(x @ w1) @ w2, "model")' \
  --arg "$work/x.npy" --arg "$work/w1.npy" --arg "$work/w2.npy" \
  --in-spec "P('data', None)" --in-spec "P(None, 'model')" \
  --in-spec "P('model', None)" --out "$work/h.npy" --out-spec "P('data', None)"
/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np
d = sys.argv[1]
x, w1, w2, h = (np.load(f"{d}/{n}.npy") for n in ("x", "w1", "w2", "h"))
err = np.abs(h - np.maximum(x @ w1, 0) @ w2).max()
print(f"max |h - numpy(relu(x @ w1) @ w2)| = {err:.2e}")
sys.exit(0 if err < 1e-4 else 1)
PY
