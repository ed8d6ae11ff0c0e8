"""The "same in TransformerLens and nnsight" boxes, read without the peers installed: each page that captures or
patches shows the box of its kind, and a box holds its snippet files verbatim (the files tests/peers runs), at the
versions benchmarks/peer-requirements.txt pins."""

from __future__ import annotations

import re
from pathlib import Path

from residlab.course import peers

ROOT = Path(__file__).resolve().parents[3]
BOXES_ON = {
    "lessons/04-residual-stream.qmd": "lesson_capture",
    "labs/_part4-observation.qmd": "capture",
    "glossary/activation-cache.qmd": "capture",
    "labs/06-audit-a-decoder.qmd": "patch",
    "glossary/activation-patching.qmd": "patch",
}


def test_each_page_that_captures_or_patches_shows_the_box_of_its_kind():
    found = {}
    pages = [path for pattern in ("*.qmd", "lessons/*.qmd", "labs/*.qmd", "glossary/*.qmd", "docs/*.qmd")
             for path in ROOT.glob(pattern)]  # the pages and the partials they include (labs/_part4-...)
    for path in sorted(pages):
        for kind in re.findall(r'peers\.peer_box\("(\w+)"', path.read_text(encoding="utf-8")):
            found[path.relative_to(ROOT).as_posix()] = kind
    assert found == BOXES_ON


def test_a_box_holds_its_snippets_verbatim_at_the_pinned_versions():
    pins = (ROOT / "benchmarks/peer-requirements.txt").read_text(encoding="utf-8")
    for kind, box in peers.BOXES.items():
        text = peers.peer_box(kind, "A page's sentence.")
        assert text.startswith("::: {.callout-tip") and text.rstrip().endswith(":::") and text.count(":::") == 2
        for name, file_name in box["files"].items():
            assert f"```python\n{(peers.SNIPPETS / file_name).read_text(encoding='utf-8').rstrip()}\n```" in text
            version = peers.peer_versions()[name]
            assert f"{peers.PEERS[name]}=={version}\n" in pins and f"**{name} {version}**" in text
        assert all(f"- {trap}" in text for trap in box["traps"])
