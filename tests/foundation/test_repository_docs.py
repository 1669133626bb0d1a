"""The repository explains itself: its Markdown links resolve, and nothing it tracks points outside it."""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]

# What pointing outside the repository looks like: the specification and its sources as they were before
# docs/specification.md, and the field notes, none of which a clone of this repository has. Written so that
# this file does not match itself.
_OUTSIDE = re.compile(
    r"\.\.[/]shared|research[/]|seeds[/]|000_1e8[4]|002_0e9[b]|003_983[3]",
)

_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`]*`")
# [text](target) and ![alt](target); the target up to whitespace (a title may follow) or the closing parenthesis
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def tracked_files() -> list[Path]:
    """The files git tracks (every file under the repository when it is not a git checkout)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=30
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        skipped = {".git", ".venv", ".pin", "node_modules", "__pycache__"}
        return [p for p in ROOT.rglob("*") if p.is_file() and not skipped & set(p.relative_to(ROOT).parts)]
    return [ROOT / name for name in listed.split("\0") if name]


def markdown_files() -> list[Path]:
    """Every tracked Markdown file."""
    return sorted(p for p in tracked_files() if p.suffix == ".md" and p.exists())


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line number, target) of every Markdown link outside code blocks and code spans."""
    in_fence = False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for match in _LINK.finditer(_INLINE_CODE.sub("", line)):
            yield number, match.group(1)


def slug(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's) gives a heading."""
    text = _INLINE_CODE.sub(lambda m: m.group(0).strip("`"), heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    in_fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if in_fence or heading is None:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_link(source: Path, target: str) -> str | None:
    """Why a relative link of ``source`` does not resolve, or None when it does."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:, urn: ...
        return None
    path_part, _, anchor = target.partition("#")
    resolved = (source.parent / path_part).resolve() if path_part else source
    if not resolved.is_relative_to(ROOT):
        return "points outside the repository"
    if not resolved.exists():
        return "no such file"
    if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
        return f"no heading with the anchor #{anchor}"
    return None


def test_slugs_follow_the_renderer() -> None:
    assert slug("5. Outbox and relay") == "5-outbox-and-relay"
    assert slug("Metrics (the names are fixed; counters end in `_total`)") == (
        "metrics-the-names-are-fixed-counters-end-in-_total"
    )
    assert slug("Errors and poison appointments") == "errors-and-poison-appointments"


def test_every_relative_markdown_link_resolves() -> None:
    problems = []
    for source in markdown_files():
        for number, target in links(source.read_text(encoding="utf-8")):
            reason = broken_link(source, target)
            if reason is not None:
                problems.append(f"{source.relative_to(ROOT)}:{number}: ({target}) {reason}")
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_link_check_finds_a_broken_link(tmp_path: Path) -> None:
    text = "see [a](missing.md), [b](specification.md#no-such-heading) and `[c](code-span.md)`\n```\n[d](x.md)\n```\n"
    assert [target for _, target in links(text)] == ["missing.md", "specification.md#no-such-heading"]
    assert broken_link(ROOT / "docs" / "README.md", "missing.md") == "no such file"
    assert broken_link(ROOT / "docs" / "README.md", "specification.md#no-such-heading") is not None
    assert broken_link(ROOT / "docs" / "README.md", "specification.md#5-outbox-and-relay") is None
    assert broken_link(ROOT / "README.md", "../outside.md") == "points outside the repository"


def test_nothing_tracked_points_outside_the_repository() -> None:
    """The specification, its sources and the field notes live in docs/, in the project's own words."""
    hits = []
    for path in tracked_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary files (plots) cannot point anywhere
        for number, line in enumerate(text.splitlines(), start=1):
            if _OUTSIDE.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert not hits, "pointers outside the repository (say it in docs/ instead):\n" + "\n".join(hits)


# The path rule (docs/README.md, "Paths in the documents"): a path a document names in backticks is written relative
# to the repository root, to src/ (`pin/db.py`), to src/pin/, or to the document's own folder, and it exists there;
# a bare file name (no folder: "`runtime.py`" after the folder was named) is the name of a file somewhere under
# src/pin/. A link resolves from the document's folder, as a renderer resolves it. A backticked word counts as a path
# when it has a slash or ends in one of the file kinds below; commands (with a space), absolute paths, URLs, media
# types (+) and placeholders (<...>, *, {...}) do not, nor what .gitignore ignores (what a run creates: `.pin/`).
PATH_ROOTS = ("", "src/", "src/pin/")
_PATH_SUFFIXES = (".py", ".md", ".sql", ".yml", ".yaml", ".json", ".toml", ".txt", ".sh", ".cfg", ".ini", ".csv")
_NOT_A_PATH = re.compile(r"[\s<>*{}$=|+\\]|://|^[/~-]|^\.\.\.|\.\.\.$")
# what may follow a path in a code span: a line (:12), a test (::test_x), an anchor (#heading)
_PATH_TAIL = re.compile(r"(::.*|:\d+(-\d+)?|#.*)$")


def documents() -> list[Path]:
    """The README and every Markdown page under docs/."""
    return [p for p in markdown_files() if p == ROOT / "README.md" or p.is_relative_to(ROOT / "docs")]


def code_spans(text: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of every inline code span outside fenced blocks."""
    in_fence = False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            for match in _INLINE_CODE.finditer(line):
                yield number, match.group(0).strip("`")


def named_path(span: str) -> str | None:
    """The repository path a code span names, or None when it is not a path (see the rule above)."""
    candidate = _PATH_TAIL.sub("", span.strip())
    if not candidate or candidate in _PATH_SUFFIXES or _NOT_A_PATH.search(candidate.removeprefix("./")):
        return None
    if "/" in candidate or candidate.endswith(_PATH_SUFFIXES):
        return candidate.removeprefix("./")
    return None


def missing_path(source: Path, path: str) -> bool:
    """Whether ``path`` exists under none of the roots the rule allows."""
    bases = [ROOT / root for root in PATH_ROOTS] + [source.parent]
    if any((base / path).exists() for base in bases) or _ignored_by_git(path):
        return False
    return "/" in path or path not in _package_file_names()


def _ignored_by_git(path: str) -> bool:
    """Whether .gitignore ignores ``path``: what a run creates (`.pin/`, `.venv/`), which a clone does not have."""
    try:
        return subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT, check=False, timeout=30).returncode == 0
    except OSError:
        return False


@functools.cache
def _package_file_names() -> frozenset[str]:
    """The names of the files under src/pin/ (what a bare file name in a document may name)."""
    return frozenset(p.name for p in (ROOT / "src" / "pin").rglob("*") if p.is_file())


def test_every_path_a_document_names_exists() -> None:
    problems = []
    for source in documents():
        for number, span in code_spans(source.read_text(encoding="utf-8")):
            path = named_path(span)
            if path is not None and missing_path(source, path):
                problems.append(f"{source.relative_to(ROOT)}:{number}: `{span}`")
    assert not problems, (
        "paths that exist under none of the repository root, src/, src/pin/ and the document's folder "
        "(docs/README.md, 'Paths in the documents'):\n" + "\n".join(problems)
    )


def test_the_path_check_tells_paths_from_other_code() -> None:
    assert named_path("outbox/relay.py") == "outbox/relay.py"
    assert named_path("tests/conftest.py::test_x") == "tests/conftest.py"
    assert named_path("docs/design/") == "docs/design/"
    assert named_path("settings.py:12") == "settings.py"
    for not_a_path in (
        ".py",
        "make test",
        "/metrics",
        "https://x.org/a.md",
        "PIN_LOG_FORMAT=json",
        "<group>.dlq",
        "*.py",
    ):
        assert named_path(not_a_path) is None, not_a_path
    assert missing_path(ROOT / "docs" / "README.md", "outbox/relay.py")  # a package now: outbox/relay/
    assert not missing_path(ROOT / "docs" / "README.md", "cli.py")  # src/pin/cli.py
    assert not missing_path(ROOT / "docs" / "README.md", "design/relay.md")  # the document's folder
    assert not missing_path(ROOT / "docs" / "README.md", "tests/conftest.py")  # the repository root
    assert not missing_path(ROOT / "docs" / "README.md", "runtime.py")  # a bare name: messaging/consumer/runtime.py
    assert missing_path(ROOT / "docs" / "README.md", "relay.md")  # no file of that name under src/pin/
    assert not missing_path(ROOT / "README.md", ".pin/")  # what a run creates: ignored by git, not checked
    assert not missing_path(ROOT / "docs" / "README.md", "pin/cli.py")  # src/: the module path
    assert missing_path(ROOT / "docs" / "README.md", "pin/relay.py")  # under none of the roots


def test_every_design_note_is_linked_from_an_index() -> None:
    """docs/README.md (or docs/design/README.md, when there is one) links every page under docs/design/."""
    indexes = [p for p in (ROOT / "docs" / "README.md", ROOT / "docs" / "design" / "README.md") if p.exists()]
    linked = {
        (index.parent / target.partition("#")[0]).resolve()
        for index in indexes
        for _, target in links(index.read_text(encoding="utf-8"))
    }
    notes = [p for p in markdown_files() if p.parent == ROOT / "docs" / "design" and p.name != "README.md"]
    unlinked = [str(p.relative_to(ROOT)) for p in notes if p.resolve() not in linked]
    assert not unlinked, "design notes no index links (add a row to docs/README.md's design notes):\n" + "\n".join(
        unlinked
    )
