"""The program-language source of a Python function or lambda.

A function decorated with @shardmap.shard_map (or passed to it) is not
run in Python: its source is sent to the coordinator as an expression
program (docs/PROGRAMS.md), checked there and run by the workers. The
source is the `def` itself, dedented, without its decorators; for a
lambda, the lambda expression alone.
"""
import ast
import inspect
import textwrap

from shardmap.errors import InvalidArgument


def program_source(func):
    """The source text of `func` as a program; InvalidArgument when it
    cannot be found (a function typed at the interactive prompt, say)."""
    name = getattr(func, "__name__", repr(func))
    try:
        lines, _ = inspect.getsourcelines(func)
    except (OSError, TypeError) as e:
        raise InvalidArgument(
            f"cannot read the source of {name} ({e}); pass the program's "
            f"text instead: shard_map(\"lambda x: ...\", ...)") from None
    text = textwrap.dedent("".join(lines))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        # A lambda inside a larger expression: parse the enclosing lines.
        tree = None
    if name == "<lambda>":
        return _lambda_source(text, tree, name)
    if tree is not None:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.name == name:
                body = text.splitlines(keepends=True)[node.lineno - 1:
                                                      node.end_lineno]
                return textwrap.dedent("".join(body)).rstrip() + "\n"
    raise InvalidArgument(f"cannot find the def of {name} in its source")


def _lambda_source(text, tree, name):
    if tree is None:
        # The lambda's lines may start inside an unclosed call: wrap them.
        try:
            tree = ast.parse("(\n" + text + "\n)")
            text = "(\n" + text + "\n)"
        except SyntaxError:
            tree = None
    lambdas = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)] \
        if tree is not None else []
    if len(lambdas) != 1:
        raise InvalidArgument(
            f"cannot tell which lambda on its line(s) is the program "
            f"({len(lambdas)} found); pass the program's text instead: "
            f"shard_map(\"lambda x: ...\", ...)")
    return ast.get_source_segment(text, lambdas[0])
