"""cluster.put_tree: a model's parameters as resident arrays, sharded by
nnx-style filter rules, with the semantics of `shardctl put-tree`.

Rules are FILTER -> spec pairs, in order: a list of (filter, P) pairs, a
dict {filter: P}, or the CLI's text "linear1/kernel=P(None, 'model');
*=P()". A filter matches a path ("mlp/linear1/kernel") if it matches the
whole path or a trailing part of it starting after a '/'; '*' and '?'
never match '/'; a leading '/' anchors it at the start. The first rule
that matches wins; None as a spec means P(). Paths are the keys of the
nested dicts joined by '/'.
"""
import re

import numpy as np

from shardmap.errors import AlreadyExists, Error, InvalidArgument, NotFound
from shardmap.pytree import paths_to_tree
from shardmap.spec import P, parse_spec


def parse_rules(rules):
    """[(filter, P)] from any of the accepted forms."""
    if isinstance(rules, str):
        rules = [_parse_rule(item) for item in _split_rules(rules)
                 if item.strip()]
    elif isinstance(rules, dict):
        rules = list(rules.items())
    out = []
    for rule in rules:
        if not (isinstance(rule, (tuple, list)) and len(rule) == 2):
            raise InvalidArgument(f"malformed rule {rule!r}: expected "
                                  f"(filter, P(...))")
        flt, spec = rule
        flt = flt.strip() if isinstance(flt, str) else flt
        if not isinstance(flt, str) or not flt:
            raise InvalidArgument(f"malformed rule {rule!r}: empty filter "
                                  f"(use \"*\" to match every path)")
        body = flt[1:] if flt.startswith("/") else flt
        if not body or body.startswith("/") or body.endswith("/") or \
                "//" in body:
            raise InvalidArgument(f"malformed rule {rule!r}: filter '{flt}' "
                                  f"has an empty path component")
        if isinstance(spec, str):
            spec = parse_spec(spec, f"rule '{flt}'")
        if spec is None:
            spec = P()
        if not isinstance(spec, P):
            raise InvalidArgument(f"rule '{flt}': expected a P(...), got "
                                  f"{spec!r}")
        out.append((flt, spec))
    return out


def _split_rules(text):
    """Splits at ';', and at ',' outside (), [] and quotes."""
    items, start, depth, quote = [], 0, 0, ""
    for i, c in enumerate(text):
        if c == ";" or (c == "," and depth == 0 and not quote):
            items.append(text[start:i])
            start, depth, quote = i + 1, 0, ""
        elif quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([":
            depth += 1
        elif c in ")]" and depth > 0:
            depth -= 1
    items.append(text[start:])
    return items


def _parse_rule(text):
    flt, eq, spec = text.strip().partition("=")
    if not eq:
        raise InvalidArgument(f"malformed rule \"{text.strip()}\": expected "
                              f"FILTER=SPEC, e.g. \"*/bias=P()\"")
    return flt, spec


def _glob_regex(pattern):
    """fnmatch(3) with FNM_PATHNAME as a regex: wildcards never match '/'."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < len(pattern) and pattern[j] in "!^":
                j += 1
            if j < len(pattern) and pattern[j] == "]":
                j += 1
            j = pattern.find("]", j)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:j]
                neg = body[:1] in ("!", "^")
                body = body[1:] if neg else body
                body = body.replace("\\", "\\\\")
                out.append("(?!/)[" + ("^" if neg else "") + body + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def rule_matches(flt, path):
    if flt.startswith("/"):
        return _glob_regex(flt[1:]).match(path) is not None
    regex = _glob_regex(flt)
    pos = 0
    while True:
        if regex.match(path, pos):
            return True
        pos = path.find("/", pos)
        if pos < 0:
            return False
        pos += 1


def match_rule(rules, path):
    for flt, spec in rules:
        if rule_matches(flt, path):
            return flt, spec
    tried = ", ".join(f"'{flt}'" for flt, _ in rules) or "none"
    raise InvalidArgument(
        f"no sharding rule matches path '{path}'; tried, in order: {tried} "
        f"(add a rule for it, or a catch-all ('*', P()) last)")


def flatten_tree(params, path=""):
    """[(path, leaf)] of nested dicts (keys joined by '/'), in order."""
    if isinstance(params, dict):
        out = []
        for k, v in params.items():
            out.extend(flatten_tree(v, f"{path}/{k}" if path else str(k)))
        return out
    return [(path, params)]


def put_tree(cluster, prefix, params, mesh, rules, overwrite, timeout):
    rules = parse_rules(rules)
    prefix = prefix.rstrip("/")
    items = []
    for path, leaf in flatten_tree(params):
        flt, spec = match_rule(rules, path)
        name = f"{prefix}/{path}" if prefix else path
        items.append((path, name, np.asarray(leaf), spec))
    if not items:
        raise InvalidArgument("put_tree: params holds no arrays")
    # Refuse before putting anything rather than halfway through: every
    # leaf's layout is planned first (its dtype, and its spec against its
    # shape and the mesh), and without overwrite no name may exist.
    from shardmap.api import shard_map
    for path, name, arr, spec in items:
        try:
            shard_map("identity", mesh=mesh, in_specs=spec,
                      out_specs=spec).lower(arr)
        except Error as e:
            raise type(e)(f"put_tree: '{path}': {e.message}") from None
    if not overwrite:
        existing = {a.name for a in cluster.ls(prefix, timeout)}
        clashes = [name for _, name, _, _ in items if name in existing]
        if clashes:
            raise AlreadyExists(
                f"put_tree: {', '.join(clashes)} already exist; pass "
                f"overwrite=True to replace them")
    handles = [(path, cluster.put(name, arr, mesh, spec, overwrite=overwrite,
                                  timeout=timeout))
               for path, name, arr, spec in items]
    return paths_to_tree(handles)


def get_tree(cluster, prefix, timeout):
    """The resident arrays named PREFIX/KEY as nested dicts of numpy arrays
    (keys split on '/'): the inverse of put_tree."""
    prefix = prefix.rstrip("/")
    under = f"{prefix}/" if prefix else ""
    infos = [a for a in cluster.ls(under, timeout)
             if a.name.startswith(under)]
    if not infos:
        raise NotFound(f"get_tree: no resident arrays are named {under}...")
    return paths_to_tree((a.name[len(under):], cluster.get(a, timeout))
                         for a in infos)
