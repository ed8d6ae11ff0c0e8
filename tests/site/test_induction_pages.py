"""The induction model on the pages this session's render built (issue 27): the glossary's attention, logit-lens
and activation-patching entries and Lab 06 Part 2 show the heads, the lens trajectory, the patching heatmap and the
audit of the model this render trained.

The training the pages read is the one ``induction_training`` entry this render's cache computed (every page read
it; ``test_build`` checks it was computed once). Its weights are loaded into a plain ``GPTNeoXForCausalLM`` and run
here, so the accuracies, the lens's output state, the patching metrics and the audit's parameter digest are
recomputed from the weights, not copied from the report. Each heatmap is checked by its pixels: the centre of
every cell has the colour of this render's value under the figure's colour map.
"""

from __future__ import annotations

import base64
import html
import io
import pickle
import re

import numpy as np
import pytest
import torch
from built_text import shown

from residlab.course import induction_sentences

pytestmark = pytest.mark.slow

OUTPUT_STATE = "after block 1 (the output)"


@pytest.fixture(scope="module")
def training(built_site, tmp_path_factory):
    """(report, Lab 06's audit of it, the model from the stored weights) of this render's one training."""
    from transformers import GPTNeoXForCausalLM

    from residlab.render import render_cache

    folder = built_site.project / render_cache.RENDER_CACHE_DIR
    uses = render_cache.read_uses(folder)
    computed = [use for use in uses if use["name"] == "induction_training" and use["how"] == "computed"]
    assert len(computed) == 1, computed
    (entry,) = folder.glob(f"*/{computed[0]['entry']}")
    stored = pickle.loads(entry.read_bytes())  # written by this render's own prefetch or page
    directory = tmp_path_factory.mktemp("induction-model")
    for name, data in stored.model_files.items():
        (directory / name).write_bytes(data)
    model = GPTNeoXForCausalLM.from_pretrained(directory, dtype=torch.float32, attn_implementation="eager")
    return stored.report, stored.audit, model.eval()


def logits(model, ids) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=torch.as_tensor(ids)).logits.double()


def metric(model, ids, target: int, rival: int) -> float:
    last = logits(model, [list(ids)])[0, -1]
    return float(last[target] - last[rival])


def figure_svg(built_site, page: str, label: str) -> str:
    html = (built_site.site / page).read_text(encoding="utf-8")
    source = re.search(rf'id="{label}".*?<img src="([^"]+)"', html, re.S).group(1)
    assert source.endswith(".svg") and not source.startswith(("http:", "https:", "//"))
    return (built_site.site / page).parent.joinpath(source).read_text(encoding="utf-8")


def svg_texts(svg: str) -> list[str]:
    """The strings of a matplotlib SVG: the site's figures keep them as SVG text (residlab.course.ui.figure_widths),
    one <text> a line; drawn as paths, each string stands in a comment before them."""
    return [html.unescape(text) for text in re.findall(r"<text\b[^>]*>([^<]*)</text>", svg)] + re.findall(r"<!-- (.*?) -->", svg)


def svg_images(svg: str) -> list[np.ndarray]:
    """The raster images of an SVG (matplotlib embeds each imshow as a PNG), RGBA in [0, 1], in drawing order, the
    way up they are shown (matplotlib stores them upside down under a ``scale(1 -1)`` transform)."""
    import matplotlib.image

    images = []
    for tag in re.findall(r"<image [^>]*>", svg):
        data = re.search(r'xlink:href="data:image/png;base64,([^"]+)"', tag).group(1)
        image = matplotlib.image.imread(io.BytesIO(base64.b64decode(data.replace("\n", ""))))
        images.append(image[::-1] if "scale(1 -1)" in tag else image)
    return images


def assert_cells_show(image: np.ndarray, grid, colour) -> None:
    """Every cell centre of a heatmap drawn over the whole image has ``colour(value)`` (a blank for None), to
    within the PNG's 8-bit rounding."""
    rows, columns = len(grid), len(grid[0])
    height, width = image.shape[:2]
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            pixel = image[int((i + 0.5) * height / rows), int((j + 0.5) * width / columns)]
            expected = np.zeros(4) if value is None else np.array(colour(value))
            assert np.abs(pixel - expected).max() <= 1.5 / 255, (i, j, value, pixel, expected)


def colour_map(name: str, low: float, high: float):
    import matplotlib

    return lambda value: matplotlib.colormaps[name]((value - low) / (high - low))


def test_attention_entry_shows_this_renders_accuracy_scores_and_heads(built_site, training):
    from residlab.course.models.induction import measures

    report, _, model = training
    held = report["held_out"]
    sequences = measures.held_out_sequences(held["seed"], held["per_period"])
    assert sorted(sequences) == held["periods"]
    hits = {"first": [], "repeated": []}
    for period, tokens in sequences.items():
        predicted = logits(model, tokens).argmax(-1)
        for half, start in (("first", 0), ("repeated", period)):
            hits[half].append(predicted[:, start : start + period - 1] == tokens[:, start + 1 : start + period])
    accuracy = {half: float(torch.cat([h.reshape(-1) for h in found]).double().mean()) for half, found in hits.items()}
    text = shown(built_site.site, "glossary/attention.html")
    assert f"top-1 accuracy is {accuracy['repeated']:.3f} on the repeated half" in text
    assert f"On the first half it is {accuracy['first']:.3f}, " in text
    scores = report["head_scores"]
    for block, row in enumerate(scores["previous_token"]):
        for head, previous in enumerate(row):
            assert f"| {block} | {head} | {previous:.3f} | {scores['induction'][block][head]:.3f} |" in text
    svg = figure_svg(built_site, "glossary/attention.html", "fig-induction-heads")
    labels = svg_texts(svg)
    images = svg_images(svg)
    for panel, kind in enumerate(("previous_token", "induction")):
        head = report["heads_found"][kind]
        assert f"block {head['block']}, head {head['head']}" in text
        assert f"block {head['block']}, head {head['head']} ({head['score']:.2f})" in labels
        assert_cells_show(images[panel], report["example"]["attention"][kind], colour_map("Blues", 0, 1))
    tokens = report["example"]["tokens"]
    assert [f"{position}: {token}" for position, token in enumerate(tokens)] == labels[: len(tokens)]


def test_logit_lens_entry_shows_this_renders_trajectory(built_site, training):
    from residlab.course.models.induction import measures

    report, _, model = training
    lens = report["lens"]["held_out"]
    period = report["example"]["period"]
    tokens = measures.held_out_sequences(report["held_out"]["seed"], report["held_out"]["per_period"])[period]
    predicted = logits(model, tokens)[:, period:-1].argmax(-1)
    output_top1 = float((predicted == tokens[:, period + 1 :]).double().mean())  # the lens's last state is the output
    assert lens[OUTPUT_STATE]["top1"] == pytest.approx(output_top1, abs=1e-6)  # a float32 mean in the report
    text = shown(built_site.site, "glossary/logit-lens.html")
    for state, values in lens.items():
        assert f"| {state} | {values['p_right']:.3f} | {values['top1']:.3f} |" in text
    svg = figure_svg(built_site, "glossary/logit-lens.html", "fig-induction-lens")
    trajectory = report["lens"]["example"]
    assert list(trajectory) == list(lens) and set(svg_texts(svg)) >= set(lens)
    grid = [values["p_right_by_position"] for values in trajectory.values()]
    assert_cells_show(svg_images(svg)[0], grid, colour_map("Greens", 0, 1))


def test_patching_entry_shows_this_renders_heatmap(built_site, training):
    report, _, model = training
    patching = report["patching"]
    experiment = patching["experiment"]
    target, rival = experiment["target"], experiment["rival"]
    clean = metric(model, experiment["clean"], target, rival)
    corrupt = metric(model, experiment["corrupt"], target, rival)
    assert (patching["clean_metric"], patching["corrupt_metric"]) == pytest.approx((clean, corrupt), abs=1e-4)
    text = shown(built_site.site, "glossary/activation-patching.html")
    assert f"{str(tuple(experiment['clean']))}: at the last position the right next token is {target}" in text
    assert f"{clean:.2f} clean, {corrupt:.2f} corrupted" in text
    for row, values in zip(patching["rows"], patching["recovery"]):
        for position, value in enumerate(values):
            if value is not None and value >= 0.5:
                assert f"{row} at position {position} (R = {induction_sentences.observed_recovery(value)})" in text or (
                    f"{row} at position {position} (R = 1.00)" in text and value == pytest.approx(1.0, abs=1e-6))  # the identity
    svg = figure_svg(built_site, "glossary/activation-patching.html", "fig-induction-patching")
    assert set(svg_texts(svg)) >= set(patching["rows"])
    finite = [abs(value) for values in patching["recovery"] for value in values if value is not None]
    limit = max([1.0, *finite])
    assert_cells_show(svg_images(svg)[0], patching["recovery"], colour_map("RdBu_r", -limit, limit))


def test_lab06_part2_audits_this_renders_model_before_the_null_baseline(built_site, training):
    from residlab import audit

    report, lab06, model = training
    packet = lab06.packet
    experiment = lab06.experiment
    text = shown(built_site.site, "labs/06-audit-a-decoder.html")
    trained_part = text.index("The trained induction model")
    assert trained_part < text.index("An untrained baseline: a random-weight specimen")
    digest = audit.parameter_digests(model)["digest"]
    assert f"parameters {digest[:16]}..." in text  # the audited directory holds this render's weights
    clean = metric(model, experiment.clean, experiment.target, experiment.rival)
    corrupt = metric(model, experiment.corrupt, experiment.target, experiment.rival)
    assert f"clean {clean:.3f}, corrupt {corrupt:.3f}" in text
    for line in audit.summary_lines(packet):
        assert " ".join(line.split()) in text[trained_part:], line
    assert packet["model"]["parameters"]["digest"] == digest
    verified = "every check passed" if lab06.verification_passed else "it failed"
    assert f"Verification of this packet: {verified}" in text
    assert f"{report['halves']['repeated']['accuracy']:.3f} on the repeated half" in text[trained_part:]
