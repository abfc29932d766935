"""Every relative link of the README and docs/ leads somewhere: the file, and the heading.

The docs cite code by path and each other by heading; a file moved or a heading renamed
leaves a link that only a reader would find broken. Links to the web are not followed.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.S | re.M)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"`[^`\n]*`(?!\])")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


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


def test_every_relative_link_of_the_docs_resolves() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = {str(p.relative_to(ROOT)): b for p in pages if (b := broken_links(p))}
    assert broken == {}, broken


def test_the_link_check_sees_a_missing_file_and_heading(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Here\n[a](page.md#here) [b](gone.md) [c](page.md#there) [d](https://x.y)\n")
    assert broken_links(page, tmp_path) == [
        "gone.md: no such file",
        "page.md#there: no heading #there",
    ]
