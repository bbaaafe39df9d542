"""shard_map as JAX spells it, run on a shardmap cluster.

    f = sm.shard_map("mlp_tp", mesh=mesh, in_specs=(P(), P(None, "model"),
                     P("model", None)), out_specs=P(), axes="model")
    y = f(x, w1, w2)                      # numpy in, numpy out

    @sm.shard_map(mesh=mesh, in_specs=P("i"), out_specs=P())
    def total(x):                         # sent as a program, not run here
        return jax.lax.psum(x.sum(), "i")

`f` is a built-in function's or registered program's name, a program's
text ("lambda x: ..." or "def f(x): ..."), or a Python function written in
the program language (its source is sent). Keyword arguments beyond
shard_map's own are the function's static keyword arguments (also
kwargs={...} for names that clash with shard_map's). Arguments are numpy
arrays (or anything np.asarray takes), resident array handles (used where
they live), or flat tuples/lists of these; in_specs is one P for all, or
one per argument (a P for all leaves of a tuple argument, or a tuple of
them). None as a spec means the whole argument on every device.
"""
import functools
import json
import re

from shardmap import client as client_lib
from shardmap import wire
from shardmap.errors import InvalidArgument
from shardmap.mesh_context import get_mesh
from shardmap.resident import ResidentArray
from shardmap.source import program_source
from shardmap.spec import Mesh, P, spec_to_proto
from shardmap.v1 import common_pb2
from shardmap.v1 import coordinator_pb2 as pb


class ShapeDtypeStruct:
    """An array's shape and dtype without its data (as jax's)."""

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = wire.np.dtype(dtype)

    def __repr__(self):
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"

    def __eq__(self, other):
        return (isinstance(other, ShapeDtypeStruct) and
                (self.shape, self.dtype) == (other.shape, other.dtype))


def _is_spec(s):
    return s is None or isinstance(s, P)


def shard_map(f=None, *, mesh=None, in_specs, out_specs, check_rep=None,
              check_vma=None, state=None, kwargs=None, timeout=None,
              **static_kwargs):
    """shard_map(f, mesh=..., in_specs=..., out_specs=...) on the cluster.

    check_rep=False or check_vma=False turns off the check that outputs
    are replicated over the axes their out_specs leave out, as in JAX.
    state={slot: handle, or (name, P)} binds a function's state slots
    (brainstate State) to resident arrays. timeout= bounds each call
    (seconds; default: the cluster's job_timeout). mesh=None takes the
    mesh of the enclosing `with sm.set_mesh(mesh):` when called (or, with
    none, the mesh of the resident arrays passed).
    """
    def wrap(func):
        return ShardMapped(func, mesh, in_specs, out_specs,
                           check_rep is False or check_vma is False,
                           state or {}, {**(kwargs or {}), **static_kwargs},
                           timeout)
    return wrap if f is None else wrap(f)


class ShardMapped:
    """A function under shard_map: call it, lower it, eval_shape it."""

    def __init__(self, func, mesh, in_specs, out_specs, no_check_rep, state,
                 kwargs, timeout):
        if mesh is not None and not isinstance(mesh, Mesh):
            raise InvalidArgument(f"mesh: expected shardmap.Mesh, got "
                                  f"{mesh!r}")
        template = pb.JobSpec(no_check_rep=no_check_rep)
        if isinstance(func, str):
            text = func.strip()
            if re.match(r"(lambda\b|def\s)", text):
                template.program = text
            else:
                template.function = text
            self.__name__ = text if template.function else "<program>"
        elif callable(func):
            template.program = program_source(func)
            functools.update_wrapper(self, func)
        else:
            raise InvalidArgument(f"shard_map: f must be a function name, a "
                                  f"program's text or a Python function, "
                                  f"got {func!r}")
        if not (_is_spec(out_specs) or (
                isinstance(out_specs, (tuple, list)) and
                all(_is_spec(s) for s in out_specs))):
            raise InvalidArgument(
                f"out_specs: expected a P, or a tuple of them (one per "
                f"output), got {out_specs!r}")
        for s in ([out_specs] if _is_spec(out_specs) else out_specs):
            template.out_specs.append(spec_to_proto(s, "out_specs"))
        if kwargs:
            template.kwargs_json = json.dumps(kwargs)
        for slot, binding in state.items():
            template.states.append(_state_binding(slot, binding))
        self.mesh, self.in_specs, self.out_specs = mesh, in_specs, out_specs
        self.timeout = timeout
        self._template = template.SerializeToString()

    @property
    def program(self):
        """The program's source sent to the coordinator ("" for a name)."""
        return pb.JobSpec.FromString(self._template).program

    def _spec(self, args, for_plan):
        """(JobSpec, wire arrays or None per flattened argument)."""
        spec = pb.JobSpec.FromString(self._template)
        leaves = _flatten(args, self.in_specs)
        mesh = self._mesh_now()
        if mesh is not None:
            spec.mesh.CopyFrom(mesh.to_proto())
        elif not any(isinstance(v, ResidentArray) for v, _ in leaves):
            raise InvalidArgument(
                "The context mesh cannot be empty. Use `sm.set_mesh(mesh)` "
                "to enter into a mesh context, or pass mesh= to shard_map "
                "(or resident arrays, whose mesh is then used)")
        if _is_spec(self.in_specs):
            spec.in_specs.append(spec_to_proto(self.in_specs, "in_specs"))
        arrays = []
        for i, (value, leaf_spec) in enumerate(leaves):
            if not _is_spec(self.in_specs):
                spec.in_specs.append(
                    spec_to_proto(leaf_spec, f"in_specs[{i}]"))
            if isinstance(value, ResidentArray):
                spec.args.append(common_pb2.ArrayHeader())
                spec.resident_args.append(value.name)
                arrays.append(None)
                continue
            spec.resident_args.append("")
            if for_plan and isinstance(value, ShapeDtypeStruct):
                header = wire.header_of(value.dtype, value.shape)
            else:
                arr = wire.as_wire_array(value, f"args[{i}]")
                header = wire.header_of(arr.dtype, arr.shape)
                arrays.append(arr)
            spec.args.append(header)
        if not any(spec.resident_args):
            del spec.resident_args[:]
        return spec, arrays

    def _mesh_now(self):
        """The explicit mesh, else the set_mesh context's (or None)."""
        return self.mesh if self.mesh is not None else get_mesh()

    def _cluster(self):
        mesh = self._mesh_now()
        return (mesh.cluster if mesh is not None else None) or \
            client_lib.current_cluster()

    def _shape_result(self, values):
        if _is_spec(self.out_specs) and len(values) == 1:
            return values[0]
        return list(values) if isinstance(self.out_specs, list) \
            else tuple(values)

    def __call__(self, *args):
        spec, arrays = self._spec(args, for_plan=False)
        _, outputs = self._cluster().run_job(spec, arrays, self.timeout)
        return self._shape_result(outputs)

    def lower(self, *args):
        """Plans the call without running it (the Plan RPC): a Lowered.
        Arguments may be ShapeDtypeStructs."""
        spec, _ = self._spec(args, for_plan=True)
        plan = self._cluster().plan(spec)
        return Lowered(plan, self)

    def eval_shape(self, *args):
        return self.lower(*args).out_info


def _state_binding(slot, binding):
    if isinstance(binding, ResidentArray):
        name, spec = binding.name, binding.spec
    elif isinstance(binding, str):
        name, spec = binding, P()
    elif isinstance(binding, (tuple, list)) and len(binding) == 2:
        name, spec = binding
        name = name.name if isinstance(name, ResidentArray) else name
    else:
        raise InvalidArgument(
            f"state['{slot}']: expected a resident array handle, its name, "
            f"or (name, P(...)), got {binding!r}")
    return pb.StateBinding(slot=slot, name=name,
                           spec=spec_to_proto(spec, f"state['{slot}']"))


def _flatten(args, in_specs):
    """[(leaf, its spec)]: tuple/list arguments flattened one level."""
    if not _is_spec(in_specs):
        if not isinstance(in_specs, (tuple, list)) or \
                len(in_specs) != len(args):
            raise InvalidArgument(
                f"in_specs: {len(args)} arguments but in_specs is "
                f"{in_specs!r}; give one spec per argument, or one P for all")
    out = []
    for i, arg in enumerate(args):
        spec = in_specs if _is_spec(in_specs) else in_specs[i]
        if isinstance(arg, (tuple, list)):
            if _is_spec(spec):
                out.extend((leaf, spec) for leaf in arg)
            elif isinstance(spec, (tuple, list)) and len(spec) == len(arg) \
                    and all(_is_spec(s) for s in spec):
                out.extend(zip(arg, spec))
            else:
                raise InvalidArgument(
                    f"in_specs[{i}]: argument {i} is a sequence of "
                    f"{len(arg)} arrays; give one P for all of them or a "
                    f"tuple of {len(arg)}, got {spec!r}")
        elif _is_spec(spec):
            out.append((arg, spec))
        else:
            raise InvalidArgument(f"in_specs[{i}]: expected a P or None, got "
                                  f"{spec!r}")
    return out


class Lowered:
    """A planned call (JAX's Lowered/Compiled in one): shapes, costs and
    the picture of which device holds which block."""

    def __init__(self, plan, fn=None):
        self.plan = plan  # the PlanResponse
        self._fn = fn

    @property
    def out_info(self):
        """ShapeDtypeStruct of each output (None: known only when run)."""
        values = []
        for o in self.plan.outputs:
            header = getattr(o, "global")  # a Python keyword
            # Unknown before it runs (a native function without a shape
            # function): None.
            values.append(ShapeDtypeStruct(header.shape,
                                           wire.dtype_of(header, o.role))
                          if header.dtype else None)
        return self._fn._shape_result(values) if self._fn else tuple(values)

    def cost_analysis(self):
        """Per device: flops, bytes moved by collectives, by the scatter
        of arguments and the gather of outputs (-1: unknown)."""
        p = self.plan
        return {"flops": p.flops_per_device,
                "collective_bytes_sent": p.collective_bytes_sent,
                "collective_bytes_received": p.collective_bytes_received,
                "scatter_bytes": p.scatter_bytes_per_device,
                "gather_bytes": p.gather_bytes_per_device}

    def memory_analysis(self):
        """Per device: the largest bytes alive at once (-1: unknown)."""
        return {"peak_bytes": self.plan.peak_bytes_per_device}

    def as_text(self):
        return self.plan.text

    def __str__(self):
        return self.plan.text


def eval_shape(f, *args):
    """Output shapes and dtypes of f(*args) without running it."""
    return f.eval_shape(*args)


def visualize_sharding(x, *args, file=None):
    """Prints which device holds which block, as `shardctl plan` does: of
    a Lowered, of f(*args) for a shard_map'ed f, or of a resident array."""
    if isinstance(x, ResidentArray):
        # The picture of the array as an argument: the plan's inputs part.
        text = shard_map("identity", mesh=x.mesh, in_specs=x.spec,
                         out_specs=x.spec).lower(x).as_text()
        lines = text.splitlines()
        start = next((i for i, l in enumerate(lines) if l == "inputs"), 0)
        end = next((i for i in range(start + 1, len(lines))
                    if lines[i] and not lines[i].startswith(" ")), len(lines))
        print(f"{x.name} on {x.mesh!r}", *lines[start + 1:end], sep="\n",
              file=file)
        return
    if isinstance(x, ShardMapped):
        x = x.lower(*args)
    if not isinstance(x, Lowered):
        raise InvalidArgument(f"visualize_sharding: expected a Lowered, a "
                              f"shard_map'ed function or a resident array, "
                              f"got {x!r}")
    print(x.as_text(), end="" if x.as_text().endswith("\n") else "\n",
          file=file)
