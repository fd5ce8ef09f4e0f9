"""Every relative link of the documentation resolves, and every repository path it names exists.

The documents: README.md, CONTRIBUTING.md, SECURITY.md, docs/*.md and the chart's README. Checked in them:

- a relative link `[text](path)` or `[text](path#anchor)` (outside code blocks): the file or directory
  exists inside the repository, and the anchor names a heading of the linked document (GitHub's ids);
- a repository path in the text, backticked or not (`tests/kube/test_kube_day2.py`,
  `tests/kubekit/test_kubekit_{workqueue,election}.py`, `bench/results/scale.json`): a path under one of the
  repository's top-level directories that ends in a file name with an extension, or in `/`, exists; with
  `::name` after a `.py` file (or `.Name` after a module's path, `tests/resizer/resizer_world.World`), that
  file defines `name`.

Placeholders (`<module>`, `*`, `…`) are not paths. Paths under `.dev/`, `.cache/` and the like are written by
the tools at run time and are not checked; neither are paths without an extension (`tests/kube`), which
name directories or commands.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted(
    [
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        ROOT / "SECURITY.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "charts").glob("*/README.md"),
    ]
)

LINK = re.compile(r"\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]*$")
PLACEHOLDERS = "<>*…"


@dataclass(frozen=True)
class Problem:
    document: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.document}:{self.line}: {self.what}"


def top_level(root: Path) -> list[str]:
    """The repository's top-level directories (a checkout's .venv, .cache, .dev and the like are not)."""
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def path_pattern(root: Path) -> re.Pattern[str]:
    """A path that starts at one of `root`'s top-level directories (not inside another path: `.dev/certs/`
    is not `certs/`), brace groups included, and an optional `::member` after it."""
    directories = "|".join(map(re.escape, top_level(root)))
    return re.compile(
        rf"(?<![\w./~$@-])((?:{directories})/(?:[\w.{PLACEHOLDERS}-]|/|\{{[\w.,/-]*\}})*)(::[\w\[\]./-]+)?"
    )


def lines_of(text: str) -> list[tuple[int, str, bool]]:
    """(line number, line, inside a fenced code block) for every line; a fence line counts as inside."""
    lines: list[tuple[int, str, bool]] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        fence = FENCE.match(line) is not None
        if fence:
            fenced = not fenced
        lines.append((number, line, fenced or fence))
    return lines


def slug(heading: str) -> str:
    """GitHub's id for a heading: its text (a link's target dropped) lowercased, every character but letters,
    digits, `_`, `-` and spaces removed, spaces turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(document: Path) -> set[str]:
    """The ids of `document`'s headings; a repeated heading's next ids end in -1, -2, ..."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line, fenced in lines_of(document.read_text()):
        match = HEADING.match(line)
        if fenced or match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def expand(path: str) -> list[str]:
    """`a/{b,c}.py` → `a/b.py`, `a/c.py` (every brace group, as a shell expands it)."""
    parts = re.split(r"(\{[^}]*\})", path)
    choices = [part[1:-1].split(",") if part.startswith("{") else [part] for part in parts]
    return ["".join(choice) for choice in itertools.product(*choices)]


def defines(source: Path, member: str) -> bool:
    """Whether `source` defines `member` (`test_x`, `Class`, `Class::test_x`; a parameter id dropped)."""
    text = source.read_text()
    names = member.split("[", 1)[0].split("::")
    return all(re.search(rf"^\s*(?:async\s+def|def|class)\s+{re.escape(n)}\b", text, re.M) for n in names)


def link_problems(document: Path, root: Path = ROOT) -> list[Problem]:
    problems: list[Problem] = []
    name = document.relative_to(root).as_posix()
    for number, line, fenced in lines_of(document.read_text()):
        if fenced:
            continue
        for match in LINK.finditer(line):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            resolved = (document.parent / path).resolve() if path else document
            if not resolved.is_relative_to(root.resolve()):
                problems.append(Problem(name, number, f"link {target!r} leaves the repository"))
            elif not resolved.exists():
                problems.append(Problem(name, number, f"link {target!r}: {path} does not exist"))
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                problems.append(Problem(name, number, f"link {target!r}: no heading #{anchor} there"))
    return problems


def path_problems(document: Path, root: Path = ROOT) -> list[Problem]:
    problems: list[Problem] = []
    name = document.relative_to(root).as_posix()
    pattern = path_pattern(root)
    for number, line, _ in lines_of(document.read_text()):
        for match in pattern.finditer(line):
            token, member = match.group(1).rstrip("."), match.group(2)
            if any(mark in token for mark in PLACEHOLDERS):
                continue
            for path in expand(token):
                if not path.endswith("/") and not EXTENSION.search(path.rsplit("/", 1)[-1]):
                    continue
                resolved = root / path
                module, _, attribute = path.rpartition(".")
                if not resolved.exists() and (root / f"{module}.py").is_file():
                    resolved, member = root / f"{module}.py", f"::{attribute}"  # a module's attribute
                if not resolved.exists():
                    problems.append(Problem(name, number, f"{path} does not exist"))
                elif member and resolved.suffix == ".py" and not defines(resolved, member[2:]):
                    problems.append(Problem(name, number, f"{path} defines no {member[2:]}"))
    return problems


def test_the_checks_find_what_is_broken_and_pass_what_is_not(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "tests" / "kube").mkdir(parents=True)
    (tmp_path / "tests" / "kube" / "test_kube_a.py").write_text("def test_one() -> None:\n    pass\n")
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## The control plane: `make kube`\n")
    document = tmp_path / "docs" / "doc.md"
    document.write_text(
        "[fine](other.md#the-control-plane-make-kube), [gone](gone.md), [no anchor](other.md#nowhere),\n"
        "[out](../../elsewhere.md), [web](https://example.com/x.md), [self](#a-heading)\n"
        "`tests/kube/test_kube_a.py::test_one`, `tests/kube/test_kube_a.py::test_two`,\n"
        "tests/kube/test_kube_{a,b}.py, `tests/kube/test_kube_<module>.py`, `tests/kube`, .dev/tests/x.py.\n"
        "```\n[code](not-checked.md)\n```\n## A heading\n"
    )
    assert [(p.line, p.what) for p in link_problems(document, tmp_path)] == [
        (1, "link 'gone.md': gone.md does not exist"),
        (1, "link 'other.md#nowhere': no heading #nowhere there"),
        (2, "link '../../elsewhere.md' leaves the repository"),
    ]
    assert [(p.line, p.what) for p in path_problems(document, tmp_path)] == [
        (3, "tests/kube/test_kube_a.py defines no test_two"),
        (4, "tests/kube/test_kube_b.py does not exist"),
    ]


def test_the_documents_are_found() -> None:
    names = {document.relative_to(ROOT).as_posix() for document in DOCUMENTS}
    assert {"README.md", "CONTRIBUTING.md", "docs/design.md", "charts/exclusive-placement/README.md"} <= names
    assert {"tests", "docs", "bench", "webhook", "resizer"} <= set(top_level(ROOT))


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(document: Path) -> None:
    problems = link_problems(document)
    assert not problems, "\n".join(map(str, problems))


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.relative_to(ROOT).as_posix())
def test_every_repository_path_named_exists(document: Path) -> None:
    problems = path_problems(document)
    assert not problems, "\n".join(map(str, problems))
