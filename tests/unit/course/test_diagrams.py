"""residlab.course.ui.diagrams: the SVG is well-formed and accessible, its drawing matches its description, nodes never
overlap, arrows start and end on their nodes' edges, and a diagram that cannot be drawn is refused by name."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

import pytest

from residlab.course import Arrow, Diagram, Node, diagram_figure, diagram_svg
from residlab.course.ui import diagrams

SVG = "{http://www.w3.org/2000/svg}"

LOOP = Diagram(
    name="loop", kind="Flowchart", title="A loop",
    nodes=(Node("a", "First & <one>", row=0, emphasis=True), Node("b", "Second\non two lines", row=1),
           Node("c", "Third", row=2)),
    arrows=(Arrow("a", "b"), Arrow("b", "c", "goes on"), Arrow("c", "a", "back\nagain", dashed=True)),
)
STATES = Diagram(
    name="states", kind="State diagram", title="States",
    nodes=(Node("start", row=0, shape="start"), Node("claim", "Claim", row=1, shape="rounded"),
           Node("test", "Test", row=2, shape="rounded"), Node("side", "Revise the claim", row=2, column=1, shape="rounded"),
           Node("end", row=3, shape="end")),
    arrows=(Arrow("start", "claim"), Arrow("claim", "test"), Arrow("test", "side", "fails"),
            Arrow("side", "claim", "restate"), Arrow("test", "end")),
)


def parsed(diagram: Diagram) -> ElementTree.Element:
    return ElementTree.fromstring(diagram_svg(diagram))


@pytest.mark.parametrize("diagram", [LOOP, STATES], ids=lambda d: d.name)
def test_the_svg_is_an_image_with_a_title_and_a_description_of_every_arrow(diagram):
    svg = parsed(diagram)
    assert svg.get("role") == "img"
    title = svg.find(f"{SVG}title")
    description = svg.find(f"{SVG}desc")
    assert svg.get("aria-labelledby") == title.get("id") == f"{diagram.name}-title"
    assert svg.get("aria-describedby") == description.get("id") == f"{diagram.name}-desc"
    assert title.text == diagram.title
    assert description.text == diagrams.describe(diagram)
    assert description.text.startswith(f"{diagram.kind}: {diagram.title}.")
    for arrow in diagram.arrows:  # each arrow in words, labels included
        if arrow.label:
            assert f"labelled “{' '.join(arrow.label.split())}”" in description.text
    assert description.text.count("leads to") == len(diagram.arrows)
    assert description.text.count("a dashed arrow") == sum(arrow.dashed for arrow in diagram.arrows)


@pytest.mark.parametrize("diagram", [LOOP, STATES], ids=lambda d: d.name)
def test_every_label_line_is_real_text(diagram):
    lines = ["".join(span.itertext()) for span in parsed(diagram).iter(f"{SVG}tspan")]
    expected = [line for node in diagram.nodes for line in node.lines]
    expected += [line for arrow in diagram.arrows if arrow.label for line in arrow.label.split("\n")]
    assert sorted(lines) == sorted(expected)
    assert "First &amp; &lt;one&gt;" in diagram_svg(LOOP)  # markup in a label is text, not markup


@pytest.mark.parametrize("diagram", [LOOP, STATES], ids=lambda d: d.name)
def test_nodes_do_not_overlap_and_fit_the_drawing(diagram):
    boxes, width, height = diagrams.layout(diagram)
    placed = list(boxes.values())
    for i, one in enumerate(placed):
        assert 0 <= one.x and one.right <= width and 0 <= one.y and one.bottom <= height
        for other in placed[i + 1:]:
            apart = one.right <= other.x or other.right <= one.x or one.bottom <= other.y or other.bottom <= one.y
            assert apart, (one.node.key, other.node.key)
    svg = parsed(diagram)
    assert (float(svg.get("width")), float(svg.get("height"))) == (pytest.approx(width, abs=0.1), pytest.approx(height, abs=0.1))


def on_edge(point, box) -> bool:
    x, y = point
    inside_x, inside_y = box.x - 0.01 <= x <= box.right + 0.01, box.y - 0.01 <= y <= box.bottom + 0.01
    return (inside_x and (abs(y - box.y) < 0.01 or abs(y - box.bottom) < 0.01)) or \
           (inside_y and (abs(x - box.x) < 0.01 or abs(x - box.right) < 0.01))


@pytest.mark.parametrize("diagram", [LOOP, STATES], ids=lambda d: d.name)
def test_arrows_run_from_edge_to_edge_in_straight_segments_clear_of_other_nodes(diagram):
    boxes, _, _ = diagrams.layout(diagram)
    for arrow in diagram.arrows:
        points = diagrams._route(arrow, boxes)
        assert on_edge(points[0], boxes[arrow.source]) and on_edge(points[-1], boxes[arrow.target]), arrow
        for (x0, y0), (x1, y1) in zip(points, points[1:]):
            assert x0 == x1 or y0 == y1, arrow  # horizontal or vertical
            for key, box in boxes.items():
                if key in (arrow.source, arrow.target):
                    continue
                crosses = min(x0, x1) < box.right and max(x0, x1) > box.x and min(y0, y1) < box.bottom and max(y0, y1) > box.y
                assert not crosses, (arrow, key)


def test_the_loop_goes_round_the_right_and_its_label_sits_beside_it():
    boxes, width, _ = diagrams.layout(LOOP)
    points = diagrams._route(LOOP.arrows[2], boxes)
    lane = points[1][0]
    assert len(points) == 4 and lane > max(box.right for box in boxes.values())
    x, _, anchor = diagrams._label_anchor(points)
    assert anchor == "start" and x > lane
    assert x + max(map(diagrams.text_width, ["back", "again"])) <= width


def test_colours_follow_the_system_setting_and_quartos_toggle():
    svg = diagram_svg(LOOP)
    style = re.search(r"<style>(.*)</style>", svg, re.DOTALL).group(1)
    assert "@media (prefers-color-scheme: dark)" in style and "body.quarto-dark .rl-diagram" in style
    for palette in (diagrams.LIGHT, diagrams.DARK):
        for value in palette.values():
            assert value in style
    # no colour is written on an element: each comes from a variable the schemes set
    assert not re.search(r'(fill|stroke)="#', svg)


def test_two_diagrams_on_one_page_have_distinct_ids():
    ids = re.findall(r'id="([^"]+)"', diagram_svg(LOOP) + diagram_svg(STATES))
    assert len(ids) == len(set(ids)) == 4


def test_the_figure_is_a_raw_html_block_with_its_caption():
    figure = diagram_figure(LOOP, "A caption & more")
    assert figure.lstrip().startswith("```{=html}") and figure.rstrip().endswith("```")
    assert "<figcaption>A caption &amp; more</figcaption>" in figure
    assert "\n\n" not in figure.strip()  # a blank line inside would end pandoc's raw block early


@pytest.mark.parametrize(("diagram", "message"), [
    (Diagram("Bad Name", "t", (Node("a", "A"),)), "diagram name 'Bad Name'"),
    (Diagram("d", "t", (Node("a", "A"), Node("a", "B", row=1))), "two nodes are called 'a'"),
    (Diagram("d", "t", (Node("a", "A"), Node("b", "B"))), "'b' and 'a' are both at row 0, column 0"),
    (Diagram("d", "t", (Node("a", "A"),), (Arrow("a", "z"),)), "names 'z', which is not a node"),
    (Diagram("d", "t", (Node("a", "A"),), (Arrow("a", "a"),)), "from 'a' to itself"),
    (Diagram("d", "t", (Node("a", "A", shape="cloud"),)), "shape 'cloud'"),
    (Diagram("d", "t", (Node("a", ""),)), "box 'a' has no label"),
])
def test_a_diagram_that_cannot_be_drawn_is_refused_by_name(diagram, message):
    with pytest.raises(diagrams.DiagramError, match=re.escape(message)):
        diagram_svg(diagram)


def test_a_figure_needs_a_caption():
    with pytest.raises(diagrams.DiagramError, match="needs a caption"):
        diagram_figure(LOOP, " ")
