"""An independent numpy reference of JAX's shard_map, for the system tests.

Written from JAX's documented semantics (../shared/SEMANTICS.md), not from
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
