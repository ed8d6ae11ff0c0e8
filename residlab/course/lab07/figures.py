"""Lab 07's figures, drawn when the page is built: SVG heatmaps of block x position shares (so the page reads
without JavaScript), and the explorer's data island (``assets/explorers/patching-explorer.js`` draws the same
grids on request, with every cell's numbers on hover or focus).

The colour scale is one for every grid: a share of the gap from -1 (blue) through 0 (white) to +1 (red), values
beyond clipped to the end colours, the same function here and in the script (``colour``).
"""

from __future__ import annotations

import html

from residlab.audit.measures import shown
from residlab.capture.sites import site_name
from residlab.course.lab07.patching import DIRECTIONS, KINDS
from residlab.course.lab07.cells import HYBRID, by_construction, hybrid, same_intervention, zero_identity
from residlab.course.ui.explorer import explorer_block

CELL, ROW_LABEL, HEADER, GAP = 26, 150, 34, 26
KIND_LABELS = {"resid_pre": "block input (resid_pre)", "attn_write": "attention write", "mlp_write": "MLP write",
               "resid_post": "block output (resid_post)"}  # fmt: skip


def colour(value: float | None) -> str:
    """White at 0, red at +1, blue at -1 (clipped), grey for an undefined share."""
    if value is None:
        return "#bbbbbb"
    v = max(-1.0, min(1.0, value))
    fade = round(255 * (1 - abs(v)))
    return f"#ff{fade:02x}{fade:02x}" if v >= 0 else f"#{fade:02x}{fade:02x}ff"


def _panel(title: str, rows: list[tuple], columns: list[str], top: float, observed_note: str | None = None) -> tuple[list[str], float]:
    """One panel; a marked cell is an identity, or with ``observed_note`` an observed value the note explains."""
    parts = [f'<text x="0" y="{top + 14}" font-weight="bold">{html.escape(title)}</text>']
    top += 22
    for index, label in enumerate(columns):
        parts.append(f'<text x="{ROW_LABEL + index * CELL + CELL / 2}" y="{top + 10}" text-anchor="middle" '
                     f'font-size="12">{html.escape(label)}</text>')  # fmt: skip
    top += 14
    for row, (label, values, *marks) in enumerate(rows):
        y = top + row * CELL
        marked = marks[0] if marks else set()
        hybrids = marks[1] if len(marks) > 1 else set()
        same = marks[2] if len(marks) > 2 else set()
        zeros = marks[3] if len(marks) > 3 else {}  # position -> why it is 0 by construction, unmarked, named in its label
        parts.append(f'<text x="{ROW_LABEL - 6}" y="{y + CELL / 2 + 4}" text-anchor="end" font-size="12">'
                     f"{html.escape(label)}</text>")  # fmt: skip
        for position, value in enumerate(values):
            # an identity in two decimals and named, an observed share in three: as the page's text prints them
            text = ("undefined" if value is None else f"{shown(value):.3f}, {observed_note}" if position in marked and observed_note
                    else f"{value:.2f}, an identity" if position in marked
                    else f"{value:.2f}, an identity: {zeros[position]}" if position in zeros
                    else f"{shown(value):.3f}" + (f", {HYBRID}" if position in hybrids else "")
                    + (", the same intervention as block 0's output" if position in same else ""))  # fmt: skip
            parts.append(f'<rect x="{ROW_LABEL + position * CELL}" y="{y:.0f}" width="{CELL - 1}" height="{CELL - 1}" '
                         f'fill="{colour(value)}"><title>{html.escape(title)}: {html.escape(label)}, position {position}: {text}</title>'
                         "</rect>")  # fmt: skip
            if position in marked:  # a cell fixed by construction, never a finding: a filled dot, no ring (the hybrid's)
                parts.append(f'<circle cx="{ROW_LABEL + position * CELL + (CELL - 1) / 2}" cy="{y + (CELL - 1) / 2:.1f}" r="3.5" '
                             'fill="#000"/>')  # fmt: skip
            elif position in hybrids:  # a hybrid prompt's run: observed, not an identity
                parts.append(f'<circle cx="{ROW_LABEL + position * CELL + (CELL - 1) / 2}" cy="{y + (CELL - 1) / 2:.1f}" r="4" '
                             'fill="#fff" stroke="#000" stroke-width="1.5"/>')  # fmt: skip
            elif position in same:  # another cell's intervention under this name: equal to it, its value observed
                parts.append(f'<rect x="{ROW_LABEL + position * CELL + (CELL - 1) / 2 - 3:.1f}" y="{y + (CELL - 1) / 2 - 3:.1f}" '
                             'width="6" height="6" fill="#fff" stroke="#000" stroke-width="1.5"/>')  # fmt: skip
    return parts, top + len(rows) * CELL + GAP


MARKS = ("identity", "hybrid", "same")  # the marks a panel row may carry, in the order of its sets


def _colour_scale(top: float, length: float, drawn: set[str], identity: str, scale: str) -> tuple[list[str], float]:
    """The colour scale under the panels: one bar from -1 (blue) through 0 (white) to +1 (red), ticked at both ends
    and at 0; shares beyond are drawn in the end colours, an undefined share in grey. The legend names only the marks
    ``drawn`` in this figure. Returns the parts and the scale's height."""
    stops = "".join(f'<stop offset="{(v + 1) / 2:.2f}" stop-color="{colour(v)}"/>' for v in (-1.0, -0.5, 0.0, 0.5, 1.0))
    x, y = ROW_LABEL, top
    parts = [f'<defs><linearGradient id="rl-share-scale">{stops}</linearGradient></defs>',
             f'<text x="{x - 6}" y="{y + 12}" text-anchor="end" font-size="12">{html.escape(scale)}</text>',
             f'<rect x="{x}" y="{y}" width="{length:.0f}" height="14" fill="url(#rl-share-scale)" stroke="#666"/>']
    for value, label in ((-1.0, "−1 or less"), (0.0, "0"), (1.0, "+1 or more")):
        tick = x + (value + 1) / 2 * length
        anchor = "start" if value < 0 else "end" if value > 0 else "middle"
        parts.append(f'<line x1="{tick:.0f}" y1="{y + 14}" x2="{tick:.0f}" y2="{y + 19}" stroke="#333"/>'
                     f'<text x="{tick:.0f}" y="{y + 31}" text-anchor="{anchor}" font-size="12">{label}</text>')  # fmt: skip
    parts.append(f'<text x="{x}" y="{y + 47}" font-size="12">grey: undefined (a zero gap)</text>')
    line = y + 63  # the baseline of the next legend line, 16 apart
    marks = {
        "identity": (f'<circle cx="{x + 4}" cy="{{mark}}" r="3.5" fill="#000"/>', identity),
        "hybrid": (f'<circle cx="{x + 4}" cy="{{mark}}" r="4" fill="#fff" stroke="#000" stroke-width="1.5"/>',
                   f"{HYBRID} (not an identity)"),
        "same": (f'<rect x="{x + 1}" y="{{corner}}" width="6" height="6" fill="#fff" stroke="#000" stroke-width="1.5"/>',
                 "same intervention as block 0's output"),
    }  # fmt: skip
    for mark in MARKS:
        if mark in drawn:
            shape, text = marks[mark]
            parts.append(shape.format(mark=line - 4, corner=line - 7)
                         + f'<text x="{x + 12}" y="{line}" font-size="12">{html.escape(text, quote=False)}</text>')
            line += 16
    parts.append(f'<text x="{x}" y="{line}" font-size="12">columns before the first *: 0 by construction</text>'
                 f'<text x="0" y="{line + 16}" font-size="12">blocks.b.resid_pre is blocks.b−1.resid_post: one tensor, two '
                 "rows</text>")  # from the left edge: the widest line of the legend
    return parts, line + 29 - y


def heatmap_svg(panels: list[tuple[str, list[tuple[str, list]]]], columns: list[str], label: str,
                identity: str = "fixed by construction (an identity)", observed_note: str | None = None,
                scale: str = "share of the gap") -> str:
    """One SVG of stacked panels, each (title, [(row label, values, *marked positions)]: the sets in MARKS' order);
    ``label`` is its accessible name; ``identity`` the legend's words for the filled dot, ``observed_note`` (if any)
    what a dotted cell's tooltip says of its observed value."""
    parts, top = [], 0.0
    for title, rows in panels:
        drawn, top = _panel(title, rows, columns, top, observed_note)
        parts.extend(drawn)
    width = ROW_LABEL + len(columns) * CELL + 10
    marked = {mark for _, rows in panels for _, _, *sets in rows for mark, positions in zip(MARKS, sets) if positions}
    scale_parts, height = _colour_scale(top, len(columns) * CELL, marked, identity, scale)
    parts.extend(scale_parts)
    top += height
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="rl-patching-figure" viewBox="0 0 {width} {top:.0f}" '
            f'width="{width}" height="{top:.0f}" style="max-width:none" role="img" '
            f'aria-label="{html.escape(label)}">'
            f'<rect width="{width}" height="{top:.0f}" fill="#ffffff"/>'  # its own paper, in either colour scheme
            + "".join(parts) + "</svg>")  # fmt: skip


def identity_positions(design: dict, kind: str, block: int) -> set[int]:
    """The positions of a grid row whose cell is fixed by construction (``cells.by_construction``)."""
    return {p for p in range(len(design["clean"])) if by_construction(design, kind, block, p)}


def same_positions(design: dict, kind: str, block: int) -> set[int]:
    """The positions of a grid row whose patching is another cell's intervention (``cells.same_intervention``)."""
    return {p for p in range(len(design["clean"])) if same_intervention(design, kind, block, p)}


def hybrid_positions(design: dict, kind: str, block: int) -> set[int]:
    """The positions of a grid row whose cell runs a hybrid prompt (``cells.hybrid``): observed, marked apart."""
    return {p for p in range(len(design["clean"])) if hybrid(design, kind, block, p)}


def zero_positions(design: dict, kind: str, block: int) -> dict[int, str]:
    """A grid row's positions whose cell is 0 by construction (``cells.zero_identity``: before the first changed
    position, the same tensor in both runs, nothing downstream reading it), each with why: so is an attribution
    estimate there (no change, or no gradient)."""
    return {p: why for p in range(len(design["clean"])) if (why := zero_identity(design, kind, block, p))}


def position_labels(design: dict) -> list[str]:
    """Column labels: the position, starred where the two prompts differ."""
    return [f"{p}*" if p in design["changed"] else str(p) for p in range(len(design["clean"]))]


def activation_figure(report: dict, name: str) -> str:
    """Both directions for every site kind of one design, as raw HTML for a page cell with ``output: asis``."""
    design = report["designs"][name]
    panels = [(f"{KIND_LABELS[kind]}, {direction}",
               [(site_name(block, kind), row, identity_positions(design, kind, block), hybrid_positions(design, kind, block),
                 same_positions(design, kind, block), zero_positions(design, kind, block))
                for block, row in enumerate(design["activation"][direction][kind])])
              for kind in KINDS for direction in DIRECTIONS]  # fmt: skip
    return heatmap_svg(panels, position_labels(design), f"activation patching shares, {name} design")


def attribution_figure(report: dict, name: str) -> str:
    """Per site kind: the attribution estimate and its error (the exact denoising share is the activation figure's),
    one design."""
    design = report["designs"][name]
    panels = []
    for kind in KINDS:
        for title, grid in (("attribution", design["attribution"][kind]), ("error", design["error"][kind])):
            # an estimate and its error are observed at every cell; in an error panel the dot marks where the exact
            # share it is measured against is an identity (the error is the estimate minus that constant); a hybrid
            # prompt's run is marked, as in Part 3
            panels.append((f"{KIND_LABELS[kind]}: {title}",
                           [(site_name(b, kind), row, identity_positions(design, kind, b) if title == "error" else set(),
                             hybrid_positions(design, kind, b), set(), zero_positions(design, kind, b))
                            for b, row in enumerate(grid)]))  # fmt: skip
    return heatmap_svg(panels, position_labels(design), f"attribution patching against exact patching, {name} design",
                       identity="error panels: the exact share is an identity", scale="in shares of the gap",
                       observed_note="observed; the exact share here is an identity, so the error is the estimate minus it")


def figure_block(svg: str, caption: str) -> str:
    # Drawn at its own size, its smallest text 12 px: on a narrower screen it scrolls in its box (reading.scss).
    return f'```{{=html}}\n<figure class="rl-patching"><div class="rl-diagram-box">{svg}</div><figcaption>{html.escape(caption)}</figcaption></figure>\n```\n'


def _mark(design: dict, kind: str, block: int, position: int) -> str:
    """The mark ``_panel`` draws on a cell of the activation figure, by name ("" for none), in its order."""
    for mark, positions in zip(MARKS, (identity_positions, hybrid_positions, same_positions)):
        if position in positions(design, kind, block):
            return mark
    return ""


def explorer_data(report: dict) -> dict:
    """What the explorer draws: per design its prompts, every cell's numbers on the worked example, every cell's
    mean and interval over the held-out pairs ([mean, low, high]) and the cells fixed by construction."""
    designs = {}
    for name, design in report["designs"].items():
        designs[name] = {key: design[key] for key in ("clean", "corrupt", "target", "rival", "changed", "gap",
                                                      "readable", "activation", "attribution", "error", "bends",
                                                      "identities")}  # fmt: skip
        # each cell's mark, decided as the activation figure decides it (one rule for both): identity, hybrid, same
        designs[name]["marks"] = {kind: [[_mark(design, kind, block, position) for position in range(len(design["clean"]))]
                                         for block in range(len(design["activation"]["denoising"][kind]))]
                                  for kind in KINDS}  # fmt: skip
        over = report["distribution"]["designs"][name]["activation"]
        designs[name]["over_pairs"] = {direction: {kind: [[[cell["mean"], cell["low"], cell["high"]] for cell in row]
                                                          for row in rows] for kind, rows in grids.items()}
                                       for direction, grids in over.items()}  # fmt: skip
    return {"kinds": list(KINDS), "kind_labels": KIND_LABELS, "directions": list(DIRECTIONS), "designs": designs,
            "pairs": report["distribution"]["pairs"], "interval": report["distribution"]["interval"]}  # fmt: skip


def explorer_html(report: dict, script_src: str) -> str:
    """The explorer's raw HTML block (``ui.explorer.explorer_block``): its data island, the element the script
    fills, and the script."""
    return explorer_block("patching-explorer", explorer_data(report), script_src,
                          "The patching explorer is built when it scrolls into view, and needs JavaScript; the figures above "
                          "show every cell of the worked example (one draw), and the runner's report holds every cell's mean "
                          "and interval over the pairs.")  # fmt: skip
