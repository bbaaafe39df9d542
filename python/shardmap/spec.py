"""PartitionSpec (P) and Mesh, as JAX names them, and their protos."""
import ast

from shardmap.errors import InvalidArgument
from shardmap.v1 import common_pb2


class P(tuple):
    """JAX's PartitionSpec: one entry per leading array dimension.

    An entry is None (not split), an axis name, or a tuple of axis names
    (split over all of them, the first major). P() is replicated.
    """

    def __new__(cls, *entries):
        for e in entries:
            _check_entry(e)
        return super().__new__(cls, entries)

    def __repr__(self):
        return "P(" + ", ".join(repr(e) for e in self) + ")"

    def axes(self):
        """Every axis name the spec mentions, in order."""
        out = []
        for e in self:
            out.extend([e] if isinstance(e, str) else (e or ()))
        return out


PartitionSpec = P


def _check_entry(e):
    if e is None or isinstance(e, str):
        return
    if isinstance(e, (tuple, list)) and all(isinstance(a, str) for a in e):
        return
    raise InvalidArgument(
        f"a PartitionSpec entry must be None, an axis name or a tuple of "
        f"axis names, got {e!r}")


def spec_to_proto(spec, what):
    """A P, or None for 'the whole argument on every device'."""
    out = common_pb2.PartitionSpec()
    if spec is None:
        out.unsplit = True
        return out
    if not isinstance(spec, P):
        raise InvalidArgument(
            f"{what}: expected a PartitionSpec P(...) or None, got {spec!r}")
    for e in spec:
        entry = out.entries.add()
        if isinstance(e, str):
            entry.axes.append(e)
        elif e is not None:
            entry.axes.extend(e)
    return out


def spec_from_proto(proto):
    if proto.unsplit:
        return None
    entries = []
    for e in proto.entries:
        axes = list(e.axes)
        entries.append(None if not axes else
                       axes[0] if len(axes) == 1 else tuple(axes))
    return P(*entries)


def parse_spec(text, what="spec"):
    """P from its text: "P('data', None)", "P()", "None" (= P())."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        node = None
    if isinstance(node, ast.Constant) and node.value is None:
        return P()
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and
            node.func.id in ("P", "PartitionSpec") and not node.keywords):
        try:
            return P(*(ast.literal_eval(a) for a in node.args))
        except (ValueError, InvalidArgument):
            pass
    raise InvalidArgument(
        f"{what}: malformed PartitionSpec {text!r}: expected e.g. "
        f"P('data', None) or P()")


class Mesh:
    """A named device mesh: Mesh((2, 2), ("data", "model")).

    Device id = row-major index over the axes in this order. A mesh made
    by cluster.mesh(...) runs its functions on that cluster; one made
    directly runs them on the current cluster (the last one connected).
    """

    def __init__(self, shape, axis_names, cluster=None):
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        if isinstance(shape, int):
            shape = (shape,)
        shape, axis_names = tuple(shape), tuple(axis_names)
        if len(shape) != len(axis_names) or not shape:
            raise InvalidArgument(
                f"mesh: {len(shape)} sizes for {len(axis_names)} axis names "
                f"{axis_names!r}; give one size per name")
        for n, s in zip(axis_names, shape):
            if not isinstance(n, str) or not n:
                raise InvalidArgument(f"mesh: bad axis name {n!r}")
            if not isinstance(s, int) or s < 1:
                raise InvalidArgument(
                    f"mesh: axis '{n}' needs a positive size, got {s!r}")
        if len(set(axis_names)) != len(axis_names):
            raise InvalidArgument(f"mesh: repeated axis name in {axis_names}")
        self.axis_names = axis_names
        self.axis_sizes = shape
        self.cluster = cluster

    @property
    def shape(self):
        """{axis name: size}, in mesh order (as JAX's Mesh.shape)."""
        return dict(zip(self.axis_names, self.axis_sizes))

    @property
    def size(self):
        n = 1
        for s in self.axis_sizes:
            n *= s
        return n

    def __repr__(self):
        axes = ", ".join(f"{n}={s}" for n, s in self.shape.items())
        return f"Mesh({axes})"

    def __eq__(self, other):
        return (isinstance(other, Mesh) and self.axis_names == other.axis_names
                and self.axis_sizes == other.axis_sizes)

    def __hash__(self):
        return hash((self.axis_names, self.axis_sizes))

    def to_proto(self):
        out = common_pb2.Mesh()
        for n, s in zip(self.axis_names, self.axis_sizes):
            out.axes.add(name=n, size=s)
        return out

    @staticmethod
    def from_proto(proto, cluster=None):
        return Mesh(tuple(a.size for a in proto.axes),
                    tuple(a.name for a in proto.axes), cluster)
