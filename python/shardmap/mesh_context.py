"""The mesh context, as JAX's jax.sharding.set_mesh / use_mesh:

    with sm.set_mesh(sm.Mesh({"x": 2, "y": 2})):
        f = sm.shard_map(fn, in_specs=P("x"), out_specs=P("x"))  # mesh=None
        y = f(x)

shard_map(mesh=None) takes the innermost context's mesh when it is called;
an explicit mesh= wins. The context is per thread (and per asyncio task).
"""
import contextlib
import contextvars

from shardmap.errors import InvalidArgument
from shardmap.spec import Mesh

_MESH = contextvars.ContextVar("shardmap_context_mesh", default=None)


@contextlib.contextmanager
def set_mesh(mesh):
    """Makes `mesh` the default mesh of shard_map inside the with block."""
    if not isinstance(mesh, Mesh):
        raise InvalidArgument(f"set_mesh: expected shardmap.Mesh, got "
                              f"{mesh!r}")
    token = _MESH.set(mesh)
    try:
        yield mesh
    finally:
        _MESH.reset(token)


def get_mesh():
    """The innermost set_mesh's mesh, or None outside any."""
    return _MESH.get()
