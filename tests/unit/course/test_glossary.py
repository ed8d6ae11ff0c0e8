"""The glossary: its figure, the worked example's cache layouts and the pages' promises."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import yaml

from residlab.course.glossary.cache_layouts import (
    CacheLayouts,
    copy_model_cache_layouts,
    encode_prompt,
    library_hidden_states,
    record_block_outputs,
    specimen_cache_layouts,
)
from residlab.build.site_check import load_config, read_page
from residlab.capture.versions import import_transformers_quietly
from residlab.course import pages
from residlab.course.glossary.glossary_figures import FOUR_TOKENS, four_position_figure

ROOT = Path(__file__).resolve().parents[3]
GLOSSARY = ROOT / "glossary"
# The entries, in the sidebar's order: the glossary family's other pages in the registry.
ENTRY_PAGES = tuple(page.removeprefix("glossary/") for page in pages.family_of("glossary/index.qmd").contents)


# ---------------------------------------------------------------------------------------------------------
# The four-position figure


def _texts(figure) -> list[str]:
    return [text.get_text() for text in figure.findobj(lambda artist: hasattr(artist, "get_text"))]


def _arrows_in_colour(figure, colour: str) -> int:
    """How many annotation arrows of the figure are drawn in ``colour``."""
    return sum(
        1
        for axes in figure.axes
        for text in axes.texts
        if getattr(text, "arrowprops", None) and text.arrowprops.get("color") == colour
    )


def test_figure_has_four_positions_mlps_causal_arrows_and_a_readout():
    figure = four_position_figure()
    texts = _texts(figure)
    for token in FOUR_TOKENS:
        assert token in texts
    assert texts.count("MLP") == 4  # one position-wise MLP per position
    assert any(text.startswith("readout") for text in texts)
    assert any("selected state" in text for text in texts)
    # Causal attention: position t reads positions 0..t, so 1 + 2 + 3 + 4 arrows.
    assert _arrows_in_colour(figure, "#54278f") == 10


def test_figure_scales_with_the_number_of_positions_and_rejects_bad_labels():
    figure = four_position_figure(("a", "b", "c"))
    assert _texts(figure).count("MLP") == 3
    assert _arrows_in_colour(figure, "#54278f") == 6
    with pytest.raises(ValueError, match="at least two"):
        four_position_figure(("only",))
    with pytest.raises(ValueError, match="non-empty string"):
        four_position_figure(("a", ""))


def test_figure_saves_as_an_svg_that_names_the_four_tokens(tmp_path):
    import matplotlib

    path = tmp_path / "four-positions.svg"
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # keep text as <text> so it can be searched
        four_position_figure().savefig(path, format="svg")
    svg = path.read_text(encoding="utf-8")
    assert len(svg) > 10_000
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    for token in FOUR_TOKENS:
        assert f">{token}<" in svg


# ---------------------------------------------------------------------------------------------------------
# The worked example: tokens and the two cache layouts


def test_the_real_tokenizer_splits_the_example_prompt():
    prompt = encode_prompt("The capital is Paris")
    assert prompt.ids == (510, 5347, 310, 7785)
    assert prompt.pieces == ("The", "Ġcapital", "Ġis", "ĠParis")
    assert prompt.input_ids.shape == (1, 4) and prompt.input_ids.dtype == torch.long
    assert len(encode_prompt("unbelievably").ids) > 1  # one word, several tokens
    with pytest.raises(ValueError, match="non-empty"):
        encode_prompt("")


@pytest.fixture(scope="module")
def specimen_layouts() -> CacheLayouts:
    return specimen_cache_layouts("The capital is Paris", seed=0)


def test_specimen_layouts_have_the_documented_shapes(specimen_layouts):
    cache = specimen_layouts
    assert tuple(cache.residual_after.shape) == (6, 4, 128)  # (num_blocks, n, d_model)
    assert tuple(cache.residual_boundaries.shape) == (7, 4, 128)  # (L + 1, n, d_model)
    assert tuple(cache.residual_after[2].shape) == (4, 128)
    assert tuple(cache.residual_after[2, -1].shape) == (128,)
    assert cache.pieces == ("The", "Ġcapital", "Ġis", "ĠParis")
    assert "synthetic" in cache.source


def test_after_block_k_is_boundary_k_plus_one_in_the_other_layout(specimen_layouts):
    cache = specimen_layouts
    for k in range(cache.num_blocks):
        assert torch.equal(cache.residual_after[k], cache.residual_boundaries[k + 1])
        for position in (0, -1):
            assert torch.equal(cache.after_block(k, position), cache.boundary(k + 1, position))
    # The off-by-one matters: the same index in both layouts is a different state.
    assert not torch.equal(cache.residual_after[2], cache.residual_boundaries[2])


def test_changing_the_position_selects_a_different_row(specimen_layouts):
    cache = specimen_layouts
    last, first = cache.residual_after[2, -1], cache.residual_after[2, 0]
    assert torch.equal(last, cache.residual_after[2, cache.num_positions - 1])
    assert not torch.equal(last, first)
    assert (last - first).norm() > 0.1


def test_indexing_outside_a_layout_is_a_clear_error(specimen_layouts):
    with pytest.raises(IndexError, match="block_index 6"):
        specimen_layouts.after_block(6, -1)
    with pytest.raises(IndexError, match="position 4"):
        specimen_layouts.boundary(0, 4)
    specimen_layouts.boundary(6, -4)  # the last boundary and the first position exist


def test_inconsistent_layouts_are_refused():
    with pytest.raises(ValueError, match="num_blocks \\+ 1"):
        CacheLayouts("test", ("a", "b"), torch.zeros(3, 2, 4), torch.zeros(3, 2, 4))
    with pytest.raises(ValueError, match="position labels"):
        CacheLayouts("test", ("a",), torch.zeros(3, 2, 4), torch.zeros(4, 2, 4))


@pytest.fixture(scope="module")
def specimen():
    import_transformers_quietly()
    from residlab.pythia.specimen import build_specimen_model

    return build_specimen_model(seed=0)


def test_library_hidden_states_normalise_the_last_entry(specimen, specimen_layouts):
    hidden = library_hidden_states(specimen, encode_prompt().input_ids)
    boundaries = specimen_layouts.residual_boundaries
    assert hidden.shape == boundaries.shape
    for j in range(boundaries.shape[0] - 1):
        assert torch.equal(hidden[j], boundaries[j])
    assert not torch.allclose(hidden[-1], boundaries[-1])
    with torch.no_grad():
        assert torch.allclose(hidden[-1], specimen.gpt_neox.final_layer_norm(boundaries[-1]), atol=1e-6)


def test_later_tokens_never_change_earlier_rows(specimen):
    def after_blocks(text: str) -> torch.Tensor:
        ids = encode_prompt(text).input_ids
        return record_block_outputs(list(specimen.gpt_neox.layers), lambda: specimen(ids))

    paris, london = after_blocks("The capital is Paris"), after_blocks("The capital is London")
    assert torch.equal(paris[:, :-1], london[:, :-1])
    assert not torch.equal(paris[:, -1], london[:, -1])


def test_block_hooks_are_removed_even_when_the_run_fails(specimen):
    layers = list(specimen.gpt_neox.layers)
    # transformers may keep hooks of its own on the layers; ours must leave exactly those behind.
    hooks_before = [tuple(layer._forward_hooks) for layer in layers]

    def failing_run():
        specimen(encode_prompt().input_ids)
        raise RuntimeError("stop after the forward pass")

    with pytest.raises(RuntimeError, match="stop after"):
        record_block_outputs(layers, failing_run)
    assert [tuple(layer._forward_hooks) for layer in layers] == hooks_before
    with pytest.raises(RuntimeError, match="ran 0 times"):
        record_block_outputs(layers, lambda: None)
    assert [tuple(layer._forward_hooks) for layer in layers] == hooks_before
    ids = encode_prompt().input_ids
    with pytest.raises(RuntimeError, match="block 0 ran 2 times"):
        record_block_outputs(layers, lambda: (specimen(ids), specimen(ids)))
    assert [tuple(layer._forward_hooks) for layer in layers] == hooks_before


@pytest.mark.slow  # trains the lesson's copy model (a few seconds)
def test_copy_model_layouts_hold_its_two_boundaries():
    cache = copy_model_cache_layouts()
    assert tuple(cache.residual_after.shape) == (1, 5, 32)
    assert tuple(cache.residual_boundaries.shape) == (2, 5, 32)
    assert torch.equal(cache.residual_after[0], cache.residual_boundaries[1])
    assert not torch.equal(cache.residual_boundaries[0], cache.residual_boundaries[1])


# ---------------------------------------------------------------------------------------------------------
# The pages


def test_every_entry_is_in_the_sidebar_and_the_index():
    sidebar = yaml.safe_dump(load_config(ROOT)["website"]["sidebar"])
    index = (GLOSSARY / "index.qmd").read_text(encoding="utf-8")
    assert set(ENTRY_PAGES) == {path.name for path in GLOSSARY.glob("*.qmd")} - {"index.qmd"}
    for page in ENTRY_PAGES:
        assert f"glossary/{page}" in sidebar
        assert f"]({page})" in index


def _figure_pages() -> list[str]:
    return [page for page in ENTRY_PAGES if any("plt.show()" in cell.source or cell.label.startswith("fig-")
                                                for cell in read_page(GLOSSARY / page).cells)]


def test_the_entries_that_draw_figures():
    # The residual stream's four positions; the trained induction model's heads, lens and patching heatmap.
    assert _figure_pages() == ["residual-stream.qmd", "attention.qmd", "logit-lens.qmd", "activation-patching.qmd"]


@pytest.mark.parametrize("page", _figure_pages())
def test_every_figure_cell_is_labelled_captioned_and_referred_to(page):
    # Its alt text is the site check's (residlab site check, for every fig- cell of every page).
    parsed = read_page(GLOSSARY / page)
    drawing = [cell for cell in parsed.cells if "plt.show()" in cell.source]
    assert drawing and drawing == [cell for cell in parsed.cells if cell.label.startswith("fig-")]
    for cell in drawing:
        assert str(cell.options.get("fig-cap") or "").strip(), f"{page}: {cell.label} has no caption"
        assert f"@{cell.label}" in parsed.prose, f"{page}: the text never refers to {cell.label}"


def test_the_residual_stream_entry_carries_the_four_position_figure():
    text = (GLOSSARY / "residual-stream.qmd").read_text(encoding="utf-8")
    assert text.count("#| label: fig-four-positions") == 1
    caption = re.search(r"^#\| fig-cap: (.*)$", text, re.MULTILINE).group(1)
    assert "omits normalisation" in caption and "residual-addition arrows" in caption
