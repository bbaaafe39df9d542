"""Generates the gRPC stubs (shardmap/v1/*_pb2*.py) from the repository's
proto/ into the build, with grpcio-tools when it is installed, else with
protoc and grpc_python_plugin (Debian: protobuf-compiler-grpc).
SHARDMAP_PROTO_DIR overrides where the .proto files are (default ../proto).
"""
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = ["shardmap/v1/common.proto", "shardmap/v1/coordinator.proto"]


def generate(out_dir):
    proto_dir = os.environ.get("SHARDMAP_PROTO_DIR",
                               os.path.join(HERE, "..", "proto"))
    if not os.path.isfile(os.path.join(proto_dir, PROTOS[1])):
        sys.exit(f"shardmap: no {PROTOS[1]} under {proto_dir}; build from "
                 f"the repository (pip install ./python) or set "
                 f"SHARDMAP_PROTO_DIR")
    args = ["-I" + proto_dir, "--python_out=" + out_dir,
            "--grpc_python_out=" + out_dir] + PROTOS
    try:
        from grpc_tools import protoc
        include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
        if protoc.main(["protoc", "-I" + include] + args) != 0:
            sys.exit("shardmap: grpc_tools.protoc failed")
    except ImportError:
        plugin = shutil.which("grpc_python_plugin")
        if not shutil.which("protoc") or not plugin:
            sys.exit("shardmap: generating the stubs needs grpcio-tools, or "
                     "protoc and grpc_python_plugin (protobuf-compiler-grpc)")
        subprocess.run(["protoc", "--plugin=protoc-gen-grpc_python=" + plugin]
                       + args, check=True, cwd=proto_dir)
    open(os.path.join(out_dir, "shardmap", "v1", "__init__.py"), "a").close()


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        os.makedirs(os.path.join(self.build_lib, "shardmap", "v1"),
                    exist_ok=True)
        generate(os.path.abspath(self.build_lib))


setup(cmdclass={"build_py": BuildWithStubs})
