"""The Python client (python/shardmap) against a real local cluster it
starts itself (shardmap.local): built-in functions and collectives against
an independent numpy reference (shardmap_ref.py), programs through the
decorator, flat tuple arguments, errors as typed exceptions, planning,
threads, a few hundred MiB bit-exact, mutual TLS, the hand-encoded chunks,
and the local cluster's lifetime. Resident arrays and state:
python_resident_test.py.

Environment: SHARDMAP_BIN_DIR = directory of the binaries; the package is
imported from the build tree (build/python, next to build/bin).
"""
import asyncio
import concurrent.futures
import os
import shutil
import socket
import sys
import tempfile
import unittest

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import python_env  # noqa: E402
import shardmap_ref as ref  # noqa: E402
from python_env import P, sm  # noqa: E402

setUpModule = python_env.check
RNG = np.random.default_rng(16)


def ref_spec(spec):
    """P('x', ('a', 'b'), None) -> shardmap_ref's [['x'], ['a', 'b'], []]."""
    if spec is None:
        return None
    return [[] if e is None else [e] if isinstance(e, str) else list(e)
            for e in spec]


def ref_mesh(mesh):
    return list(mesh.shape.items())


def expected(fn, mesh, in_specs, out_spec, args, kwargs=None):
    return ref.shard_map(ref.reference(fn, kwargs or {}), ref_mesh(mesh),
                         [ref_spec(s) for s in in_specs], ref_spec(out_spec),
                         args)


def expected_collective(name, mesh, in_spec, out_spec, x, **kw):
    return ref.shard_map_collective(getattr(ref, "c_" + name), ref_mesh(mesh),
                                    ref_spec(in_spec), ref_spec(out_spec), x,
                                    **kw)


class PythonClientTest(python_env.LocalClusterCase):

    def test_local_functions_against_numpy(self):
        x = RNG.standard_normal((8, 6)).astype(np.float32)
        y = RNG.standard_normal((8, 6)).astype(np.float32)
        i = RNG.integers(-50, 50, (8, 6)).astype(np.int32)
        cases = [
            ("identity", (x,), (P("a", "b"),), P("a", "b"), {}),
            ("add", (x, y), (P("a"), P("a")), P("a"), {}),
            ("mul", (x, y), (P(("a", "b")), P(("a", "b"))), P(("a", "b")),
             {}),
            ("relu", (x,), (P(None, "b"),), P(None, "b"), {}),
            ("scale", (i,), (P("b", "a"),), P("b", "a"), {"alpha": 2.5}),
            ("sum", (x,), (P("a"),), P("a"), {"axis": 1}),
            ("matmul", (x, y.T.copy()), (P("a"), P()), P("a"), {}),
        ]
        for fn, args, in_specs, out_spec, kwargs in cases:
            with self.subTest(fn=fn):
                f = sm.shard_map(fn, mesh=self.mesh, in_specs=in_specs,
                                 out_specs=out_spec, **kwargs)
                got = f(*args)
                want = expected(fn, self.mesh, in_specs, out_spec, args,
                                kwargs)
                self.assertEqual(got.dtype, want.dtype)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    def test_collectives_against_numpy(self):
        x = RNG.standard_normal((8, 4)).astype(np.float32)
        m = self.mesh
        cases = [
            ("psum", P("a", "b"), P(None, "b"), {"axes": "a"}),
            ("pmean", P(("a", "b")), P(), {"axes": ["a", "b"]}),
            ("pmax", P("b", "a"), P(None, "a"), {"axes": "b"}),
            ("pmin", P(("b", "a")), P(), {"axes": ["b", "a"]}),
            ("all_gather", P("a", "b"), P(None, "b"), {"axes": "a"}),
            ("all_gather", P("a"), P(), {"axes": "a", "axis": 1,
                                         "tiled": True}),
            ("psum_scatter", P(None, "b"), P("a", "b"),
             {"axes": "a", "tiled": True}),
            ("ppermute", P(("a", "b")), P(("a", "b")),
             {"axes": ["a", "b"], "perm": [[0, 1], [1, 2], [2, 3], [3, 0]]}),
            ("all_to_all", P("a"), P(None, "a"),
             {"axes": "a", "split_axis": 1, "concat_axis": 0, "tiled": True}),
        ]
        for name, in_spec, out_spec, kw in cases:
            with self.subTest(collective=name, kwargs=kw):
                f = sm.shard_map(name, mesh=m, in_specs=in_spec,
                                 out_specs=out_spec, check_rep=False, **kw)
                got = f(x)
                ref_kw = {k: (tuple(v) if k == "axes" and isinstance(v, list)
                              else v) for k, v in kw.items()}
                if "perm" in ref_kw:
                    ref_kw["perm"] = [tuple(p) for p in ref_kw["perm"]]
                want = expected_collective(name, m, in_spec, out_spec, x,
                                           **ref_kw)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        got = sm.shard_map("axis_index", mesh=m, in_specs=P(),
                           out_specs=P(("a", "b")), axes=["a", "b"])()
        np.testing.assert_array_equal(got, np.arange(4, dtype=np.int32))

    def test_mlp_tp_and_global_sum(self):
        x = RNG.standard_normal((4, 8)).astype(np.float32)
        w1 = RNG.standard_normal((8, 16)).astype(np.float32)
        w2 = RNG.standard_normal((16, 3)).astype(np.float32)
        mlp = sm.shard_map("mlp_tp", mesh=self.mesh,
                           in_specs=(P("a"), P(None, "b"), P("b", None)),
                           out_specs=P("a"), axes="b")
        np.testing.assert_allclose(mlp(x, w1, w2), np.maximum(x @ w1, 0) @ w2,
                                   rtol=1e-4, atol=1e-4)
        total = sm.shard_map("global_sum", mesh=self.line, in_specs=P("i"),
                             out_specs=P(), axes="i")
        np.testing.assert_allclose(total(x.reshape(-1)), [x.sum()],
                                   rtol=1e-5)

    def test_programs_through_the_decorator(self):
        x = RNG.standard_normal(16).astype(np.float32)

        @sm.shard_map(mesh=self.line, in_specs=P("i"), out_specs=P())
        def total(x):
            return jax.lax.psum(x.sum(), "i")  # noqa: F821 (a program)

        self.assertTrue(total.program.startswith("def total(x):"))
        np.testing.assert_allclose(total(x), x.sum(), rtol=1e-5)

        @sm.shard_map(mesh=self.mesh,
                      in_specs=(P("a", None), P(None, "b")),
                      out_specs=(P("a", "b"), P("a")))
        def two(x, w):
            y = x @ w
            return y, psum(y, "b").sum(axis=1)  # noqa: F821

        a = RNG.standard_normal((4, 6)).astype(np.float32)
        w = RNG.standard_normal((6, 8)).astype(np.float32)
        y, s = two(a, w)
        np.testing.assert_allclose(y, a @ w, rtol=1e-4, atol=1e-4)
        # psum over b of the column blocks of y, summed per row.
        np.testing.assert_allclose(s, (a @ w).sum(axis=1), rtol=1e-4,
                                   atol=1e-4)

        double = sm.shard_map(lambda v: v * 2, mesh=self.line,
                              in_specs=P("i"), out_specs=P("i"))
        self.assertEqual(double.program, "lambda v: v * 2")
        np.testing.assert_array_equal(double(np.arange(8)), 2 * np.arange(8))
        text = sm.shard_map("lambda v: pmax(v, 'i')", mesh=self.line,
                            in_specs=P("i"), out_specs=P())
        np.testing.assert_array_equal(text(np.arange(8.0)), [6.0, 7.0])

    def test_check_rep_as_in_jax(self):
        prog = "lambda v: v * 2"
        f = sm.shard_map(prog, mesh=self.line, in_specs=P("i"),
                         out_specs=P())
        with self.assertRaises(sm.InvalidArgument) as e:
            f(np.arange(8.0))
        self.assertIn("out_specs[0] is P()", e.exception.message)
        self.assertIn("'i'", e.exception.message)
        for kw in ({"check_rep": False}, {"check_vma": False}):
            g = sm.shard_map(prog, mesh=self.line, in_specs=P("i"),
                             out_specs=P(), **kw)
            np.testing.assert_array_equal(g(np.arange(8.0)), [0.0, 2.0])

    def test_flat_tuple_arguments_and_list_outputs(self):
        x, y = np.arange(8.0), np.arange(8.0) * 10
        add = sm.shard_map("add", mesh=self.line, in_specs=(P("i"),),
                           out_specs=[P("i")])
        out = add((x, y))
        self.assertIsInstance(out, list)
        np.testing.assert_array_equal(out[0], x + y)
        add2 = sm.shard_map("add", mesh=self.line,
                            in_specs=((P("i"), P()),), out_specs=P("i"))
        np.testing.assert_array_equal(add2((x, y[:2])), x + np.tile(y[:2], 4))
        with self.assertRaises(sm.InvalidArgument):
            add2((x, y, y))
        # As in JAX, a list is not a tuple: the prefix must match its type.
        with self.assertRaises(sm.InvalidArgument) as e:
            add2([x, y[:2]])
        self.assertIn("different types at key path\n    shard_map in_specs[0]",
                      e.exception.message)

    def test_errors_are_typed(self):
        x = np.arange(8.0)
        with self.assertRaises(sm.NotFound) as e:
            sm.shard_map("no_such_fn", mesh=self.line, in_specs=P("i"),
                         out_specs=P("i"))(x)
        self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)
        self.assertIn("no_such_fn", e.exception.message)
        self.assertIsInstance(e.exception, sm.Error)
        with self.assertRaises(sm.InvalidArgument) as e:
            sm.shard_map("identity", mesh=self.line, in_specs=P("zz"),
                         out_specs=P("zz"))(x)
        self.assertIn("zz", e.exception.message)
        with self.assertRaises(sm.InvalidArgument) as e:
            sm.shard_map("identity", mesh=self.line, in_specs=P("i"),
                         out_specs=P("i"))(x.astype(np.float16))
        self.assertIn("float16", str(e.exception))
        with self.assertRaises(sm.InvalidArgument) as e:
            sm.shard_map("lambda v: exp(v) @@ v", mesh=self.line,
                         in_specs=P("i"), out_specs=P("i"))(x)
        self.assertIn("^", e.exception.message)
        with self.assertRaises(sm.DeadlineExceeded):
            sm.shard_map("identity", mesh=self.line, in_specs=P("i"),
                         out_specs=P("i"), timeout=1e-6)(x)
        with self.assertRaises(sm.Unauthenticated):
            sm.connect(self.cluster.address, token="not-the-token")
        with socket.socket() as s:  # a port nothing listens on
            s.bind(("127.0.0.1", 0))
            closed = "127.0.0.1:%d" % s.getsockname()[1]
        with self.assertRaises(sm.Unavailable):
            sm.connect(closed, timeout=5)

    def test_plan_eval_shape_and_pictures(self):
        f = sm.shard_map("lambda x, w: psum(x @ w, 'b')", mesh=self.mesh,
                         in_specs=(P("a", "b"), P("b", None)),
                         out_specs=P("a", None))
        args = (sm.ShapeDtypeStruct((8, 6), np.float32),
                np.zeros((6, 5), np.float32))
        self.assertEqual(sm.eval_shape(f, *args),
                         sm.ShapeDtypeStruct((8, 5), np.float32))
        lowered = f.lower(*args)
        self.assertGreater(lowered.cost_analysis()["flops"], 0)
        self.assertGreater(lowered.memory_analysis()["peak_bytes"], 0)
        self.assertIn("args[0]", lowered.as_text())
        h = self.cluster.put("py/pic", np.zeros((4, 4)), self.mesh,
                             P("a", "b"))
        with tempfile.TemporaryFile("w+") as out:
            sm.visualize_sharding(h, file=out)
            out.seek(0)
            self.assertIn("py/pic", out.read())
        h.delete()

    def test_threads_and_a_running_event_loop(self):
        f = sm.shard_map("scale", mesh=self.line, in_specs=P("i"),
                         out_specs=P("i"), alpha=3)
        xs = [np.arange(8) + k for k in range(8)]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            outs = list(pool.map(f, xs))
        for x, y in zip(xs, outs):
            np.testing.assert_array_equal(y, 3 * x)

        async def inside():  # a running loop: the threaded channel
            return f(xs[0])
        np.testing.assert_array_equal(asyncio.run(inside()), 3 * xs[0])

    def test_a_big_array_round_trips_bit_exact(self):
        # About 200 MiB of random int64 bits, through both hops each way.
        x = RNG.integers(-(1 << 62), 1 << 62, 25 << 20, dtype=np.int64)
        f = sm.shard_map("identity", mesh=self.line, in_specs=P("i"),
                         out_specs=P("i"))
        y = f(x)
        self.assertEqual(y.dtype, np.int64)
        self.assertTrue(np.array_equal(x, y))


class TLSTest(unittest.TestCase):
    """sm.connect over mutual TLS with a token, with security_test.py's
    certificates (openssl at test time) and cluster."""

    def test_mutual_tls_and_token(self):
        import security_test as sec
        if shutil.which("openssl") is None:
            self.skipTest("no openssl")
        sec.TMP = tempfile.TemporaryDirectory(prefix="shardmap-python-tls-")
        self.addCleanup(sec.TMP.cleanup)
        sec.make_ca("ca")
        sec.make_cert("node", "ca",
                      "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE"
                      "\nextendedKeyUsage=serverAuth,clientAuth\n")
        cluster = sec.Cluster(1, sec.tls_flags(), sec.TOKEN)
        self.addCleanup(cluster.close)
        cert, key = sec.CERTS["node"]
        ca = os.path.join(sec.TMP.name, "ca.pem")
        c = sm.connect(cluster.address, token=sec.TOKEN,
                       tls=sm.TLS(ca=ca, cert=cert, key=key))
        self.addCleanup(c.close)
        c.wait_for_workers(1)
        f = sm.shard_map("scale", mesh=c.mesh(i=1), in_specs=P("i"),
                         out_specs=P("i"), alpha=2)
        np.testing.assert_array_equal(f(np.arange(4)), 2 * np.arange(4))
        with self.assertRaises(sm.Unauthenticated):
            sm.connect(cluster.address, token="wrong",
                       tls=sm.TLS(ca=ca, cert=cert, key=key))
        with self.assertRaises(sm.Unavailable):  # no client certificate
            sm.connect(cluster.address, token=sec.TOKEN, tls=sm.TLS(ca=ca),
                       timeout=5)
        with self.assertRaises(sm.InvalidArgument):
            sm.TLS(ca=ca, cert=cert)


class WireTest(unittest.TestCase):
    """The hand-encoded chunk messages against protobuf's own codec."""

    def test_chunks_match_protobuf(self):
        from shardmap import wire
        from shardmap.v1 import coordinator_pb2 as pb
        x = RNG.integers(-(1 << 31), 1 << 31, (wire.CHUNK_BYTES * 2 + 12) // 4,
                         dtype=np.int32)
        raw = x.view(np.uint8).reshape(-1)
        pieces = list(wire.chunk_requests(300, x))
        self.assertEqual(len(pieces), 3)
        offset = 0
        for piece in pieces:
            chunk = pb.RunJobRequest.FromString(piece).chunk
            self.assertEqual((chunk.index, chunk.offset), (300, offset))
            self.assertEqual(chunk.data, raw[offset:offset + len(chunk.data)]
                             .tobytes())
            offset += len(chunk.data)
            # The other way: the response decoder on protobuf's bytes.
            back = wire.decode_response(pb.RunJobResponse(
                chunk=chunk).SerializeToString())
            self.assertEqual((back.index, back.offset, bytes(back.data)),
                             (300, chunk.offset, chunk.data))
        self.assertEqual(offset, x.nbytes)
        result = wire.decode_response(pb.RunJobResponse(
            result=pb.JobResult(job_id="j")).SerializeToString())
        self.assertEqual(result.result.job_id, "j")


class LocalClusterTest(unittest.TestCase):

    def test_close_stops_the_cluster(self):
        with sm.local(1, bin_dir=harness.BIN) as c:
            address = c.address
            self.assertEqual(len(c.status().workers), 1)
        self.assertIsNotNone(c._proc.returncode)
        with self.assertRaises(sm.Unavailable):
            sm.connect(address, timeout=5)
        with self.assertRaises(sm.InvalidArgument):
            sm.local(0, bin_dir=harness.BIN)


if __name__ == "__main__":
    harness.main()
