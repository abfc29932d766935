"""Every failpoint in the code has a crash case, and every crash case names a real failpoint.

A new write in a micro-batch gets a failpoint after it (coordinator/core/failpoints.py); this
test then fails until a crash test (test_crash_recovery.py, test_rebuild_crash.py) arms it,
so no write goes without a `kill -9` right after it. Names are read from the source, not
restated: a literal ``failpoint("x")`` gives "x"; an f-string inside a ``for`` loop over a
literal tuple (the ingest's ``failpoint(f"ingest.after_{table.name...}")`` over its tables)
is evaluated for each element of the loop, with the loop variables it uses taken from the
module itself.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from typing import Any

import pytest

from coordinator.runtime.artifacts import PROJECT_ROOT
from tests.guarantees.app_runs import name_of
from tests.guarantees.test_crash_recovery import FAILPOINTS
from tests.guarantees.test_rebuild_crash import REBUILD_FAILPOINTS

#: The packages whose code may hold failpoints.
PACKAGES = ("coordinator", "streams", "delta_tables")


def _is_failpoint_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or len(node.args) != 1:
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == "failpoint") or (
        isinstance(func, ast.Attribute) and func.attr == "failpoint"
    )


def _bindings(loop: ast.For, used: set[str], namespace: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Yield, per element of the loop's literal tuple, the values of the variables `used`."""
    targets = loop.target.elts if isinstance(loop.target, ast.Tuple) else [loop.target]
    names = [t.id if isinstance(t, ast.Name) else "" for t in targets]
    if not isinstance(loop.iter, ast.Tuple | ast.List):
        raise AssertionError(f"line {loop.lineno}: a failpoint name over a non-literal loop")
    for element in loop.iter.elts:
        parts = element.elts if isinstance(element, ast.Tuple) and len(names) > 1 else [element]
        yield {
            name: eval(compile(ast.Expression(part), "<loop>", "eval"), namespace)
            for name, part in zip(names, parts, strict=True)
            if name in used
        }


def failpoint_names(source: str, namespace: dict[str, Any]) -> set[str]:
    """Return the names of every failpoint called in `source` (module globals: `namespace`)."""
    found: set[str] = set()
    tree = ast.parse(source)

    def visit(node: ast.AST, loops: list[ast.For]) -> None:
        if _is_failpoint_call(node):
            assert isinstance(node, ast.Call)
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.add(arg.value)
            elif isinstance(arg, ast.JoinedStr):
                used = {n.id for n in ast.walk(arg) if isinstance(n, ast.Name)}
                code = compile(ast.Expression(arg), "<failpoint>", "eval")
                loop = next(
                    (
                        lp
                        for lp in reversed(loops)
                        if used & {n.id for n in ast.walk(lp.target) if isinstance(n, ast.Name)}
                    ),
                    None,
                )
                for bound in _bindings(loop, used, namespace) if loop else [{}]:
                    found.add(eval(code, namespace, bound))
            elif isinstance(arg, ast.Attribute):
                # A name a table of the module gives (`failpoint(spec.failpoint)`): every
                # string passed as that keyword anywhere in the module.
                named = _keyword_strings(tree, arg.attr)
                if not named:
                    raise AssertionError(f"line {node.lineno}: no `{arg.attr}=` string found")
                found.update(named)
            else:
                raise AssertionError(f"line {node.lineno}: cannot tell this failpoint's name")
        inner = [*loops, node] if isinstance(node, ast.For) else loops
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, [])
    return found


def _keyword_strings(tree: ast.AST, keyword: str) -> set[str]:
    """Return every string constant passed as `keyword=` to a call in `tree`."""
    return {
        kw.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for kw in node.keywords
        if kw.arg == keyword
        and isinstance(kw.value, ast.Constant)
        and isinstance(kw.value.value, str)
    }


def failpoints_in_code() -> dict[str, str]:
    """Return every failpoint name of the product's code, with the module that has it."""
    names: dict[str, str] = {}
    for package in PACKAGES:
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            source = path.read_text()
            if "failpoint(" not in source:
                continue
            module = ".".join(path.relative_to(PROJECT_ROOT).with_suffix("").parts)
            namespace = vars(importlib.import_module(module))
            for name in failpoint_names(source, namespace):
                names[name] = module
    return names


def test_the_crash_test_arms_every_failpoint_of_the_code() -> None:
    in_code = failpoints_in_code()
    armed = [name_of(spec) for spec in FAILPOINTS]
    assert len(armed) == len(set(armed)), "a failpoint armed twice"
    # The rebuild's crash test (test_rebuild_crash.py) arms its own, and one of the batch's.
    armed += [name_of(spec) for spec in REBUILD_FAILPOINTS]
    assert sorted(set(in_code) - set(armed)) == [], "a write without a crash case"
    assert sorted(set(armed) - set(in_code)) == [], "a crash case for no failpoint"


def test_the_scanner_reads_literals_and_loops_and_refuses_what_it_cannot_name() -> None:
    source = """
for n, table in ((1, "a/x"), (2, "b/y")):
    failpoint(f"w.after_{table.rsplit('/', 1)[-1]}_{n}")
failpoints.failpoint("w.done")
"""
    assert failpoint_names(source, {}) == {"w.after_x_1", "w.after_y_2", "w.done"}
    with pytest.raises(AssertionError, match="cannot tell"):
        failpoint_names("failpoint(name)", {})
