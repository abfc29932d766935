"""Every package's `__init__` is a true index: it names each module and subpackage it holds.

A newcomer opens a folder's `__init__.py` to learn what is inside; a module it never
mentions is one they will not find. So each package's docstring (or its `__all__`) names
every module and subpackage of the package, by file or folder name.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("coordinator", "streams", "delta_tables")
#: What every package has without saying so.
UNSAID = {"__init__", "__main__"}


def unnamed(init: Path) -> list[str]:
    """Return the modules and subpackages of `init`'s package that its index never names."""
    tree = ast.parse(init.read_text())
    text = ast.get_docstring(tree) or ""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            text += " " + " ".join(ast.literal_eval(node.value))
    folder = init.parent
    members = [p.stem for p in folder.glob("*.py") if p.stem not in UNSAID]
    members += [p.name for p in folder.iterdir() if (p / "__init__.py").is_file()]
    return sorted(m for m in members if not re.search(rf"(?<![\w.]){re.escape(m)}\b", text))


def test_every_package_names_what_it_holds() -> None:
    missing = {}
    for package in PACKAGES:
        for init in sorted((ROOT / package).rglob("__init__.py")):
            if names := unnamed(init):
                missing[str(init.relative_to(ROOT))] = names
    assert missing == {}, f"name these in the package's docstring or __all__: {missing}"


def test_the_index_check_sees_an_unnamed_module(tmp_path: Path) -> None:
    (tmp_path / "named.py").write_text("")
    (tmp_path / "forgotten.py").write_text("")
    (tmp_path / "__init__.py").write_text('"""named.py does things."""\n')
    assert unnamed(tmp_path / "__init__.py") == ["forgotten"]
