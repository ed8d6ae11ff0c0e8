"""Box-and-arrow diagrams drawn when the site is built: inline SVG, so no diagram library reaches the reader.

    from residlab.course import Arrow, Diagram, Node, diagram_figure

    loop = Diagram(
        name="explanation-loop", kind="Flowchart", title="Four checks on a residual-stream explanation",
        nodes=(Node("read", "A readout shows the answer", row=0, emphasis=True), Node("test", "Intervene", row=1)),
        arrows=(Arrow("read", "test"), Arrow("test", "read", "re-test", dashed=True)),
    )
    print(diagram_figure(loop, caption="..."))  # in a cell with `output: asis`

A diagram is a grid: each node names its row and column; the grid's columns and rows take the size of their
widest and tallest node, with room between them for the labels of the arrows that cross. An arrow is
straight between nodes in one row or one column; from a node to one above it in the same column it loops
round the right-hand side; between nodes in different rows and columns it leaves the source vertically and
enters the target from the side. Nodes are boxes (``"box"``, ``"rounded"``) or a state diagram's start and end
(``"start"``, ``"end"``).

What the reader gets: real ``<text>`` (found by the browser's search, read by translation tools), and for
assistive technology ``role="img"`` with a ``<title>`` and a ``<desc>`` that ``describe`` writes from the
same nodes and arrows as the drawing, so the two cannot disagree. Colours are CSS variables set for the light
scheme, for ``prefers-color-scheme: dark``, and for Quarto's ``body.quarto-dark`` (its toggle), so the
diagram follows the page's scheme without being drawn twice.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from html import escape

FONT_PX = 16  # the page's body text size
SMALLEST_TEXT_PX = 11  # what a diagram's text may shrink to where the column is narrower than the diagram
LINE_PX = 21  # line height of a label
CHAR_PX = 0.6 * FONT_PX  # a generous average advance of the page's sans-serif: boxes fit any system font
PAD_X, PAD_Y = 14, 10  # inside a box, around its text
LABEL_PAD = 4  # around an arrow's label, on the page's background
GAP_X, GAP_Y = 48, 40  # between grid columns and rows before labels need more
LOOP_LANE = 28  # how far right of the nodes a loop runs
MARGIN = 12
HEAD = 9  # arrowhead length
TERMINAL_RADIUS = 10
SHAPES = ("box", "rounded", "start", "end")
NAME = re.compile(r"^[a-z][a-z0-9-]*$")

# Light values; the dark scheme's follow the reader's system setting, and Quarto's toggle (body.quarto-dark)
# overrides that. Every text colour reads at 4.5:1 or better on the fill behind it.
LIGHT = {"ink": "#212529", "fill": "#eef3fc", "stroke": "#3d6fb6", "emphasis": "#4f46e5", "line": "#495057",
         "paper": "#ffffff"}
DARK = {"ink": "#e2e5e9", "fill": "#1c2740", "stroke": "#6ea8fe", "emphasis": "#a5a6f6", "line": "#adb5bd",
        "paper": "#16181d"}


def _variables(palette: dict[str, str]) -> str:
    return " ".join(f"--rl-diagram-{key}: {value};" for key, value in palette.items())


STYLE = f"""
.rl-diagram {{ {_variables(LIGHT)} max-width: 100%; height: auto; font-family: inherit; }}
@media (prefers-color-scheme: dark) {{ body:not(.quarto-light) .rl-diagram {{ {_variables(DARK)} }} }}
body.quarto-dark .rl-diagram {{ {_variables(DARK)} }}
.rl-diagram text {{ fill: var(--rl-diagram-ink); font-size: {FONT_PX}px; }}
.rl-diagram .rl-node {{ fill: var(--rl-diagram-fill); stroke: var(--rl-diagram-stroke); stroke-width: 1.5; }}
.rl-diagram .rl-node.rl-emphasis {{ stroke: var(--rl-diagram-emphasis); stroke-width: 2.5; }}
.rl-diagram .rl-terminal {{ fill: var(--rl-diagram-ink); stroke: var(--rl-diagram-ink); }}
.rl-diagram .rl-terminal-ring {{ fill: none; stroke: var(--rl-diagram-ink); stroke-width: 1.5; }}
.rl-diagram .rl-arrow {{ fill: none; stroke: var(--rl-diagram-line); stroke-width: 1.5; }}
.rl-diagram .rl-arrow.rl-dashed {{ stroke-dasharray: 5 4; }}
.rl-diagram .rl-head {{ fill: var(--rl-diagram-line); }}
.rl-diagram .rl-label-paper {{ fill: var(--rl-diagram-paper); }}
.rl-diagram-row {{ display: flex; flex-wrap: wrap; justify-content: center; align-items: flex-start; gap: 1.5rem; }}
""".strip()


class DiagramError(ValueError):
    """A diagram that cannot be drawn as described (an unknown node, two nodes in one place)."""


@dataclass(frozen=True)
class Node:
    key: str
    label: str = ""  # lines separated by "\n"; terminals have none
    row: int = 0
    column: int = 0
    shape: str = "box"
    emphasis: bool = False

    @property
    def lines(self) -> list[str]:
        return self.label.split("\n") if self.label else []


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    label: str = ""  # lines separated by "\n"
    dashed: bool = False


@dataclass(frozen=True)
class Diagram:
    name: str  # a-z, digits and "-": the prefix of the SVG's element ids, unique on its page
    title: str  # what the diagram shows, in a phrase: the SVG's <title>
    nodes: tuple[Node, ...]
    arrows: tuple[Arrow, ...] = ()
    kind: str = "Diagram"  # "Flowchart", "State diagram": how the description starts


@dataclass
class _Box:
    node: Node
    x: float  # left
    y: float  # top
    width: float
    height: float

    @property
    def cx(self) -> float:
        return self.x + self.width / 2

    @property
    def cy(self) -> float:
        return self.y + self.height / 2

    @property
    def right(self) -> float:
        return self.x + self.width

    @property
    def bottom(self) -> float:
        return self.y + self.height


def text_width(line: str) -> float:
    return len(line) * CHAR_PX


def _label_size(text: str) -> tuple[float, float]:
    lines = text.split("\n") if text else []
    if not lines:
        return 0.0, 0.0
    return max(map(text_width, lines)) + 2 * LABEL_PAD, len(lines) * LINE_PX + 2 * LABEL_PAD


def _node_size(node: Node) -> tuple[float, float]:
    if node.shape in ("start", "end"):
        return 2 * TERMINAL_RADIUS, 2 * TERMINAL_RADIUS
    return max(map(text_width, node.lines), default=0) + 2 * PAD_X, len(node.lines) * LINE_PX + 2 * PAD_Y


def check(diagram: Diagram) -> None:
    """Raises DiagramError naming the first problem: a bad name, shape or key, two nodes in one cell, an arrow
    between unknown nodes."""
    if not NAME.match(diagram.name):
        raise DiagramError(f"diagram name {diagram.name!r}: use a-z, digits and '-', starting with a letter")
    keys, cells = set(), {}
    for node in diagram.nodes:
        if node.shape not in SHAPES:
            raise DiagramError(f"{diagram.name}: node {node.key!r} has shape {node.shape!r}; shapes: {', '.join(SHAPES)}")
        if node.key in keys:
            raise DiagramError(f"{diagram.name}: two nodes are called {node.key!r}")
        if (node.row, node.column) in cells:
            raise DiagramError(f"{diagram.name}: {node.key!r} and {cells[node.row, node.column]!r} are both at row "
                               f"{node.row}, column {node.column}")
        if node.row < 0 or node.column < 0:
            raise DiagramError(f"{diagram.name}: node {node.key!r} has a negative row or column")
        if node.shape in ("box", "rounded") and not node.label.strip():
            raise DiagramError(f"{diagram.name}: box {node.key!r} has no label")
        keys.add(node.key)
        cells[node.row, node.column] = node.key
    for arrow in diagram.arrows:
        for end in (arrow.source, arrow.target):
            if end not in keys:
                raise DiagramError(f"{diagram.name}: an arrow names {end!r}, which is not a node")
        if arrow.source == arrow.target:
            raise DiagramError(f"{diagram.name}: an arrow from {arrow.source!r} to itself cannot be drawn")


def layout(diagram: Diagram) -> tuple[dict[str, _Box], float, float]:
    """Every node's box, and the drawing's width and height."""
    check(diagram)
    nodes = {node.key: node for node in diagram.nodes}
    columns = max(node.column for node in diagram.nodes) + 1
    rows = max(node.row for node in diagram.nodes) + 1
    widths, heights = [0.0] * columns, [0.0] * rows
    for node in diagram.nodes:
        width, height = _node_size(node)
        widths[node.column] = max(widths[node.column], width)
        heights[node.row] = max(heights[node.row], height)
    # Room between neighbouring rows and columns for the labels of the arrows that cross there.
    gaps_x, gaps_y = [GAP_X] * columns, [GAP_Y] * rows
    for arrow in diagram.arrows:
        source, target = nodes[arrow.source], nodes[arrow.target]
        label_width, label_height = _label_size(arrow.label)
        if source.row == target.row:
            for column in range(min(source.column, target.column), max(source.column, target.column)):
                gaps_x[column] = max(gaps_x[column], label_width + 2 * HEAD + 8)
        elif source.column == target.column and target.row > source.row:
            for row in range(source.row, target.row):
                gaps_y[row] = max(gaps_y[row], label_height + 2 * HEAD + 20)
    lefts, x = [], MARGIN
    for column in range(columns):
        lefts.append(x)
        x += widths[column] + gaps_x[column]
    tops, y = [], MARGIN
    for row in range(rows):
        tops.append(y)
        y += heights[row] + gaps_y[row]
    boxes = {}
    for node in diagram.nodes:
        width, height = _node_size(node)
        boxes[node.key] = _Box(node, lefts[node.column] + (widths[node.column] - width) / 2,
                               tops[node.row] + (heights[node.row] - height) / 2, width, height)
    width = lefts[-1] + widths[-1] + MARGIN
    height = tops[-1] + heights[-1] + MARGIN
    for arrow in diagram.arrows:  # loops run right of everything in the rows they span, their labels beside them
        points = _route(arrow, boxes)
        if len(points) == 4:
            width = max(width, points[1][0] + 6 + _label_size(arrow.label)[0] + MARGIN)
    return boxes, width, height


def _route(arrow: Arrow, boxes: dict[str, _Box]) -> list[tuple[float, float]]:
    """The arrow's polyline, from the source's edge to the target's edge."""
    source, target = boxes[arrow.source], boxes[arrow.target]
    same_row, same_column = source.node.row == target.node.row, source.node.column == target.node.column
    if same_column and target.node.row > source.node.row:
        return [(source.cx, source.bottom), (target.cx, target.y)]
    if same_column:  # upwards: round the right-hand side of every node in the rows between
        spanned = [box for box in boxes.values() if target.node.row <= box.node.row <= source.node.row]
        lane = max(box.right for box in spanned) + LOOP_LANE
        return [(source.right, source.cy), (lane, source.cy), (lane, target.cy), (target.right, target.cy)]
    if same_row:
        if target.node.column > source.node.column:
            return [(source.right, source.cy), (target.x, target.cy)]
        return [(source.x, source.cy), (target.right, target.cy)]
    start_y = source.y if target.node.row < source.node.row else source.bottom
    end_x = target.right if target.node.column < source.node.column else target.x
    return [(source.cx, start_y), (source.cx, target.cy), (end_x, target.cy)]


def _label_anchor(points: list[tuple[float, float]]) -> tuple[float, float, str]:
    """Where an arrow's label goes: centred on its longest segment, or beside a loop's lane."""
    if len(points) == 4:
        (lane, top), (_, bottom) = points[1], points[2]
        return lane + 6, (top + bottom) / 2, "start"
    segments = list(zip(points, points[1:]))
    (x0, y0), (x1, y1) = max(segments, key=lambda s: abs(s[1][0] - s[0][0]) + abs(s[1][1] - s[0][1]))
    return (x0 + x1) / 2, (y0 + y1) / 2, "middle"


def svg_number(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def svg_text(lines: list[str], x: float, centre_y: float, anchor: str = "middle", line_px: float = LINE_PX,
             css_class: str = "") -> str:
    """Lines of text centred on ``centre_y``, each a ``<tspan>``; ``anchor``: "start", "middle" or "end"."""
    first = centre_y - (len(lines) - 1) * line_px / 2
    spans = "".join(f'<tspan x="{svg_number(x)}" y="{svg_number(first + i * line_px)}">{escape(line)}</tspan>'
                    for i, line in enumerate(lines))
    kind = f' class="{css_class}"' if css_class else ""
    return f'<text{kind} text-anchor="{anchor}" dominant-baseline="central">{spans}</text>'


def svg_arrowhead(tip: tuple[float, float], before: tuple[float, float]) -> str:
    (x, y), (bx, by) = tip, before
    length = max(abs(x - bx) + abs(y - by), 1e-9)
    ux, uy = (x - bx) / length, (y - by) / length  # segments are horizontal or vertical
    base_x, base_y = x - ux * HEAD, y - uy * HEAD
    corners = [(x, y), (base_x - uy * HEAD / 2, base_y + ux * HEAD / 2), (base_x + uy * HEAD / 2, base_y - ux * HEAD / 2)]
    return f'<polygon class="rl-head" points="{" ".join(f"{svg_number(a)},{svg_number(b)}" for a, b in corners)}"/>'


def _draw_node(box: _Box) -> str:
    node = box.node
    if node.shape == "start":
        return f'<circle class="rl-terminal" cx="{svg_number(box.cx)}" cy="{svg_number(box.cy)}" r="{TERMINAL_RADIUS - 2}"/>'
    if node.shape == "end":
        return (f'<circle class="rl-terminal-ring" cx="{svg_number(box.cx)}" cy="{svg_number(box.cy)}" r="{TERMINAL_RADIUS}"/>'
                f'<circle class="rl-terminal" cx="{svg_number(box.cx)}" cy="{svg_number(box.cy)}" r="{TERMINAL_RADIUS - 4}"/>')
    corner = 10 if node.shape == "rounded" else 3
    kind = "rl-node rl-emphasis" if node.emphasis else "rl-node"
    rect = (f'<rect class="{kind}" x="{svg_number(box.x)}" y="{svg_number(box.y)}" width="{svg_number(box.width)}" '
            f'height="{svg_number(box.height)}" rx="{corner}"/>')
    return rect + svg_text(node.lines, box.cx, box.cy)


def _draw_arrow(arrow: Arrow, boxes: dict[str, _Box]) -> str:
    points = _route(arrow, boxes)
    tip, before = points[-1], points[-2]
    # The line stops where the head begins, so a dashed line does not show through the head.
    length = abs(tip[0] - before[0]) + abs(tip[1] - before[1])
    cut = [(tip[0] - (tip[0] - before[0]) * HEAD / length, tip[1] - (tip[1] - before[1]) * HEAD / length)]
    path = " ".join(f"{'M' if i == 0 else 'L'}{svg_number(x)},{svg_number(y)}" for i, (x, y) in enumerate(points[:-1] + cut))
    drawn = f'<path class="rl-arrow{" rl-dashed" if arrow.dashed else ""}" d="{path}"/>' + svg_arrowhead(tip, before)
    if arrow.label:
        x, y, anchor = _label_anchor(points)
        width, height = _label_size(arrow.label)
        left = x - width / 2 if anchor == "middle" else x - LABEL_PAD
        drawn += (f'<rect class="rl-label-paper" x="{svg_number(left)}" y="{svg_number(y - height / 2)}" '
                  f'width="{svg_number(width)}" height="{svg_number(height)}"/>')
        drawn += svg_text(arrow.label.split("\n"), x, y, anchor)
    return f"<g>{drawn}</g>"


def _spoken(node: Node) -> str:
    if node.shape == "start":
        return "the start"
    if node.shape == "end":
        return "the end"
    return "“" + " ".join(node.lines) + "”"


def describe(diagram: Diagram) -> str:
    """The drawing in words, from the same nodes and arrows: its kind, each arrow in order, and any node no arrow
    reaches."""
    check(diagram)
    nodes = {node.key: node for node in diagram.nodes}
    steps = []
    for arrow in diagram.arrows:
        how = "a dashed arrow" if arrow.dashed else "an arrow"
        said = f" labelled “{' '.join(arrow.label.split())}”" if arrow.label else ""
        steps.append(f"from {_spoken(nodes[arrow.source])}, {how}{said} leads to {_spoken(nodes[arrow.target])}")
    joined = {key for arrow in diagram.arrows for key in (arrow.source, arrow.target)}
    alone = [_spoken(node) for node in diagram.nodes if node.key not in joined]
    text = f"{diagram.kind}: {diagram.title}. " + "; ".join(steps)
    if alone:
        text += ("; " if steps else "") + "unconnected: " + ", ".join(alone)
    return text.rstrip() + "."


def diagram_svg(diagram: Diagram) -> str:
    """The diagram as one inline ``<svg>`` element (its style included)."""
    boxes, width, height = layout(diagram)
    drawing = [*(_draw_arrow(arrow, boxes) for arrow in diagram.arrows), *(_draw_node(box) for box in boxes.values())]
    return svg_element(diagram.name, diagram.title, describe(diagram), width, height, "".join(drawing))


def svg_element(name: str, title: str, description: str, width: float, height: float, drawing: str,
                style: str = STYLE) -> str:
    """An inline ``<svg>`` image: ``role="img"`` named by its title and described by ``description`` (ids
    ``NAME-title`` and ``NAME-desc``), with the diagrams' colours for both schemes."""
    title_id, description_id = f"{name}-title", f"{name}-desc"
    # Never drawn smaller than its text allows (on a phone the figure's box scrolls instead: reading.scss).
    narrowest = math.ceil(width * SMALLEST_TEXT_PX / FONT_PX)  # rounded up: never a hair under 11 px
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="rl-diagram" role="img" width="{svg_number(width)}" '
            f'height="{svg_number(height)}" viewBox="0 0 {svg_number(width)} {svg_number(height)}" '
            f'style="min-width: {narrowest}px" '
            f'aria-labelledby="{title_id}" aria-describedby="{description_id}">'
            f'<title id="{title_id}">{escape(title)}</title><desc id="{description_id}">{escape(description)}</desc>'
            f"<style>{style}</style>{drawing}</svg>")


def diagram_figure(diagram: Diagram, caption: str) -> str:
    """A figure for a page cell with ``output: asis``: the SVG and its caption in Quarto's figure markup, as a
    raw HTML block (pandoc passes it through untouched)."""
    if not caption.strip():
        raise DiagramError(f"{diagram.name}: a figure needs a caption")
    return figure_html([diagram_svg(diagram)], caption)


def figure_html(svgs: list[str], caption: str) -> str:
    """One figure of one or more drawings (side by side where the page is wide enough, else one under another)
    and its caption, as a raw HTML block for a cell with ``output: asis``."""
    if not caption.strip():
        raise DiagramError("a figure needs a caption")
    drawings = "".join(svgs) if len(svgs) == 1 else f'<div class="rl-diagram-row">{"".join(svgs)}</div>'
    return ("\n```{=html}\n"
            f'<div class="quarto-figure quarto-figure-center rl-diagram-figure"><figure class="figure">'
            f'<div class="rl-diagram-box">{drawings}</div><figcaption>{escape(caption)}</figcaption></figure></div>\n'
            "```\n")
