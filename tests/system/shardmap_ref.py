"""An independent numpy reference of JAX's shard_map, for the system tests.

Written from JAX's documented semantics (docs/SEMANTICS.md), not from
shardmap's C++ code: split every argument by its in_spec (a tuple entry is
row-major over its axes in the order written), apply the function to each
device's blocks, and assemble each output by its out_spec (mentioned axes
concatenate, unmentioned axes take the copy at coordinate 0).
"""
import itertools
import re

import numpy as np


def parse_mesh(text):
    axes = []
    for part in text.split(","):
        name, size = part.split("=")
        axes.append((name.strip(), int(size)))
    return axes


def parse_spec(text):
    """P('x', None) -> [['x'], []]; None -> None (unsplit)."""
    text = text.strip()
    if text == "None":
        return None
    inner = re.fullmatch(r"(?:P|PartitionSpec)\((.*)\)", text).group(1)
    entries, depth, current = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            entries.append(current)
            current = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        current += ch
    if current.strip():
        entries.append(current)
    spec = []
    for e in entries:
        names = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", e)
        spec.append([n for n in names if n != "None"])
    return spec


def devices(mesh):
    """Mesh coordinates in device-id (row-major) order."""
    return list(itertools.product(*[range(size) for _, size in mesh]))


def block_index(mesh, entry, coords):
    names = [n for n, _ in mesh]
    sizes = dict(mesh)
    idx = 0
    for axis in entry:
        idx = idx * sizes[axis] + coords[names.index(axis)]
    return idx


def split(x, mesh, spec, coords):
    if spec is None:
        return x
    sizes = dict(mesh)
    slices = []
    for d, entry in enumerate(spec):
        n = int(np.prod([sizes[a] for a in entry])) if entry else 1
        b = x.shape[d] // n
        i = block_index(mesh, entry, coords)
        slices.append(slice(i * b, (i + 1) * b))
    return x[tuple(slices)]


def assemble(blocks, mesh, spec):
    """blocks: one array per device, in device order."""
    names = [n for n, _ in mesh]
    sizes = dict(mesh)
    mentioned = {a for e in spec for a in e}
    block = blocks[0]
    counts = [1] * block.ndim
    for d, entry in enumerate(spec):
        counts[d] = int(np.prod([sizes[a] for a in entry])) if entry else 1
    out = np.zeros([b * c for b, c in zip(block.shape, counts)], block.dtype)
    for coords, blk in zip(devices(mesh), blocks):
        if any(coords[names.index(a)] != 0 for a in names if a not in mentioned):
            continue
        slices = []
        for d in range(block.ndim):
            entry = spec[d] if d < len(spec) else []
            i = block_index(mesh, entry, coords)
            slices.append(slice(i * block.shape[d], (i + 1) * block.shape[d]))
        out[tuple(slices)] = blk
    return out


def shard_map(f, mesh, in_specs, out_spec, args):
    if len(in_specs) == 1:
        in_specs = in_specs * len(args)
    blocks = []
    for coords in devices(mesh):
        blocks.append(f(*[split(a, mesh, s, coords) for a, s in zip(args, in_specs)]))
    return assemble(blocks, mesh, out_spec)


def scale(x, alpha):
    # As in JAX: an int array times a Python float is floating.
    if np.issubdtype(x.dtype, np.integer) and isinstance(alpha, float):
        return (x.astype(np.float64) * alpha).astype(
            np.float32 if x.dtype == np.int32 else np.float64)
    if np.issubdtype(x.dtype, np.integer):
        return (x * np.asarray(int(alpha), x.dtype)).astype(x.dtype)
    return (x * np.asarray(alpha, x.dtype)).astype(x.dtype)


FUNCTIONS = {
    "identity": lambda x: x,
    "add": lambda x, y: x + y,
    "mul": lambda x, y: x * y,
    "relu": lambda x: np.maximum(x, np.zeros((), x.dtype)),
    "matmul": lambda a, b: a @ b,
}


def reference(fn, kwargs):
    if fn == "scale":
        return lambda x: scale(x, kwargs["alpha"])
    if fn == "sum":
        axis = kwargs.get("axis")
        axis = tuple(axis) if isinstance(axis, list) else axis
        keep = kwargs.get("keepdims", False)
        return lambda x: np.sum(x, axis=axis, keepdims=keep).astype(x.dtype)
    return FUNCTIONS[fn]


# --- Collectives, simulated over every device's block at once -----------
#
# `blocks` is the list of every device's array, in device order; each
# function returns the list of every device's result, per jax.lax.

def group_of(mesh, coords, axes):
    """Devices sharing coords on the other axes, in group-rank order
    (row-major over `axes` as given), and this device's rank."""
    names = [n for n, _ in mesh]
    sizes = dict(mesh)
    members = []
    for idx in itertools.product(*[range(sizes[a]) for a in axes]):
        c = list(coords)
        for a, i in zip(axes, idx):
            c[names.index(a)] = i
        members.append(devices(mesh).index(tuple(c)))
    rank = 0
    for a in axes:
        rank = rank * sizes[a] + coords[names.index(a)]
    return members, rank


def per_device(mesh, axes, blocks, fn):
    out = []
    for coords in devices(mesh):
        members, rank = group_of(mesh, coords, axes)
        out.append(fn([blocks[m] for m in members], rank))
    return out


def c_psum(mesh, axes, blocks):
    return per_device(mesh, axes, blocks, lambda g, r: sum(g[1:], g[0].copy()))


def c_pmax(mesh, axes, blocks):
    return per_device(mesh, axes, blocks, lambda g, r: np.max(np.stack(g), 0))


def c_pmin(mesh, axes, blocks):
    return per_device(mesh, axes, blocks, lambda g, r: np.min(np.stack(g), 0))


def c_pmean(mesh, axes, blocks):
    def mean(g, r):
        s = sum(g[1:], g[0].copy())
        if s.dtype == np.int64:  # the float of the integer's width
            return s.astype(np.float64) / np.float64(len(g))
        if np.issubdtype(s.dtype, np.integer):
            return (s.astype(np.float32) / np.float32(len(g))).astype(np.float32)
        return s / s.dtype.type(len(g))
    return per_device(mesh, axes, blocks, mean)


def c_all_gather(mesh, axes, blocks, axis=0, tiled=False):
    if tiled:
        return per_device(mesh, axes, blocks,
                          lambda g, r: np.concatenate(g, axis=axis))
    return per_device(mesh, axes, blocks, lambda g, r: np.stack(g, axis=axis))


def c_psum_scatter(mesh, axes, blocks, scatter_dimension=0, tiled=False):
    def scatter(g, r):
        total = sum(g[1:], g[0].copy())
        parts = np.split(total, len(g), axis=scatter_dimension)
        part = parts[r]
        return part if tiled else np.squeeze(part, axis=scatter_dimension)
    return per_device(mesh, axes, blocks, scatter)


def c_ppermute(mesh, axes, blocks, perm):
    def permute(g, r):
        for src, dst in perm:
            if dst == r:
                return g[src].copy()
        return np.zeros_like(g[r])
    return per_device(mesh, axes, blocks, permute)


def c_all_to_all(mesh, axes, blocks, split_axis, concat_axis, tiled=False):
    def exchange(g, r):
        n = len(g)
        chunks = [np.split(x, n, axis=split_axis)[r] for x in g]
        if tiled:
            return np.concatenate(chunks, axis=concat_axis)
        chunks = [np.squeeze(c, axis=split_axis) for c in chunks]
        return np.stack(chunks, axis=concat_axis)
    return per_device(mesh, axes, blocks, exchange)


def c_axis_index(mesh, axes, blocks):
    return per_device(mesh, axes, blocks,
                      lambda g, r: np.array([r], dtype=np.int32))


def shard_map_collective(collective, mesh, in_spec, out_spec, x, **kw):
    """shard_map(lambda b: collective(b, **kw), in_specs=in_spec,
    out_specs=out_spec)(x), for the collectives above."""
    blocks = [split(x, mesh, in_spec, c) for c in devices(mesh)]
    return assemble(collective(mesh, kw.pop("axes"), blocks, **kw), mesh,
                    out_spec)
