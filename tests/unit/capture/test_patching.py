"""residlab.capture.patching: the one intervention primitive (zero, set, take from another run; one patched run;
the grid of site x position cells), on a tiny torch module and on a random-weight GPT-NeoX block stack."""

from __future__ import annotations

import pytest
import torch

from residlab.capture.patching import patch_grid, run_patched, set_to, taken_from, zeroed
from residlab.capture.recording import record_sites, hook_snapshot


class Tiny(torch.nn.Module):
    """x (batch, n, 4) -> first -> second (reads first's output) -> out."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.first = torch.nn.Linear(4, 4)
        self.second = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.second(torch.tanh(self.first(x)))


def sites(model):
    return [("first.out", model.first, "output"), ("second.in", model.second, "input"),
            ("out", model.second, "output")]  # fmt: skip


def by_hand(model, x, first=lambda h: h, second_in=lambda h: h):
    with torch.no_grad():
        return model.second(second_in(torch.tanh(first(model.first(x)))))


def test_zeroed_and_set_to_edit_only_the_chosen_positions_of_every_batch_row():
    tensor = torch.arange(24.0).reshape(2, 3, 4)
    zero = zeroed([0, 2])(tensor)
    assert torch.equal(zero[:, 1], tensor[:, 1]) and not zero[:, [0, 2]].any()
    assert not zeroed()(tensor).any()
    vector = torch.tensor([1.0, 2.0, 3.0, 4.0])
    put = set_to(vector, -1)(tensor)
    assert torch.equal(put[:, -1], vector.expand(2, 4)) and torch.equal(put[:, :2], tensor[:, :2])
    assert torch.equal(tensor, torch.arange(24.0).reshape(2, 3, 4))  # the site's own tensor never written


def test_an_input_site_is_patched_before_its_module_reads_it():
    model, x = Tiny(), torch.randn(1, 3, 4)
    out = run_patched(lambda: model(x), sites(model), {"second.in": zeroed(1)})
    expected = by_hand(model, x, second_in=lambda h: zeroed(1)(h))
    assert torch.allclose(out, expected) and not torch.allclose(out, model(x))


def test_taken_from_puts_the_other_runs_values_and_leaves_that_recording_as_it_was():
    model, clean_x, corrupt_x = Tiny(), torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    with record_sites(sites(model)) as clean, torch.no_grad():
        model(clean_x)
    source = clean.records["first.out"]
    kept = source.clone()
    out = run_patched(lambda: model(corrupt_x), sites(model), {"first.out": taken_from(source, 2)})

    def splice(h):
        h = h.clone()
        h[:, 2] = source[:, 2]
        return h

    assert torch.allclose(out, by_hand(model, corrupt_x, first=splice))
    assert torch.equal(source, kept)  # the baseline is never mutated
    with pytest.raises(ValueError, match="does not fit a site of shape"):
        run_patched(lambda: model(torch.randn(1, 5, 4)), sites(model), {"first.out": taken_from(source, 0)})


def test_the_grid_is_one_patched_run_per_cell_and_leaves_no_hook():
    model, clean_x, corrupt_x = Tiny(), torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    with record_sites(sites(model)) as clean, torch.no_grad():
        model(clean_x)

    def metric() -> float:
        with torch.no_grad():
            return float(model(corrupt_x)[0, -1, 0])

    names = ["first.out", "second.in"]
    grid = patch_grid(metric, sites(model), names, range(3), lambda name, p: taken_from(clean.records[name], p))
    assert len(grid) == 2 and all(len(row) == 3 for row in grid)
    for name, row in zip(names, grid):
        for position, value in enumerate(row):
            alone = run_patched(metric, sites(model), {name: taken_from(clean.records[name], position)})
            assert value == alone
    # Patching every position of the block's input with the clean run's recovers the clean output exactly.
    whole = run_patched(metric, sites(model), {"second.in": taken_from(clean.records["second.in"])})
    with torch.no_grad():
        assert whole == pytest.approx(float(model(clean_x)[0, -1, 0]), abs=1e-6)
    assert hook_snapshot(model) == {}


def test_a_site_not_given_is_refused_and_a_failing_run_leaves_no_hook():
    model, x = Tiny(), torch.randn(1, 2, 4)
    with pytest.raises(ValueError, match=r"patched site\(s\) 'nowhere' are not among the sites given"):
        run_patched(lambda: model(x), sites(model), {"nowhere": zeroed()})

    def fails():
        model(x)
        raise RuntimeError("the run failed")

    with pytest.raises(RuntimeError, match="the run failed"):
        run_patched(fails, sites(model), {"first.out": zeroed()})
    assert hook_snapshot(model) == {}


def test_block_input_from_the_table_patches_a_gpt_neox_model():
    transformers = pytest.importorskip("transformers")
    from residlab.capture.blocks import SPECIMEN_CONFIGS, block_type_for
    from residlab.capture.sites import resolve_sites, site_name

    config = transformers.GPTNeoXConfig(**{k: v for k, v in SPECIMEN_CONFIGS["gpt_neox"].items() if k != "model_type"})
    torch.manual_seed(0)
    model = transformers.GPTNeoXForCausalLM(config).eval()
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    table_sites = resolve_sites(model, block_type_for(config), config.num_hidden_layers)
    run = lambda: model(input_ids=ids, use_cache=False).logits  # noqa: E731
    with torch.no_grad():
        # Zeroing block 0's input (the embedding) everywhere equals feeding zero embeddings.
        patched = run_patched(run, table_sites, {site_name(0, "resid_pre"): zeroed()})
        zero_embeddings = model(inputs_embeds=torch.zeros(1, 5, config.hidden_size), use_cache=False).logits
        assert torch.allclose(patched, zero_embeddings, atol=1e-5)
        # Block 1's input is block 0's output: patching either at one position gives the same logits.
        with record_sites(table_sites) as other:
            model(input_ids=torch.tensor([[9, 8, 7, 6, 5]]), use_cache=False)
        block_1_input, block_0_output = site_name(1, "resid_pre"), site_name(0, "resid_post")
        via_input = run_patched(run, table_sites, {block_1_input: taken_from(other.records[block_1_input], 2)})
        via_output = run_patched(run, table_sites, {block_0_output: taken_from(other.records[block_0_output], 2)})
        assert torch.allclose(via_input, via_output, atol=1e-6) and not torch.allclose(via_input, run(), atol=1e-4)
        # Positions before the patched one cannot see it (causal attention).
        assert torch.allclose(via_input[0, :2], run()[0, :2], atol=1e-6)
    assert hook_snapshot(model) == {}
