"""The packages' imports point one way: core <- clients <- runtime <- applications (docs/design.md).

Every import statement of every module is read with `ast`, wherever it stands (module level,
inside a function, under `if TYPE_CHECKING:`), so a lazy import cannot hide a dependency.
Failures name the offending import as `path:line`.

A *unit* is a top-level package (`delta_tables`, `streams`), or, inside `coordinator` (which holds
the core, the engine and the applications), one of its subpackages or modules (`coordinator.core`,
`coordinator.runtime.engine`, `coordinator.rest`, ...). A module that belongs to no unit below fails
`test_every_unit_has_a_layer`: a new one is placed on purpose, not by default.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("delta_tables", "streams", "coordinator")

CORE, CLIENTS, RUNTIME, APPLICATION = 0, 1, 2, 3
LAYER_NAMES = {CORE: "core", CLIENTS: "clients", RUNTIME: "runtime", APPLICATION: "application"}
#: Each unit's layer. A unit may import its own layer (without a cycle) and the ones below.
LAYERS = {
    # core: pure Python, the facts every other layer shares
    "coordinator.core": CORE,
    "coordinator.protocol": CORE,
    # clients: every Kafka client, built from the core's settings
    "coordinator.kafka_clients": CLIENTS,
    # runtime: Spark, Delta and Kafka
    "delta_tables": RUNTIME,
    "streams": RUNTIME,
    "coordinator.runtime": RUNTIME,
    # applications: what users and operators run
    "coordinator": APPLICATION,
    "coordinator.__main__": APPLICATION,
    "coordinator.app": APPLICATION,
    "coordinator.program_exit": APPLICATION,
    "coordinator.record_classes": APPLICATION,
    "coordinator.cli": APPLICATION,
    "coordinator.commands": APPLICATION,
    "coordinator.admin": APPLICATION,
    "coordinator.bench": APPLICATION,
    "coordinator.rest": APPLICATION,
    "coordinator.rocketmq": APPLICATION,
    "coordinator.sdk": APPLICATION,
    "coordinator.stop_signals": APPLICATION,
}
#: A producer installs the SDK without the engine: it imports these units only.
SDK = "coordinator.sdk"
CORE_UNITS = ("coordinator.core", "coordinator.protocol")
SDK_MAY_IMPORT = {*CORE_UNITS, "coordinator.kafka_clients", SDK}
#: The core layer imports nothing outside the standard library and itself.
CORE_MAY_IMPORT = set(sys.stdlib_module_names) | {"__future__"}


@dataclass(frozen=True)
class Import:
    """One imported txcoord module, and where."""

    source: str  # the importing module
    target: str  # the imported module (or package)
    where: str  # path:line

    def __str__(self) -> str:
        return f"{self.where}: {self.source} imports {self.target}"


def module_files() -> dict[str, Path]:
    """Return every module of the packages by dotted name (a package by its own name)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imported_names(module: str, path: Path) -> list[tuple[str, int]]:
    """Return (dotted name, line) of everything `path` imports, relative imports resolved.

    `from package import name` counts as importing `package.name` when that is a module.
    """
    modules = module_files()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                names.append((full if full in modules else base, node.lineno))
    return list(dict.fromkeys(names))  # `from m import a, b`: m once


def txcoord_imports() -> list[Import]:
    """Return every import of a txcoord module by a txcoord module."""
    found = []
    for module, path in module_files().items():
        for name, line in imported_names(module, path):
            if name.split(".")[0] in PACKAGES:
                where = f"{path.relative_to(ROOT)}:{line}"
                found.append(Import(module, name, where))
    return found


def unit(module: str) -> str:
    """Return the unit a module belongs to (see the module docstring)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "coordinator" and len(parts) > 1 else parts[0]


def layer(module: str) -> int | None:
    """Return the layer of a module's unit (None: not placed)."""
    return LAYERS.get(unit(module))


def describe(module: str) -> str:
    placed = layer(module)
    return f"{unit(module)} ({'no layer' if placed is None else LAYER_NAMES[placed]})"


def cycles(edges: dict[str, dict[str, Import]]) -> list[list[str]]:
    """Return the strongly connected components of more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_every_unit_has_a_layer() -> None:
    unplaced = sorted({unit(m) for m in module_files() if layer(m) is None})
    assert not unplaced, f"units without a layer in tests/test_layers.py LAYERS: {unplaced}"


def cycle_report(key: Callable[[str], str]) -> str:
    """Return every import cycle between `key(module)`s, with the imports that close it."""
    edges: dict[str, dict[str, Import]] = defaultdict(dict)
    for imp in txcoord_imports():
        source, target = key(imp.source), key(imp.target)
        if source != target:
            edges[source].setdefault(target, imp)
    return "\n".join(
        f"cycle {' <-> '.join(members)}:\n"
        + "\n".join(f"    {edges[a][b]}" for a in members for b in members if b in edges[a])
        for members in cycles(edges)
    )


def test_no_cycle_between_units() -> None:
    report = cycle_report(unit)
    assert not report, report


def test_no_cycle_between_modules() -> None:
    """Inside a unit too: a package's modules import each other one way."""
    report = cycle_report(lambda module: module)
    assert not report, report


def test_no_layer_imports_a_layer_above_it() -> None:
    wrong = [
        f"{imp}: {describe(imp.source)} -> {describe(imp.target)}"
        for imp in txcoord_imports()
        if (source := layer(imp.source)) is not None
        and source < APPLICATION
        and ((target := layer(imp.target)) is None or target > source)
    ]
    assert not wrong, "imports that point up:\n" + "\n".join(wrong)


def test_the_sdk_imports_only_the_core_and_the_kafka_clients() -> None:
    wrong = [
        f"{imp}: the SDK may import only {sorted(SDK_MAY_IMPORT)}"
        for imp in txcoord_imports()
        if unit(imp.source) == SDK and unit(imp.target) not in SDK_MAY_IMPORT
    ]
    assert not wrong, "\n".join(wrong)


def test_core_imports_only_the_standard_library() -> None:
    wrong = []
    for module, path in module_files().items():
        if layer(module) != CORE:
            continue
        for name, line in imported_names(module, path):
            if name.split(".")[0] not in CORE_MAY_IMPORT and not any(
                name == unit or name.startswith(unit + ".") for unit in CORE_UNITS
            ):
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {module} imports {name}")
    assert not wrong, "core imports beyond the standard library:\n" + "\n".join(wrong)


def public_names(package: Path) -> list[str] | None:
    """Return a package's literal `__all__` (None without one)."""
    for node in ast.parse((package / "__init__.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list) and all(isinstance(v, str) for v in value)
            return value
    return None


def packages() -> dict[str, Path]:
    """Return every package (a folder with an __init__.py) by dotted name."""
    return {
        name: path.parent for name, path in module_files().items() if path.name == "__init__.py"
    }


def test_every_package_marks_its_public_surface() -> None:
    """`__all__` exists and names only what is there: a submodule or a name it defines."""
    wrong = []
    for name, folder in packages().items():
        listed = public_names(folder)
        if listed is None:
            wrong.append(f"{folder.relative_to(ROOT)}/__init__.py: no __all__")
            continue
        tree = ast.parse((folder / "__init__.py").read_text())
        bound = {
            alias.asname or alias.name
            for node in tree.body
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
        for entry in listed:
            if entry not in bound and f"{name}.{entry}" not in module_files():
                wrong.append(f"{folder.relative_to(ROOT)}/__init__.py: {entry!r} is not there")
    assert not wrong, "\n".join(wrong)


def test_other_units_use_only_a_package_s_public_surface() -> None:
    """An import from another unit reaches a package only through a name in its __all__."""
    surfaces = {name: set(public_names(folder) or ()) for name, folder in packages().items()}
    wrong = []
    for module, path in module_files().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                entries = [(node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                entries = [(alias.name, None) for alias in node.names]
            else:
                continue
            for target, name in entries:
                package = unit(target)
                if package not in surfaces or unit(module) == package:
                    continue
                rest = target[len(package) + 1 :].split(".")[0] if target != package else name
                if rest is not None and rest not in surfaces[package]:
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    wrong.append(f"{where}: {module} uses {package}.{rest}, not in its __all__")
    assert not wrong, "\n".join(wrong)


def test_the_checker_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    """The reader above must not miss an import because of where or how it is written."""
    path = tmp_path / "app.py"
    path.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from coordinator.rest import app\n"
        "def f():\n    import coordinator.sdk.producer\n"
        "    from .runtime import driver_metrics\n"
        "    from .rest import models\n"
    )
    names = {name for name, _ in imported_names("coordinator.app", path)}
    assert {
        "coordinator.rest.app",
        "coordinator.sdk.producer",
        "coordinator.runtime.driver_metrics",
        "coordinator.rest.models",
    } <= names
