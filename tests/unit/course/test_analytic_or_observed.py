"""Each page says, of every figure it shows, whether it is analytic (drawn or derived from the definitions) or
observed (measured in a run), and a page with no figure says so. Read from the page sources, includes expanded."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from residlab.build.site_check import read_page

ROOT = Path(__file__).resolve().parents[3]
GLOSSARY_WITHOUT_FIGURES = ("index", "tokenizer", "mlp", "normalisation", "activation-cache")
# Page -> each figure it shows -> what the page must call it. The reference, written out: a new figure fails here
# until its page says which it is (and this list does).
FIGURES = {
    "lessons/04-residual-stream.qmd": {"fig-gradient-profile": "observed"},
    "labs/05-trace-residual-stream.qmd": {
        "fig-part4-norms": "observed", "fig-part4-cosines": "observed", "fig-part4-writes": "observed",
    },
    "glossary/residual-stream.qmd": {"fig-four-positions": "analytic"},
    "glossary/logit-lens.qmd": {"fig-induction-lens": "observed", "fig-copy-lens": "observed"},
    "glossary/attention.qmd": {"fig-induction-heads": "observed"},
    "glossary/activation-patching.qmd": {"fig-induction-patching": "observed"},
    **{f"glossary/{name}.qmd": {} for name in GLOSSARY_WITHOUT_FIGURES},
}
WORDS = ("analytic", "observed")
SECTION_CALLOUT = '::: {.callout-note title="Observed, not analytic"}'  # one callout for a whole section
HEADING = re.compile(r"^#{1,6} ")


def _figures(page) -> set[str]:
    labels = {cell.label for cell in page.cells if cell.label.startswith("fig-")}
    return labels | set(re.findall(r"\{#(fig-[\w-]+)[^}]*\}", page.prose))


def _said_in_a_sentence(page, figure: str) -> set[str]:
    """The bold words (**analytic**, **observed**) of each prose sentence that refers to ``figure``."""
    said = set()
    for paragraph in re.split(r"\n\s*\n", page.prose):
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z])", " ".join(paragraph.split())):
            if re.search(rf"@{re.escape(figure)}\b", sentence):
                found = {word for word in WORDS if re.search(rf"\*\*{word}\*\*", sentence, re.IGNORECASE)}
                if len(found) == 1:
                    said |= found
    return said


def _said_by_its_section(page, figure: str) -> set[str]:
    """"observed" when the figure's section (from its heading down to the figure) opens with the section callout."""
    lines = page.body.splitlines()
    at = next(index for index, line in enumerate(lines) if re.match(rf"#\|\s*label:\s*{re.escape(figure)}\s*$", line))
    start = max((index for index in range(at) if HEADING.match(lines[index])), default=0)
    return {"observed"} if SECTION_CALLOUT in lines[start:at] else set()


def _first_callout(page) -> str:
    match = re.search(r"^::: \{\.callout-note[^}]*\}\n(.*?)\n:::", page.body, re.S | re.M)
    assert match, f"{page.path.name} has no note callout"
    return " ".join(match.group(1).split())


@pytest.mark.parametrize("source", sorted(FIGURES))
def test_every_page_says_which_figures_are_analytic_and_which_observed(source):
    page = read_page(ROOT / source)
    assert _figures(page) == set(FIGURES[source])
    for figure, word in FIGURES[source].items():
        said = _said_in_a_sentence(page, figure) | _said_by_its_section(page, figure)
        assert said == {word}, f"{source}: {figure} is called {sorted(said) or 'nothing'}, not {word}"
    if not FIGURES[source]:  # a page without figures says so where it says what is analytic and what observed
        callout = _first_callout(page)
        assert re.search(r"This (page|index) has no figures\.", callout), source
        assert all(f"**{word}**" in callout for word in WORDS), source
