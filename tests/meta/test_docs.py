"""The documentation's own promises: every relative link in the README, CHANGELOG and docs/ points
at a file that exists (and, into a Markdown page, at a heading it has), the README fits a screen
or two, and docs/benchmarks.md stays a page of current tables."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    {ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "research" / "README.md", *(ROOT / "docs").glob("*.md")}
)
# [text](target) and ![alt](target), not inside code spans; the target ends at a space or ")".
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(text: str) -> str:
    """The page without fenced code blocks and inline code, where brackets are not links."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M).splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text())) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize("page", [p for p in PAGES if p.exists()], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_checker_sees_links_and_headings(tmp_path):
    (tmp_path / "a.md").write_text("# A page\n\n## Trainer overhead (`x.py`)\n\n```\n[not](a link)\n```\n")
    page = tmp_path / "b.md"
    page.write_text("See [a](a.md#trainer-overhead-xpy), `[code](x)`, ![img](a.md) and [web](https://x.org).\n")
    assert links(page) == ["a.md#trainer-overhead-xpy", "a.md"]
    assert anchors(tmp_path / "a.md") == {"a-page", "trainer-overhead-xpy"}


def test_the_readme_fits_and_benchmarks_stay_current_tables():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text()
    assert len(benchmarks.splitlines()) <= 600
    assert not re.search(r"^#+ Before:|the default for a day", benchmarks, flags=re.M | re.I)
    assert (ROOT / "CHANGELOG.md").exists()
