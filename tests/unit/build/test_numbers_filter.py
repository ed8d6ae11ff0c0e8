"""assets/site/numbers.lua, run by Quarto's pandoc on a page of its own, and the post-render step that gathers the
pages' lists (residlab/build/numbers_list.py): every number a page shows is listed under the id of what computed
it, with its value as displayed and its class, and the page is written exactly as without the filter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from residlab.build import numbers_list

ROOT = Path(__file__).resolve().parents[3]
FILTER = ROOT / "assets" / "site" / "numbers.lua"
PAGE = """---
number-kind: observed
number-model: copy model
---

## Setup {#setup}

Typed 2017 and Pythia-14M and GPT-2, then [accuracy 0.93 of 12]{.rl-number expr="f\\"{acc:.2f}\\""} here, and a
gap of −0.5 and 3.2e-05; `code 99` and $x_{7}$ are not read.

## Toy {#toy number-kind="analytic" number-model="toy"}

::: {#tally .cell}
```python
print(42)
```

::: {.cell-output .cell-output-stdout}
```
norm 1.5 then 7
```
:::

| position | norm |
| --- | --- |
| 0 | 2.25 |
| 1 | [3.5]{.rl-number expr="n"} |
:::

### Within the toy {#within}

Still [8]{.rl-number expr="k"} here.

## Next {#next}

Then [9]{.rl-number expr="j"}.
"""


def run_filter(tmp_path: Path, page: str) -> tuple[str, dict]:
    quarto = os.environ.get("QUARTO") or shutil.which("quarto")
    if not quarto:
        pytest.fail("Quarto is not on PATH: the filter runs in Quarto's pandoc", pytrace=False)
    out = tmp_path / "numbers.json"
    done = subprocess.run([quarto, "pandoc", "-f", "markdown", "-t", "html5", "--lua-filter", str(FILTER)],
                          input=page, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "RESIDLAB_NUMBERS_OUT": str(out)})  # fmt: skip
    assert done.returncode == 0 and "WARNING" not in done.stderr, done.stderr
    return done.stdout, {n["id"]: n for n in json.loads(out.read_text(encoding="utf-8"))["numbers"]}


def test_every_number_is_listed_under_what_computed_it(tmp_path):
    html, numbers = run_filter(tmp_path, PAGE)
    values = {i: n["value"] for i, n in numbers.items()}
    assert values == {
        "#setup / Typed": "2017",
        "#setup / and a gap of": "−0.5",
        "#setup / gap of −# and": "3.2e-05",
        'f"{acc:.2f}"[1]': "0.93",
        'f"{acc:.2f}"[2]': "12",
        "cell:tally / norm": "1.5",
        "cell:tally / norm # then": "7",
        "cell:tally / 0 / position": "0",
        "cell:tally / 0 / norm": "2.25",
        "cell:tally / 1 / position": "1",
        "n": "3.5",
        "k": "8",
        "j": "9",
    }  # names (Pythia-14M, GPT-2), code, math and the cell's own source are not numbers it shows
    assert numbers["n"]["origin"] == "inline" and numbers["cell:tally / 0 / norm"]["origin"] == "cell"
    assert (numbers['f"{acc:.2f}"[1]']["kind"], numbers['f"{acc:.2f}"[1]']["model"]) == ("observed", "copy model")
    assert (numbers["n"]["kind"], numbers["n"]["model"]) == ("analytic", "toy")  # the heading's declaration
    assert numbers["k"]["kind"] == "analytic" and numbers["k"]["section"] == "within"  # holds under its subheadings
    assert (numbers["j"]["kind"], numbers["j"]["model"]) == ("observed", "copy model")  # until the next of its level
    # The page is written as without the filter: the marks and declarations are read, not kept.
    assert "rl-number" not in html and "number-kind" not in html and "accuracy 0.93 of 12 here" in html


def test_a_number_added_to_a_page_is_listed_with_its_cells_id(tmp_path):
    added = PAGE.replace("| 1 | [3.5]", "| 1 | [3.5]{.rl-number expr=\"n\"} |\n| 2 | [4.75]{.rl-number expr=\"m\"} |\n| 9 | [3.5]", 1)
    _, before = run_filter(tmp_path, PAGE)
    _, after = run_filter(tmp_path, added.replace('| 9 | [3.5]{.rl-number expr="n"} |\n', "", 1))
    assert set(after) - set(before) == {"m", "cell:tally / 2 / position"}
    assert after["m"]["value"] == "4.75" and after["m"]["origin"] == "inline"


def test_the_site_list_keeps_pages_not_rendered_again_and_drops_pages_gone(tmp_path):
    root, site = tmp_path / "project", tmp_path / "project" / "_site"
    (root / "residlab" / "locks").mkdir(parents=True)
    shutil.copyfile(ROOT / "requirements.txt", root / "requirements.txt")
    shutil.copyfile(ROOT / "residlab" / "locks" / "pythia-14m.lock.json", root / "residlab" / "locks" / "pythia-14m.lock.json")
    (site / "labs").mkdir(parents=True)
    for page in ("labs/a.html", "labs/b.html"):
        (site / page).write_text("<html></html>", encoding="utf-8")
    lists = root / numbers_list.PAGE_LISTS
    lists.mkdir()
    (lists / "labs__a.qmd.json").write_text(json.dumps({"page": "labs/a.qmd", "numbers": [{"id": "x", "value": "1"}]}))
    (lists / "labs__b.qmd.json").write_text(json.dumps({"page": "labs/b.qmd", "numbers": [{"id": "y", "value": "2"}]}))
    (lists / "labs__gone.qmd.json").write_text(json.dumps({"page": "labs/gone.qmd", "numbers": []}))
    numbers_list.write(root, site)
    (lists / "labs__b.qmd.json").unlink()  # a render of page a alone
    (lists / "labs__a.qmd.json").write_text(json.dumps({"page": "labs/a.qmd", "numbers": [{"id": "x", "value": "3"}]}))
    listed = json.loads(numbers_list.write(root, site).read_text(encoding="utf-8"))
    assert [(p["page"], p["numbers"]) for p in listed["pages"]] == [
        ("labs/a.qmd", [{"id": "x", "value": "3"}]), ("labs/b.qmd", [{"id": "y", "value": "2"}])]
    assert listed["pins"]["requirements.txt torch"] == listed["pins"]["lock torch"]


def test_an_unreadable_list_is_one_line_naming_it(tmp_path):
    bad = tmp_path / "numbers.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(numbers_list.NumbersError, match="numbers.json is not JSON"):
        numbers_list.read_json(bad, "the list of numbers")
