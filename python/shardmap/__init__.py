"""shardmap: JAX's shard_map on a shardmap cluster, from Python.

    import numpy as np
    import shardmap as sm
    from shardmap import P

    cluster = sm.local(4)                 # or sm.connect("host:port")
    mesh = cluster.mesh(data=2, model=2)
    f = sm.shard_map("mlp_tp", mesh=mesh,
                     in_specs=(P(), P(None, "model"), P("model", None)),
                     out_specs=P(), axes="model")
    y = f(x, w1, w2)

Runtime dependencies: numpy, grpcio and protobuf (Debian: python3-numpy,
python3-grpcio, python3-protobuf). The gRPC stubs (shardmap.v1) are
generated from the repository's proto/ at build time.
"""
from shardmap.api import (Lowered, ShapeDtypeStruct, ShardMapped, eval_shape,
                          shard_map, visualize_sharding)
from shardmap.channel import TLS
from shardmap.client import Cluster, current_cluster
from shardmap.errors import (Aborted, AlreadyExists, Cancelled, DataLoss,
                             DeadlineExceeded, Error, FailedPrecondition,
                             Internal, InvalidArgument, NotFound, OutOfRange,
                             PermissionDenied, ResourceExhausted,
                             Unauthenticated, Unavailable, Unimplemented,
                             Unknown)
from shardmap.local import LocalCluster, local
from shardmap.mesh_context import get_mesh, set_mesh
from shardmap.resident import ResidentArray
from shardmap.spec import Mesh, P, PartitionSpec


def connect(address, token=None, tls=None, token_file=None, timeout=30.0,
            job_timeout=600.0, retries=2, check=True):
    """Connects to the coordinator at HOST:PORT.

    token: the bearer token (else token_file, $SHARDMAP_TOKEN, or the file
    `shardctl up` keeps for this address); tls: None (plaintext), True
    (the system's CA roots) or sm.TLS(ca=..., cert=..., key=...). timeout
    bounds each call but jobs, job_timeout each job (seconds). With check,
    asks the cluster's status once so a wrong address or token fails here.
    """
    cluster = Cluster(address, token=token, token_file=token_file, tls=tls,
                      timeout=timeout, job_timeout=job_timeout,
                      retries=retries)
    if check:
        try:
            cluster.status()
        except Error:
            cluster.close()
            raise
    return cluster


__all__ = [
    "Aborted", "AlreadyExists", "Cancelled", "Cluster", "DataLoss",
    "DeadlineExceeded", "Error", "FailedPrecondition", "Internal",
    "InvalidArgument", "LocalCluster", "Lowered", "Mesh", "NotFound",
    "OutOfRange", "P", "PartitionSpec", "PermissionDenied", "ResidentArray",
    "ResourceExhausted", "ShapeDtypeStruct", "ShardMapped", "TLS",
    "Unauthenticated", "Unavailable", "Unimplemented", "Unknown", "connect",
    "current_cluster", "eval_shape", "get_mesh", "local", "set_mesh",
    "shard_map",
    "visualize_sharding",
]
