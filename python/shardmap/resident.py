"""Handles of resident arrays: arrays that live on the workers."""
from shardmap import wire
from shardmap.spec import Mesh, spec_from_proto


class ResidentArray:
    """A named array on the workers (from cluster.put, ls, put_tree...).

    Passed to a shard_map'ed function it is used where it lives (only its
    name travels); np.asarray(handle) or handle.get() fetches it.
    """

    def __init__(self, cluster, info):
        self.cluster = cluster
        self.name = info.name
        self.dtype = wire.dtype_of(info.header, f"array '{info.name}'")
        self.shape = tuple(info.header.shape)
        self.mesh = Mesh.from_proto(info.mesh, cluster)
        self.spec = spec_from_proto(info.spec)
        self.version = info.version
        self.lost = info.lost
        self.nbytes = info.bytes
        self.worker_ids = list(info.worker_ids)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def sharding(self):
        """(mesh, spec), as a jax.Array's NamedSharding holds them."""
        return self.mesh, self.spec

    def get(self, timeout=None):
        return self.cluster.get(self, timeout)

    def delete(self, timeout=None):
        self.cluster.delete(self.name, timeout)

    def __array__(self, dtype=None, copy=None):
        arr = self.get()
        return arr if dtype is None else arr.astype(dtype)

    def __repr__(self):
        lost = ", LOST" if self.lost else ""
        return (f"ResidentArray('{self.name}', {self.dtype.name}"
                f"{list(self.shape)}, {self.mesh!r}, {self.spec!r}, "
                f"version={self.version}{lost})")
