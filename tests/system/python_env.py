"""The Python client for the system tests, imported from the build tree
(build/python, next to SHARDMAP_BIN_DIR = build/bin). A suite sets
`setUpModule = python_env.check`: it is skipped (exit 77) when the
python_client target was not built. LocalClusterCase gives a test class
one local cluster of 4 workers (`cluster`, meshes `mesh` a=2,b=2 and
`line` i=4, and a scratch directory `tmp`).
"""
import os
import sys
import tempfile
import unittest

import harness

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
    harness.BIN)), "python"))
try:
    import shardmap as sm
    from shardmap import P
    IMPORT_ERROR = None
except ImportError as e:  # the python_client target was not built
    sm = P = None
    IMPORT_ERROR = e


def check():
    if sm is None:
        raise unittest.SkipTest(
            f"cannot import shardmap from build/python ({IMPORT_ERROR}): "
            f"build the python_client target (needs grpc_python_plugin)")


class LocalClusterCase(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = sm.local(4, bin_dir=harness.BIN)
        cls.mesh = cls.cluster.mesh(a=2, b=2)
        cls.line = cls.cluster.mesh(i=4)
        cls.tmp = tempfile.TemporaryDirectory(prefix="shardmap-python-")

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()
        cls.tmp.cleanup()
