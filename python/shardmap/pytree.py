"""Pytrees as JAX flattens them: tuples, lists, dicts with string keys
(flattened in sorted key order) and None (an empty subtree); anything else
is a leaf. Their structure travels as the proto's TreeNode beside the flat
leaves; the coordinator matches spec prefixes against it."""
from shardmap.errors import InvalidArgument
from shardmap.spec import P
from shardmap.v1 import common_pb2

Node = common_pb2.TreeNode


def flatten(value, what="args", spec_leaves=False):
    """(leaves, TreeNode) of `value`. With spec_leaves, P is a leaf (it is
    a tuple) and None is the None spec (a TREE_NONE with no leaf)."""
    leaves = []
    node = Node()
    _flatten(value, node, leaves, what, spec_leaves, 0)
    return leaves, node


def _flatten(value, node, leaves, what, spec_leaves, depth):
    if depth > 64:
        raise InvalidArgument(f"{what} is nested deeper than 64 levels")
    if value is None:
        node.kind = Node.TREE_NONE
    elif isinstance(value, P):
        node.kind = Node.TREE_LEAF
        leaves.append(value)
    elif isinstance(value, (tuple, list)):
        node.kind = Node.TREE_TUPLE if isinstance(value, tuple) \
            else Node.TREE_LIST
        for i, v in enumerate(value):
            _flatten(v, node.children.add(), leaves, f"{what}[{i}]",
                     spec_leaves, depth + 1)
    elif isinstance(value, dict):
        node.kind = Node.TREE_DICT
        for k in value:
            if not isinstance(k, str):
                raise InvalidArgument(
                    f"{what}: dict keys must be strings, got {k!r}")
        for k in sorted(value):
            node.keys.append(k)
            _flatten(value[k], node.children.add(), leaves, f"{what}[{k!r}]",
                     spec_leaves, depth + 1)
    else:
        if spec_leaves:
            raise InvalidArgument(
                f"shard_map in_specs argument must be a pytree of "
                f"`PartitionSpec` instances, but {what} is {value!r} of type "
                f"{type(value).__name__}")
        node.kind = Node.TREE_LEAF
        leaves.append(value)


def unflatten(node, leaves):
    """The value of TreeNode `node` with `leaves` (an iterator) in order."""
    it = iter(leaves)
    return _build(node, it)


def _build(node, it):
    if node.kind == Node.TREE_LEAF:
        return next(it)
    if node.kind == Node.TREE_NONE:
        return None
    children = [_build(c, it) for c in node.children]
    if node.kind == Node.TREE_DICT:
        return dict(zip(node.keys, children))
    return tuple(children) if node.kind == Node.TREE_TUPLE else children


def paths_to_tree(items):
    """{'a': {'b': leaf}} from [('a/b', leaf)]: the nested dicts of
    '/'-separated names (put_tree's and get_tree's convention)."""
    tree = {}
    for path, leaf in items:
        node = tree
        *parents, last = path.split("/")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = leaf
    return tree
