"""Every relative link of the README, docs/ and bench/ leads somewhere: the file, and the
heading; every repository file a code comment names exists.

The docs cite code by path and each other by heading; a file moved or a heading renamed
leaves a link that only a reader would find broken. Links to the web are not followed.
Code comments and docstrings cite files the same way (`streams/ingest/land_rows.py`,
`docs/performance.md`): a file moved or deleted leaves them pointing nowhere too.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import unicodedata
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.S | re.M)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"`[^`\n]*`(?!\])")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
#: The folders whose code is read for comments, and the markdown pages read for links.
CODE = ("coordinator", "streams", "delta_tables", "tests", "bench", "deploy")
PAGES = ("README.md", "docs/*.md", "bench/README.md", "bench/results/*.md")
#: A repository file as a comment names it: from a top folder to a file name with a suffix.
REPOSITORY_FILE = re.compile(
    r"(?<![\w./-])((?:coordinator|streams|delta_tables|tests|docs|bench|deploy|notebooks)/"
    r"[\w./-]*\w\.(?:py|md|java|toml|sh|ipynb|properties|json|ya?ml))\b"
)
#: Comment lines of code that is not Python (Java, shell, TOML, properties, YAML).
OTHER_COMMENT = re.compile(r"^\s*(#|//|/?\*)")


def slug(heading: str) -> str:
    """Return GitHub's anchor of a heading: link text kept, lower case, punctuation dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def anchors(markdown: Path) -> set[str]:
    """Return the anchors of a markdown file's headings (repeats numbered as GitHub does)."""
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", markdown.read_text()).splitlines():
        if match := HEADING.match(line):
            name = slug(match.group(2))
            count = seen.get(name, 0)
            found.add(name if count == 0 else f"{name}-{count}")
            seen[name] = count + 1
    return found


def broken_links(markdown: Path, root: Path = ROOT) -> list[str]:
    """Return `target: problem` for each relative link of `markdown` that leads nowhere."""
    text = FENCE.sub("", markdown.read_text())
    text = INLINE_CODE.sub(lambda m: m.group(0) if "](" in m.group(0) else "``", text)
    broken = []
    for match in LINK.finditer(text):
        target = match.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        destination = (markdown.parent / path).resolve() if path else markdown
        if root not in destination.parents and destination != root:
            broken.append(f"{target}: outside the repository")
        elif not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (destination.suffix != ".md" or anchor not in anchors(destination)):
            broken.append(f"{target}: no heading #{anchor}")
    return broken


def python_comments(text: str) -> Iterator[tuple[int, str]]:
    """Yield (line, text) of each comment and docstring of Python source `text`."""
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    documented = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, documented) and (doc := ast.get_docstring(node, clean=False)):
            yield node.body[0].lineno, doc


def comments(path: Path) -> Iterator[tuple[int, str]]:
    """Yield (line, text) of each comment of a code file (none for other files)."""
    if path.suffix == ".py":
        yield from python_comments(path.read_text())
    elif path.suffix in {".java", ".sh", ".toml", ".properties", ".yaml", ".yml"} or (
        not path.suffix and path.read_bytes()[:2] == b"#!"
    ):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if OTHER_COMMENT.match(line):
                yield number, line


def missing_files(path: Path, root: Path = ROOT) -> list[str]:
    """Return `line: file` for each repository file a comment of `path` names that is not."""
    return [
        f"{line}: {name}"
        for line, text in comments(path)
        for name in REPOSITORY_FILE.findall(text)
        if not (root / name).exists()
    ]


def test_every_relative_link_of_the_docs_resolves() -> None:
    pages = sorted({page for pattern in PAGES for page in ROOT.glob(pattern)})
    broken = {str(p.relative_to(ROOT)): b for p in pages if (b := broken_links(p))}
    assert broken == {}, broken


def test_the_link_check_sees_a_missing_file_and_heading(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Here\n[a](page.md#here) [b](gone.md) [c](page.md#there) [d](https://x.y)\n")
    assert broken_links(page, tmp_path) == [
        "gone.md: no such file",
        "page.md#there: no heading #there",
    ]


def test_every_file_a_code_comment_names_exists() -> None:
    files = sorted(
        path
        for folder in CODE
        for path in (ROOT / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )
    missing = {str(p.relative_to(ROOT)): m for p in files if (m := missing_files(p))}
    assert missing == {}, missing


def test_the_comment_check_sees_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "streams").mkdir()
    (tmp_path / "streams" / "here.py").write_text("")
    code = tmp_path / "code.py"
    code.write_text(
        '"""Calls streams/here.py."""\n'
        "# see streams/gone.py and docs/gone.md#a-heading, not streams/here.py\n"
        'HELP = "streams/also_gone.py"  # a string, not a comment\n'
    )
    assert missing_files(code, tmp_path) == ["2: streams/gone.py", "2: docs/gone.md"]
