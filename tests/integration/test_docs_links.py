"""Every relative link in README.md and docs/**/*.md resolves: the file (or directory) exists in
the source tree, and a `#anchor` names a heading of that file, as GitHub makes anchors from
headings. Text moves between the README and docs/ (issue 34); a link left pointing at the old
place fails here rather than on a reader. Also the README's length: at most 350 lines, so it
stays the short path in (the rest belongs in docs/)."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])
README_LIMIT = 350

# [text](target) and [text](target "title"), not images' sources (which would be checked the
# same way, but there are none). Reference-style links are not used in these files.
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def documents() -> list[Path]:
    return [SOURCE / "README.md", *sorted((SOURCE / "docs").rglob("*.md"))]


def prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    out, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        marker = re.match(r"^\s*(```|~~~)", line)
        if marker:
            fence = None if fence == marker.group(1) else (fence or marker.group(1))
            continue
        if fence is None:
            out.append((number, line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (markup removed), lower case, anything but letters,
    digits, spaces, `-` and `_` dropped, spaces made `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)  # _emphasis_, not snake_case
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose(path.read_text()):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    # Explicit anchors: <a id="..."></a> or <a name="...">.
    out |= set(re.findall(r"<a (?:id|name)=\"([^\"]+)\"", path.read_text()))
    return out


def broken_links(path: Path) -> list[str]:
    problems = []
    for number, line in prose(path.read_text()):
        for target in LINK.findall(re.sub(r"`[^`]*`", "``", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
                continue
            file_part, _, anchor = target.partition("#")
            resolved = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(SOURCE)}:{number}: [{target}]"
            if not resolved.exists():
                problems.append(f"{where}: no file {resolved.relative_to(SOURCE) if resolved.is_relative_to(SOURCE) else resolved}")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                problems.append(f"{where}: {resolved.relative_to(SOURCE)} has no heading with anchor #{anchor}")
            elif anchor and resolved.suffix != ".md":
                problems.append(f"{where}: an anchor into a file that is not Markdown")
    return problems


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(SOURCE)))
def test_every_relative_link_resolves(path):
    problems = broken_links(path)
    assert not problems, "links that lead nowhere:\n" + "\n".join(problems)


def test_readme_is_short():
    lines = (SOURCE / "README.md").read_text().count("\n")
    assert lines <= README_LIMIT, (
        f"README.md has {lines} lines, over the limit of {README_LIMIT}: move the detail to a "
        "guide or reference page under docs/ and link to it")


def test_readme_opens_with_the_two_commands():
    """The README's first lines are the short path in: the command that sets up and runs the main
    job, and the one that runs the whole suite, which is what CI (.ci/run) runs."""
    text = (SOURCE / "README.md").read_text()
    first_block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in first_block.splitlines()]
    assert commands == ["./scripts/quickstart.sh", "./scripts/test.sh"], first_block
    assert text.index("```sh") < 300, "the two commands should open the README"
    for script in ("scripts/quickstart.sh", "scripts/test.sh"):
        assert os.access(SOURCE / script, os.X_OK), f"{script} is not executable"
    ci = (SOURCE / ".ci" / "run").read_text()
    assert re.search(r"^scripts/test\.sh$", ci, re.M), ".ci/run no longer runs the README's test command"


def test_slugs_are_githubs():
    """The anchors GitHub makes for headings this repository has (checked by hand on GitHub's
    rendering rules), so the link check agrees with what a reader's browser finds."""
    assert slug("Certificates (`rosetctl tls`)") == "certificates-rosetctl-tls"
    assert slug("Across hosts: a controller, consumers and nodes") == "across-hosts-a-controller-consumers-and-nodes"
    assert slug("To Kubernetes (`deploy/kubernetes/`)") == "to-kubernetes-deploykubernetes"
    assert slug("`rosetctl serve`") == "rosetctl-serve"
    assert slug("Running tests side by side") == "running-tests-side-by-side"
