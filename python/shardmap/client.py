"""A connection to a shardmap coordinator: jobs, resident arrays, programs.

    cluster = shardmap.connect("127.0.0.1:7070")   # or shardmap.local(4)
    cluster.put("w", w, cluster.mesh(model=4), P(None, "model"))
    cluster.get("w"); cluster.ls(); cluster.delete("w")

Every call has a deadline (timeout= in seconds, else the cluster's
default) and raises a shardmap.Error subclass on failure. A call that
fails with UNAVAILABLE is sent again (up to `retries` times, within its
deadline) when that is safe: it reads only, or it writes resident arrays
and carries an idempotency key (call_id), which every job that writes
gets here. Thread-safe: one Cluster may serve several threads.
"""
import secrets
import threading
import time

import grpc

from shardmap import channel as channel_lib
from shardmap import errors, wire
from shardmap.jobstream import JobStreams
from shardmap.resident import ResidentArray
from shardmap.spec import Mesh, P, spec_to_proto
from shardmap.v1 import common_pb2
from shardmap.v1 import coordinator_pb2 as pb
from shardmap.v1 import coordinator_pb2_grpc as pb_grpc

_current_lock = threading.Lock()
_current = []  # open clusters, the current one last


def current_cluster():
    """The cluster a Mesh made without one runs on: the last opened."""
    with _current_lock:
        if not _current:
            raise errors.FailedPrecondition(
                "no shardmap cluster: call shardmap.connect(...) or "
                "shardmap.local(n) first, or make the mesh with cluster.mesh()")
        return _current[-1]


class Cluster:
    """A coordinator's client. Use connect() or local() to make one."""

    def __init__(self, address, token=None, token_file=None, tls=None,
                 timeout=30.0, job_timeout=600.0, retries=2):
        self.address = address
        self.timeout = timeout
        self.job_timeout = job_timeout
        self.retries = retries
        token = channel_lib.find_token(address, token, token_file)
        self._metadata = (("authorization", "Bearer " + token),) if token \
            else ()
        self._channel = channel_lib.make_channel(address, tls)
        self._stub = pb_grpc.CoordinatorStub(self._channel)
        self._jobs = JobStreams(address, tls, self._metadata, self._channel)
        self._closed = False
        with _current_lock:
            _current.append(self)

    # ------------------------------------------------------------ lifetime
    def close(self):
        """Closes the channel; the cluster is no longer the current one."""
        with _current_lock:
            if self in _current:
                _current.remove(self)
        if not self._closed:
            self._closed = True
            self._jobs.close()
            self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<shardmap.Cluster {self.address}>"

    def mesh(self, **axes):
        """Mesh on this cluster: cluster.mesh(data=2, model=2)."""
        return Mesh(tuple(axes.values()), tuple(axes.keys()), cluster=self)

    # --------------------------------------------------------- unary calls
    def _unary(self, method, request, timeout=None, retry=True):
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        return self._retrying(
            retry, deadline,
            lambda: method(request, timeout=max(0.0, deadline -
                                                 time.monotonic()),
                           metadata=self._metadata))

    def _retrying(self, safe, deadline, attempt):
        backoff = 0.2
        for tries in range(self.retries + 1):
            try:
                return attempt()
            except grpc.RpcError as e:
                err = errors.from_rpc_error(e)
            if (not isinstance(err, errors.Unavailable) or not safe or
                    tries >= self.retries or
                    time.monotonic() + backoff >= deadline):
                raise err
            time.sleep(backoff)
            backoff = min(2 * backoff, 5.0)

    def status(self, timeout=None):
        """GetClusterStatus: live workers, jobs done, version."""
        return self._unary(self._stub.GetClusterStatus,
                           pb.ClusterStatusRequest(), timeout)

    def wait_for_workers(self, n, timeout=30.0):
        """Polls until `n` workers are live; DeadlineExceeded otherwise."""
        end = time.monotonic() + timeout
        live, last = 0, None
        while time.monotonic() < end:
            try:
                live = len(self.status(timeout=min(5.0, timeout)).workers)
                if live >= n:
                    return
            except errors.Error as e:
                last = e
            time.sleep(0.02)
        raise errors.DeadlineExceeded(
            f"waited {timeout:g} s for {n} workers; {live} registered" +
            (f" (last error: {last})" if last else ""))

    def functions(self, timeout=None):
        """Built-in functions and registered programs (FunctionSignature)."""
        return list(self._unary(self._stub.ListFunctions,
                                pb.ListFunctionsRequest(), timeout).functions)

    def register(self, name, program, replace=False, timeout=None):
        """Stores a program (its source text, or a Python function written
        in the program language) under `name`; returns its signature."""
        from shardmap.source import program_source
        source = program if isinstance(program, str) else \
            program_source(program)
        r = self._unary(self._stub.RegisterProgram, pb.RegisterProgramRequest(
            name=name, source=source, replace=replace), timeout, retry=replace)
        return r.function

    def unregister(self, name, timeout=None):
        self._unary(self._stub.UnregisterProgram,
                    pb.UnregisterProgramRequest(name=name), timeout,
                    retry=False)

    def plan(self, spec, timeout=None):
        """The Plan RPC for a JobSpec (argument headers only)."""
        return self._unary(self._stub.Plan, pb.PlanRequest(spec=spec), timeout)

    # ---------------------------------------------------- resident arrays
    def ls(self, prefix="", timeout=None):
        """The resident arrays whose names start with `prefix`."""
        r = self._unary(self._stub.ListArrays,
                        pb.ListArraysRequest(prefix=prefix), timeout)
        return [ResidentArray(self, info) for info in r.arrays]

    def info(self, name, timeout=None):
        """The resident array `name`; NotFound if there is none."""
        for a in self.ls(name, timeout):
            if a.name == name:
                return a
        raise errors.NotFound(f"no resident array named '{name}'")

    def put(self, name, array, mesh, spec=P(), overwrite=False,
            timeout=None, rules=None):
        """Stores `array` on the workers as `name`, split by `spec` over
        `mesh`; returns its handle (usable as a job argument). rules=
        (nnx-style filter rules, as put_tree's) instead of spec: the first
        rule matching `name` gives its spec."""
        if rules is not None:
            from shardmap.tree import match_rule, parse_rules
            _, spec = match_rule(parse_rules(rules), name)
        arr = wire.as_wire_array(array, f"put '{name}'")
        spec_proto = spec_to_proto(spec, f"put '{name}'")
        job = pb.JobSpec(function="identity", mesh=mesh.to_proto(),
                         args=[wire.header_of(arr.dtype, arr.shape)],
                         in_specs=[spec_proto], out_specs=[spec_proto],
                         resident_outputs=[name], overwrite=overwrite)
        self.run_job(job, [arr], timeout)
        return self.info(name, timeout)

    def get(self, name, timeout=None):
        """The resident array `name` as a numpy array."""
        info = name if isinstance(name, ResidentArray) else \
            self.info(name, timeout)
        spec = spec_to_proto(info.spec, "get")
        job = pb.JobSpec(function="identity", mesh=info.mesh.to_proto(),
                         args=[common_pb2.ArrayHeader()],
                         in_specs=[spec], out_specs=[spec],
                         resident_args=[info.name])
        _, outputs = self.run_job(job, [None], timeout)
        return outputs[0]

    def delete(self, name, timeout=None):
        """Deletes the resident array `name` (NotFound if there is none)."""
        name = name.name if isinstance(name, ResidentArray) else name
        request = pb.DeleteArrayRequest(name=name, call_id=secrets.token_hex(16))
        self._unary(self._stub.DeleteArray, request, timeout)

    def save(self, directory, timeout=600.0):
        """Checkpoints every resident array into `directory` (replaced
        atomically; reachable by the coordinator and every worker)."""
        r = self._unary(self._stub.SaveCheckpoint,
                        pb.CheckpointRequest(directory=directory), timeout)
        return [ResidentArray(self, info) for info in r.arrays]

    def restore(self, directory, timeout=600.0):
        """Restores the resident arrays saved in `directory`."""
        r = self._unary(self._stub.RestoreCheckpoint,
                        pb.CheckpointRequest(directory=directory), timeout)
        return [ResidentArray(self, info) for info in r.arrays]

    def put_tree(self, prefix, params, mesh, rules, overwrite=False,
                 timeout=None):
        """Puts every array of a nested dict under PREFIX/path, each split
        by the first rule whose filter matches its path (shardctl put-tree's
        rules); returns the same tree of handles."""
        from shardmap.tree import put_tree
        return put_tree(self, prefix, params, mesh, rules, overwrite, timeout)

    def get_tree(self, prefix, timeout=None):
        """Every resident array PREFIX/KEY as nested dicts of numpy arrays
        (the inverse of put_tree). NotFound when there are none."""
        from shardmap.tree import get_tree
        return get_tree(self, prefix, timeout)

    # --------------------------------------------------------------- jobs
    def run_job(self, spec, arrays, timeout=None):
        """Runs a JobSpec with `arrays` (one C-contiguous wire array per
        argument, None for a resident one). Returns (JobResult, outputs):
        one numpy array per output, None for a stored one."""
        timeout = self.job_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        writes = bool(spec.states) or any(spec.resident_outputs)
        if writes and not spec.call_id:
            spec.call_id = secrets.token_hex(16)
        return self._retrying(
            True, deadline,
            lambda: self._jobs.run(spec, arrays,
                                   max(0.0, deadline - time.monotonic())))
