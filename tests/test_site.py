"""The site as Quarto sees it: static checks, the harness itself, and (where Quarto exists) a real render."""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from residlab import site

ROOT = Path(__file__).resolve().parent.parent
LIBRARY_REPR = re.compile(r"^(np\.|numpy\.|tensor\(|array\(|Fraction\(|<)")


def test_site_has_no_static_problems():
    assert site.check_site(ROOT) == []


def test_every_page_is_in_the_navigation():
    listed = {(ROOT / entry).resolve() for entry in site.navigation_entries(site.load_config(ROOT))}
    pages = site.site_pages(ROOT)
    assert len(pages) >= 12
    assert {page.resolve() for page in pages} <= listed


def _write_site(tmp_path: Path, page_text: str, variables: str = "a:\n  b: 1\n") -> Path:
    (tmp_path / "_quarto.yml").write_text(
        "project:\n  type: website\n  render: ['*.qmd']\nwebsite:\n  sidebar:\n    contents:\n      - p.qmd\n"
    )
    (tmp_path / "_variables.yml").write_text(variables)
    (tmp_path / "p.qmd").write_text(textwrap.dedent(page_text))
    return tmp_path


def test_static_check_names_each_kind_of_problem(tmp_path):
    root = _write_site(
        tmp_path,
        """\
        ---
        title: t
        bibliography: refs.bib
        ---
        See @fig-missing, @sec-twice, [gone](gone.qmd), ![img](gone.png), {{< var a.zzz >}} and [@nobody].

        ## One {#sec-twice}

        ## Two {#sec-twice}

        ```{python}
        #| label: fig-noalt
        pass
        ```
        """,
    )
    (root / "refs.bib").write_text("@article{somebody2020,\n  title={T},\n}\n")
    problems = "\n".join(site.check_site(root))
    assert "@fig-missing has 0 labels" in problems
    assert "@sec-twice has 2 labels" in problems
    assert "link target gone.qmd does not exist" in problems
    assert "link target gone.png does not exist" in problems
    assert "{{< var a.zzz >}} is not in _variables.yml" in problems
    assert "citation @nobody is not in the page's bibliography" in problems
    assert "figure cell fig-noalt has no fig-alt text" in problems


def test_pages_are_the_render_targets_less_partials(tmp_path):
    root = _write_site(tmp_path, "---\ntitle: t\n---\n")
    (root / "_part.qmd").write_text("partial\n")
    (root / "README.md").write_text("not a page\n")
    assert site.site_pages(root) == [root / "p.qmd"]
    (root / "stray.qmd").write_text("---\ntitle: s\n---\n")
    assert "stray.qmd is not in the navbar or sidebar" in site.check_site(root)


def test_static_check_passes_a_clean_page_and_follows_includes(tmp_path):
    root = _write_site(
        tmp_path,
        """\
        ---
        title: t
        ---
        {{< var a.b >}} and [self](p.qmd#top) and [out](https://example.org/x) `[not a link](nowhere.qmd)`

        {{< include _part.qmd >}}
        """,
    )
    (root / "_part.qmd").write_text("See @fig-z.\n\n```{python}\n#| label: fig-z\n#| fig-alt: a plot\npass\n```\n")
    assert site.check_site(root) == []
    assert [cell.label for cell in site.read_page(root / "p.qmd").cells] == ["fig-z"]


@pytest.mark.slow
def test_execution_reports_page_cell_label_and_line(tmp_path):
    root = _write_site(
        tmp_path,
        """\
        ---
        title: t
        ---
        ```{python}
        import os
        here = os.getcwd()
        ```

        Inline: `{python} 6 * 7`, `{python} "text"`, `{python} __import__("fractions").Fraction(1, 2)`.

        ```{python}
        #| label: boom
        raise ValueError("broken cell")
        ```
        """,
    )
    result = site.execute_page(root / "p.qmd", root)
    assert list(result.inline_values.values()) == ["42", "text", "Fraction(1, 2)"]
    assert [(failure.cell_number, failure.label, failure.location) for failure in result.failures] == [
        (2, "boom", "p.qmd:11")
    ]
    assert "ValueError: broken cell" in result.failures[0].message
    assert "p.qmd: cell 2 (boom) at p.qmd:11 failed" in str(result.failures[0])


@pytest.mark.slow
@pytest.mark.parametrize("page", site.site_pages(ROOT), ids=lambda path: str(path.relative_to(ROOT)))
def test_page_executes_cleanly(page, tmp_path):
    result = site.execute_page(page, ROOT, cache_dir=tmp_path / "jupyter-cache")
    assert not result.failures, "\n\n".join(str(failure) for failure in result.failures)
    variables = yaml.safe_load((ROOT / "_variables.yml").read_text())
    assert site.pandoc_warnings(site.page_markdown(result, variables)) == []
    for expression, value in result.inline_values.items():
        assert value.strip(), f"{page.name}: inline `{{python}} {expression}` rendered as nothing"
        # Quarto shows a non-string as its repr: a page must format numbers itself.
        assert not LIBRARY_REPR.match(value), f"{page.name}: inline `{{python}} {expression}` renders as {value}"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("quarto") is None, reason="Quarto is not installed here: `quarto render` runs where it is (see README)")
def test_quarto_render_builds_every_page_and_download(tmp_path):
    output = tmp_path / "_site"
    completed = subprocess.run(
        ["quarto", "render", "--cache-refresh", "--output-dir", str(output)],
        cwd=ROOT, capture_output=True, text=True, timeout=1800,
    )
    assert completed.returncode == 0, completed.stderr
    assert "WARN" not in completed.stderr, completed.stderr
    for page in site.site_pages(ROOT):
        assert (output / page.relative_to(ROOT).with_suffix(".html")).exists(), page
    for runner in ("trace_residual_toy.py", "residual_stream_lab.py", "inspect_residual_stream.py",
                   "audit_residual_writes.py", "residual-requirements.txt"):  # fmt: skip
        built = output / "assets" / "labs" / runner
        assert built.read_bytes() == (ROOT / "assets" / "labs" / runner).read_bytes()
    # The lesson's audit packet, written while the page ran, is published beside the page, its links intact.
    from residlab import audit

    links = audit.Verification()
    audit.check_links(audit.read_packet(output / "lessons" / "copy-model-audit-packet"), links)
    assert links.passed, links.failures
    # The built site works offline: no script, stylesheet or font is fetched from another host.
    remote_asset = re.compile(r"<(?:script|link)\b[^>]*(?:src|href)=\"(?:https?:)?//[^\"]+\"[^>]*>")
    for html in output.rglob("*.html"):
        for tag in remote_asset.findall(html.read_text(encoding="utf-8")):
            assert "stylesheet" not in tag and "<script" not in tag and "font" not in tag, f"{html.name}: {tag}"
    for css in output.rglob("*.css"):
        assert not re.search(r"@import\s+url\(\s*[\"']?(?:https?:)?//", css.read_text(encoding="utf-8")), css.name


@pytest.mark.slow
def test_page_markdown_is_what_pandoc_parses_and_bad_math_is_caught(tmp_path):
    root = _write_site(
        tmp_path,
        """\
        ---
        title: t
        ---
        Width {{< var a.b >}}, value `{python} 2 + 3`.

        ```{python}
        #| output: asis
        print("Good $\\\\lVert x \\\\rVert$ and bad $\\\\notamacro{x}$.")
        ```

        ```{python}
        print("$\\\\alsonotamacro$ is plain output, not markdown")
        ```
        """,
    )
    result = site.execute_page(root / "p.qmd", root)
    markdown = site.page_markdown(result, {"a": {"b": 1}})
    assert "Width 1, value 5." in markdown
    assert "alsonotamacro" not in markdown
    warnings = site.pandoc_warnings(markdown)
    assert len(warnings) == 1 and "notamacro" in warnings[0]


@pytest.mark.slow
def test_a_clean_page_round_trips_through_jupyter_cache(tmp_path):
    from jupyter_cache import get_cache

    root = _write_site(tmp_path, "---\ntitle: t\n---\n```{python}\nprint(sum(range(5)))\n```\n\n`{python} 7`\n")
    cache_dir = tmp_path / "cache"
    result = site.execute_page(root / "p.qmd", root, cache_dir=cache_dir)
    assert not result.failures and result.inline_values == {"7": "7"}
    assert result.cell_outputs[0][0]["text"] == "10\n"
    records = get_cache(str(cache_dir)).list_cache_records()
    assert [record.uri for record in records] == [str((root / "p.qmd").resolve())]


@pytest.mark.slow
def test_inline_expressions_are_evaluated_where_they_stand(tmp_path):
    root = _write_site(
        tmp_path,
        """\
        ---
        title: t
        ---
        Before any cell: `{python} 1 + 1`.

        ```{python}
        value = "first"
        ```

        Now `{python} value`.

        ```{python}
        value = "second"
        ```

        Finally `{python} value`.
        """,
    )
    page = site.read_page(root / "p.qmd")
    assert page.inline_expressions == [("1 + 1", 0), ("value", 1), ("value", 2)]
    result = site.execute_page(root / "p.qmd", root)
    assert not result.failures
    assert sum("_residlab_inline(" in cell.source for cell in result.notebook.cells) == 3
    outputs = [
        output["text"].strip("\x1e\n")
        for cell in result.notebook.cells
        for output in cell.get("outputs", [])
        if output.get("name") == "stdout" and output["text"].startswith("\x1e")
    ]
    assert outputs == ["2", "first", "second"]
