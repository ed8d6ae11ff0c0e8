"""One picture of the block: a sequential pre-LN block (Lesson 2.1's copy model) and a parallel one (GPT-NeoX's,
so Pythia's), drawn top to bottom as inline SVG with ``residlab.course.ui.diagrams``' colours (both schemes), every
hook site the pages use marked with the names the code uses.

    from residlab.course import block_figure
    print(block_figure(caption="..."))  # in a cell with `output: asis`

Every name on the picture is read from the code, none typed here: a site's hook point (TransformerLens's name,
which the copy model's blocks use: ``lesson_lab.TRACE_HOOK_POINTS`` and ``capture.blocks.COPY_MODEL``) and its
name in the capture (``capture.sites.site_name`` for block ``ℓ``, where the capture records it); the block's
class, normaliser and MLP from its table (``capture.blocks``). The wiring comes from the table too: the MLP
branch reads what ``sites.mlp_reads`` says, the block input in a parallel block, which then has no state
between its two writes (no ``resid_mid``) and adds both writes in one sum. Each drawing's description (its
``<desc>``, what a screen reader says) is written from the same sites as the drawing.
"""

from __future__ import annotations

from dataclasses import dataclass

from residlab.capture.blocks import BLOCK_TYPES, COPY_MODEL, BlockType
from residlab.capture.sites import BLOCK_SITES, site_name
from residlab.course.ui.diagrams import (
    HEAD, LINE_PX, PAD_X, PAD_Y, STYLE, DiagramError, figure_html, svg_arrowhead, svg_element, svg_number, svg_text,
    text_width,
)
from residlab.course.models.lesson_lab import TRACE_HOOK_POINTS

BLOCK = "ℓ"  # the block index as the pages write it
RESID_PRE, ATTN_WRITE, MLP_WRITE, RESID_POST = BLOCK_SITES
# The capture's site -> the hook point that carries it in a block that names its values as TransformerLens does.
HOOK_OF_SITE = {site: getattr(COPY_MODEL.sites, site)[0] for site in BLOCK_SITES}
# The one hook point the capture has no site for: the state between the two writes of a sequential block.
(MID_HOOK,) = [hook for hook in TRACE_HOOK_POINTS.values() if hook not in HOOK_OF_SITE.values()]

CODE_PX = 13  # names in the page's monospace font
CODE_CHAR_PX = 0.62 * CODE_PX  # a monospace advance is 0.6 em; a little more so every font fits
CODE_LINE_PX = 17
MARGIN = 10
SITE_RADIUS = 4.5  # the dot marking a hook site
SUM_RADIUS = 10  # the circle where writes are added to the stream
BRANCH_GAP = 40  # from the stream to the nearest edge of a branch's boxes
STEP = 26  # arrow between two boxes, and from a fork down to a branch
NAME_GAP = 12  # from a dot or a line to its names
NAMES = "rl-site-name"  # CSS class of a site's names

PICTURE_STYLE = STYLE + f"""
.rl-diagram .{NAMES} {{ font-family: var(--bs-font-monospace, monospace); font-size: {CODE_PX}px; }}
.rl-diagram .rl-site {{ fill: var(--rl-diagram-emphasis); }}
.rl-diagram .rl-sum {{ fill: var(--rl-diagram-paper); stroke: var(--rl-diagram-line); stroke-width: 1.5; }}
.rl-diagram .rl-sum-sign {{ stroke: var(--rl-diagram-line); stroke-width: 1.5; }}
.rl-diagram .rl-heading {{ font-weight: 600; }}
"""


@dataclass(frozen=True)
class Site:
    """One hook site of the picture: the names it is marked with."""

    hook: str  # the hook point
    capture: str | None  # the capture's name for it (block ℓ), None where the capture records none
    module: str  # the module, in the block's table, whose input or output it is (the hook point itself in the copy model)
    kind: str = "output"  # "input" or "output", as the table says

    @property
    def names(self) -> list[str]:
        return [self.hook] + ([self.capture] if self.capture else [])

    def spoken(self) -> str:
        said = f"{self.hook}"
        if self.capture:
            said += f", the capture's {self.capture}"
        if self.module != self.hook:
            said += f", the {self.kind} of {self.module or 'the block'}"
        return said


def block_sites(block_type: BlockType) -> dict[str, Site]:
    """The block's hook sites by the capture's site names, and the mid-block state (its hook point as key) when
    the MLP reads it."""
    sites = {site: Site(HOOK_OF_SITE[site], site_name(BLOCK, site), *getattr(block_type.sites, site))
             for site in BLOCK_SITES}
    if not parallel(block_type):
        sites[MID_HOOK] = Site(MID_HOOK, None, MID_HOOK)
    return sites


def parallel(block_type: BlockType) -> bool:
    """Whether the MLP branch reads the block input (as the attention branch does), not the state after attention."""
    return block_type.sites.mlp_reads == RESID_PRE


def _code_width(line: str) -> float:
    return len(line) * CODE_CHAR_PX


class _Canvas:
    """Elements in drawing order, and how far they reach."""

    def __init__(self):
        self.parts: list[str] = []
        self.right = 0.0

    def line(self, points: list[tuple[float, float]], head: bool = False) -> None:
        if head:  # the line stops where the head begins
            (x0, y0), (x1, y1) = points[-2], points[-1]
            length = abs(x1 - x0) + abs(y1 - y0)
            points = points[:-1] + [(x1 - (x1 - x0) * HEAD / length, y1 - (y1 - y0) * HEAD / length)]
        path = " ".join(f"{'M' if i == 0 else 'L'}{svg_number(x)},{svg_number(y)}" for i, (x, y) in enumerate(points))
        self.parts.append(f'<path class="rl-arrow" d="{path}"/>')
        if head:
            self.parts.append(svg_arrowhead((x1, y1), (x0, y0)))

    def box(self, text: str, centre_x: float, top: float, width: float) -> float:
        """A box of one line of text; returns its bottom."""
        height = LINE_PX + 2 * PAD_Y
        self.parts.append(f'<rect class="rl-node" x="{svg_number(centre_x - width / 2)}" y="{svg_number(top)}" '
                          f'width="{svg_number(width)}" height="{svg_number(height)}" rx="3"/>')
        self.parts.append(svg_text([text], centre_x, top + height / 2))
        self.right = max(self.right, centre_x + width / 2)
        return top + height

    def site(self, site: Site, x: float, y: float, names_x: float, names_top: float, anchor: str = "start") -> None:
        """The site's dot at (x, y) and its names from ``names_top`` down, beginning (or ending) at ``names_x``."""
        self.parts.append(f'<circle class="rl-site" cx="{svg_number(x)}" cy="{svg_number(y)}" r="{SITE_RADIUS}"/>')
        lines = site.names
        centre = names_top + len(lines) * CODE_LINE_PX / 2
        self.parts.append(svg_text(lines, names_x, centre, anchor, CODE_LINE_PX, NAMES))
        if anchor == "start":
            self.right = max(self.right, names_x + max(map(_code_width, lines)))

    def sum(self, x: float, y: float) -> None:
        self.parts.append(f'<circle class="rl-sum" cx="{svg_number(x)}" cy="{svg_number(y)}" r="{SUM_RADIUS}"/>')
        arm = SUM_RADIUS * 0.55
        self.parts.append(f'<path class="rl-sum-sign" d="M{svg_number(x - arm)},{svg_number(y)} '
                          f'L{svg_number(x + arm)},{svg_number(y)} M{svg_number(x)},{svg_number(y - arm)} '
                          f'L{svg_number(x)},{svg_number(y + arm)}"/>')


def _names_height(site: Site) -> float:
    return len(site.names) * CODE_LINE_PX


def _branch(canvas: _Canvas, block_type: BlockType, sublayer: str, centre_x: float, top: float, width: float) -> float:
    """A normaliser over a sublayer, entered from above at ``top``; returns the sublayer's bottom."""
    bottom = canvas.box(block_type.normaliser, centre_x, top, width)
    canvas.line([(centre_x, bottom), (centre_x, bottom + STEP)], head=True)
    return canvas.box(sublayer, centre_x, bottom + STEP, width)


def _write(canvas: _Canvas, site: Site, branch_x: float, branch_bottom: float, spine: float, sum_y: float) -> float:
    """The write from a branch into the sum on the stream, its site on the last stretch, its names under it;
    returns the bottom of the names."""
    side = 1 if branch_x > spine else -1
    end = spine + side * SUM_RADIUS
    canvas.line([(branch_x, branch_bottom), (branch_x, sum_y), (end, sum_y)], head=True)
    dot_x = spine + side * (SUM_RADIUS + HEAD + NAME_GAP)  # clear of the arrowhead
    canvas.site(site, dot_x, sum_y, dot_x - side * SITE_RADIUS, sum_y + SITE_RADIUS + 4, "start" if side > 0 else "end")
    return sum_y + SITE_RADIUS + 4 + _names_height(site)


def _box_width(block_type: BlockType) -> float:
    return max(map(text_width, (block_type.normaliser, "Attention", block_type.mlp))) + 2 * PAD_X


def _state(canvas: _Canvas, site: Site, spine: float, y: float) -> float:
    """A state on the stream at y, its names to the right; returns the bottom of the names."""
    top = y - CODE_LINE_PX / 2
    canvas.site(site, spine, y, spine + NAME_GAP, top)
    return top + _names_height(site)


def draw(block_type: BlockType) -> tuple[str, float, float]:
    """The block's drawing (SVG elements), its width and height."""
    sites, width = block_sites(block_type), _box_width(block_type)
    names_width = max(_code_width(name) for site in sites.values() for name in site.names)
    left = parallel(block_type)  # the MLP's branch left of the stream, the attention's right
    spine = MARGIN + (max(width + BRANCH_GAP, SUM_RADIUS + HEAD + NAME_GAP + names_width) if left else SUM_RADIUS)
    right_branch = spine + BRANCH_GAP + width / 2
    canvas, stream = _Canvas(), []
    heading = heading_text(block_type)
    canvas.parts.append(svg_text([heading], MARGIN, MARGIN + LINE_PX / 2, "start", css_class="rl-heading"))
    canvas.right = MARGIN + text_width(heading)
    y = MARGIN + LINE_PX + 8
    stream.append((spine, y))
    y = _state(canvas, sites[RESID_PRE], spine, y + 18) + 14  # the block input
    fork = y
    if left:  # one input, read by both branches
        left_branch = spine - BRANCH_GAP - width / 2
        canvas.line([(spine, fork), (left_branch, fork), (left_branch, fork + STEP)], head=True)
        canvas.line([(spine, fork), (right_branch, fork), (right_branch, fork + STEP)], head=True)
        canvas.parts.append(f'<circle class="rl-head" cx="{svg_number(spine)}" cy="{svg_number(fork)}" r="3"/>')
        attention_bottom = _branch(canvas, block_type, "Attention", right_branch, fork + STEP, width)
        mlp_bottom = _branch(canvas, block_type, block_type.mlp, left_branch, fork + STEP, width)
        sum_y = max(attention_bottom, mlp_bottom) + STEP
        canvas.line([stream[-1], (spine, sum_y - SUM_RADIUS)], head=True)
        y = max(_write(canvas, sites[ATTN_WRITE], right_branch, attention_bottom, spine, sum_y),
                _write(canvas, sites[MLP_WRITE], left_branch, mlp_bottom, spine, sum_y))
        canvas.sum(spine, sum_y)
    else:  # the MLP reads the state after attention
        for sublayer, write, after in (("Attention", ATTN_WRITE, MID_HOOK), (block_type.mlp, MLP_WRITE, None)):
            canvas.line([(spine, fork), (right_branch, fork), (right_branch, fork + STEP)], head=True)
            bottom = _branch(canvas, block_type, sublayer, right_branch, fork + STEP, width)
            sum_y = bottom + STEP
            canvas.line([stream[-1], (spine, sum_y - SUM_RADIUS)], head=True)
            y = _write(canvas, sites[write], right_branch, bottom, spine, sum_y)
            canvas.sum(spine, sum_y)
            stream.append((spine, sum_y + SUM_RADIUS))
            if after:
                y = _state(canvas, sites[after], spine, y + 18) + 14
                fork = y
    out_y = y + 18
    canvas.line([(spine, sum_y + SUM_RADIUS), (spine, out_y)])
    y = _state(canvas, sites[RESID_POST], spine, out_y) + 10
    canvas.line([(spine, out_y), (spine, y + 16)], head=True)
    return "".join(canvas.parts), canvas.right + MARGIN, y + 16 + MARGIN


def heading_text(block_type: BlockType) -> str:
    """What the drawing shows first: the block's kind and class, from its table."""
    return f"{block_type.sites.residual_kind}: {block_type.block_class}"


def title(block_type: BlockType) -> str:
    kind = "A parallel block" if parallel(block_type) else "A sequential pre-normalised block"
    return f"{kind} ({block_type.block_class}) and its hook sites"


def describe(block_type: BlockType) -> str:
    """The drawing in words, from the same sites."""
    sites = block_sites(block_type)
    said = {key: site.spoken() for key, site in sites.items()}
    text = (f"Drawn top to bottom. The residual stream enters the block as {said[RESID_PRE]}, and runs straight "
            f"down. ")
    if parallel(block_type):
        text += (f"Both branches read that same input: one through a {block_type.normaliser} into attention, whose "
                 f"write is {said[ATTN_WRITE]}; the other through its own {block_type.normaliser} into the "
                 f"{block_type.mlp}, whose write is {said[MLP_WRITE]}. Both writes are added to the stream in one "
                 f"sum, so no state between them is named. ")
    else:
        text += (f"A branch reads it through a {block_type.normaliser} into attention, whose write, "
                 f"{said[ATTN_WRITE]}, is added to the stream: the sum is {said[MID_HOOK]}. A second branch reads "
                 f"that state through another {block_type.normaliser} into the {block_type.mlp}, whose write, "
                 f"{said[MLP_WRITE]}, is added in turn. ")
    return text + f"The sum leaves the block as {said[RESID_POST]}, the next block's input."


def block_svg(block_type: BlockType) -> str:
    drawing, width, height = draw(block_type)
    return svg_element(f"block-{block_type.name.replace('_', '-')}", title(block_type), describe(block_type), width,
                       height, drawing, PICTURE_STYLE)


PICTURED = (COPY_MODEL, BLOCK_TYPES["gpt_neox"])  # the lesson's block, then Pythia's


def block_figure(caption: str) -> str:
    """Both blocks side by side (one under the other on a narrow screen), in one figure with ``caption``."""
    if not caption.strip():
        raise DiagramError("the block picture needs a caption")
    return figure_html([block_svg(block_type) for block_type in PICTURED], caption)
