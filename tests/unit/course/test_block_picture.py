"""residlab.course.lesson.block_picture: the picture of the two blocks names every hook site as the code does (the
copy model's hook points, in the order a forward pass reaches them; the capture's site names, as a capture of a
real GPT-NeoX block records them), wires the MLP as the block's table says, and is an accessible, well-formed SVG
that fits its drawing."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

import pytest
import torch

from residlab.capture.blocks import BLOCK_TYPES, COPY_MODEL
from residlab.capture.sites import site_paths
from residlab.course import block_figure
from residlab.course.ui.diagrams import DiagramError
from residlab.course.lesson import block_picture
from residlab.course.models.copy_model import HookPoint, PreNormBlock

SVG = "{http://www.w3.org/2000/svg}"
NEOX = BLOCK_TYPES["gpt_neox"]


def parsed(block_type) -> ElementTree.Element:
    return ElementTree.fromstring(block_picture.block_svg(block_type))


def site_names(svg: ElementTree.Element) -> list[tuple[float, list[str]]]:
    """(y of the dot, the names beside it) for every site marked, top to bottom (left to right at one height)."""
    dots = sorted((float(dot.get("cy")), float(dot.get("cx"))) for dot in svg.iter(f"{SVG}circle")
                  if dot.get("class") == "rl-site")
    labels = sorted(((float(text[0].get("y")), float(text[0].get("x"))), [span.text for span in text])
                    for text in svg.iter(f"{SVG}text") if text.get("class") == block_picture.NAMES)
    assert len(dots) == len(labels)
    return [(y, names) for (y, _), (_, names) in zip(dots, labels)]


def forward_order_of_hook_points() -> list[str]:
    """The copy model's block run once: the names of its hook points in the order the forward pass reaches them."""
    block, reached = PreNormBlock(d_model=8, n_heads=2), []
    for name, module in block.named_modules():
        if isinstance(module, HookPoint):
            module.register_forward_hook(lambda module, inputs, output, name=name: reached.append(name))
    with torch.no_grad():
        block(torch.zeros(1, 3, 8))
    return reached


def test_the_sequential_block_marks_every_hook_point_of_the_copy_model_in_forward_order():
    marked = [names[0] for _, names in site_names(parsed(COPY_MODEL))]
    assert marked == forward_order_of_hook_points()  # all five, top to bottom as the forward pass reaches them


def test_the_capture_names_are_those_a_capture_of_a_block_records():
    """Block 0 of a real capture's site list, with the picture's ℓ for the 0."""
    for block_type in (COPY_MODEL, NEOX):
        pictured = {names[1].replace(block_picture.BLOCK, "0") for _, names in site_names(parsed(block_type))
                    if len(names) == 2}
        assert pictured == {name for name, _, _ in site_paths(block_type, 1)}, block_type.name


def test_the_parallel_block_has_no_mid_block_state_and_one_sum():
    parallel, sequential = parsed(NEOX), parsed(COPY_MODEL)
    hooks = [names[0] for _, names in site_names(parallel)]
    assert block_picture.MID_HOOK not in hooks and len(hooks) == 4
    assert block_picture.MID_HOOK in [names[0] for _, names in site_names(sequential)]

    def sums(svg):
        return sum(circle.get("class") == "rl-sum" for circle in svg.iter(f"{SVG}circle"))

    assert (sums(parallel), sums(sequential)) == (1, 2)
    # the table decides: the parallel block's MLP reads the block input, the sequential one's the state after attention
    assert block_picture.parallel(NEOX) and not block_picture.parallel(COPY_MODEL)
    assert not block_picture.parallel(BLOCK_TYPES["gpt_neox_sequential"])
    # both writes sit at the one sum; the output below it, the input above
    (top, _), *writes, (bottom, _) = site_names(parallel)
    assert len({y for y, _ in writes}) == 1 and top < writes[0][0] < bottom


@pytest.mark.parametrize("block_type", [COPY_MODEL, NEOX], ids=lambda t: t.name)
def test_the_svg_is_an_image_described_from_the_same_sites(block_type):
    svg = parsed(block_type)
    title, description = svg.find(f"{SVG}title"), svg.find(f"{SVG}desc")
    assert svg.get("role") == "img"
    assert svg.get("aria-labelledby") == title.get("id") and svg.get("aria-describedby") == description.get("id")
    assert title.text == block_picture.title(block_type) and block_type.block_class in title.text
    for _, names in site_names(svg):  # every name drawn is said, and in the same order as drawn
        for name in names:
            assert name in description.text, name
    spoken = sorted((hook for hook in block_picture.TRACE_HOOK_POINTS.values() if hook in description.text),
                    key=description.text.index)
    # top to bottom; two sites at one height (the parallel block's writes) in either order
    drawn = sorted(site_names(svg), key=lambda site: (site[0], description.text.index(site[1][0])))
    assert spoken == [names[0] for _, names in drawn]
    if block_picture.parallel(block_type):
        assert "post_attention_dropout" in description.text and "no state between them" in description.text


@pytest.mark.parametrize("block_type", [COPY_MODEL, NEOX], ids=lambda t: t.name)
def test_everything_drawn_fits_the_drawing(block_type):
    svg = parsed(block_type)
    width, height = float(svg.get("width")), float(svg.get("height"))
    assert svg.get("viewBox") == f"0 0 {svg.get('width')} {svg.get('height')}"
    for text in svg.iter(f"{SVG}text"):
        code = text.get("class") == block_picture.NAMES
        for span in text.iter(f"{SVG}tspan"):
            x, y = float(span.get("x")), float(span.get("y"))
            span_width = len(span.text) * (block_picture.CODE_CHAR_PX if code else block_picture.text_width("x"))
            left = {"start": x, "middle": x - span_width / 2, "end": x - span_width}[text.get("text-anchor")]
            assert 0 <= left and left + span_width <= width + 0.5 and 0 < y < height, span.text
    for rect in svg.iter(f"{SVG}rect"):
        assert float(rect.get("x")) >= 0 and float(rect.get("x")) + float(rect.get("width")) <= width + 0.5


def test_the_figure_holds_both_blocks_and_needs_a_caption():
    figure = block_figure("Both blocks & their sites.")
    assert figure.count("<svg ") == 2 and 'class="rl-diagram-row"' in figure
    assert "<figcaption>Both blocks &amp; their sites.</figcaption>" in figure
    assert re.findall(r'<title id="([^"]+)"', figure) == ["block-copy-model-title", "block-gpt-neox-title"]
    with pytest.raises(DiagramError, match="caption"):
        block_figure("  ")
