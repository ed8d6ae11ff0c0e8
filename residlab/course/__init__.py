"""The pages' front door: every page imports what it computes or shows from here, and from nowhere else.

    from residlab.course import lesson_lab, markdown_table, PINNED_CONFIG

The course floor holds what the pages compute and draw: the Lab 05 toy trace (``toy``), the Lesson 2.1 copy model
and its audit (``lesson_lab``, ``copy_audit``), the pre-LN/post-LN gradient profile, the Lab 04 paper checks
(``paper_lab``), the glossary's cache layouts and figures, Lab 05 Part 4's capture tables and figures
(``capture_page``) and its explorer data, the lesson's diagrams (``diagrams``: inline SVG drawn at build time), and the openers of a reader's own capture and packet (``open_run``).
What several pages show, or one page waits long for (the trained copy model, the gradient profile, the specimen,
a runner's output, Lab 05's explorer data, Lab 06's audit), comes from ``shared``: computed once per render and
prefetched while earlier pages render. Pages also show a few facts that lower floors own (the pinned specimen's configuration, the fetch limits, the
audit tool); this door names each one once, with the module that owns it, so no page reaches into a floor's
internals.

Names resolve on first use (PEP 562): ``import residlab.course`` loads nothing heavy, and a page that needs no
torch (the toy trace) never imports it.
"""

from __future__ import annotations

import importlib

# name -> (module that owns it, attribute; None: the module itself)
_INTERFACE = {
    # what the pages compute
    "toy": ("residlab.course.toy", None),
    "lesson_lab": ("residlab.course.lesson_lab", None),
    "copy_audit": ("residlab.course.copy_audit", None),
    "paper_lab": ("residlab.course.paper_lab", None),
    "explorer_data": ("residlab.course.explorer_data", None),
    "capture_page": ("residlab.course.capture_page", None),
    "open_run": ("residlab.course.open_run", None),
    "decoder_audit": ("residlab.course.decoder_audit", None),
    # what several pages show, once per render (residlab.course.shared; outside a render, computed per call)
    "trained_copy_model": ("residlab.course.shared", "trained_copy_model"),
    "training_log": ("residlab.course.shared", "training_log"),
    "lesson_gradient_profile": ("residlab.course.shared", "gradient_profile"),
    "build_specimen_model": ("residlab.course.shared", "specimen_model"),
    "specimen_cache_layouts": ("residlab.course.shared", "specimen_cache_layouts"),
    "page_explorer": ("residlab.course.shared", "page_explorer"),
    "runner_output": ("residlab.course.shared", "runner_output"),
    "audited_decoder": ("residlab.course.shared", "audited_decoder"),
    # what they draw and tabulate
    "markdown_table": ("residlab.course.tables", "markdown_table"),
    "math_label": ("residlab.course.tables", "math_label"),
    "plot_gradient_profile": ("residlab.course.lesson_figures", "plot_gradient_profile"),
    "summarise_profile": ("residlab.course.lesson_figures", "summarise_profile"),
    "depths_where_first_exceeds": ("residlab.course.lesson_figures", "depths_where_first_exceeds"),
    "plot_positional_encoding": ("residlab.course.paper_figures", "plot_positional_encoding"),
    "FOUR_TOKENS": ("residlab.course.glossary_figures", "FOUR_TOKENS"),
    "draw_four_positions": ("residlab.course.glossary_figures", "draw_four_positions"),
    # box-and-arrow diagrams drawn as inline SVG when the page is built (no diagram library in the site)
    "Diagram": ("residlab.course.diagrams", "Diagram"),
    "Node": ("residlab.course.diagrams", "Node"),
    "Arrow": ("residlab.course.diagrams", "Arrow"),
    "diagram_figure": ("residlab.course.diagrams", "diagram_figure"),
    "diagram_svg": ("residlab.course.diagrams", "diagram_svg"),
    # the glossary's activation caches
    "encode_prompt": ("residlab.course.cache_layouts", "encode_prompt"),
    "load_shipped_tokenizer": ("residlab.course.cache_layouts", "load_shipped_tokenizer"),
    "import_transformers_quietly": ("residlab.course.cache_layouts", "import_transformers_quietly"),
    "record_block_outputs": ("residlab.course.cache_layouts", "record_block_outputs"),
    "gpt_neox_cache_layouts": ("residlab.course.cache_layouts", "gpt_neox_cache_layouts"),
    "library_hidden_states": ("residlab.course.cache_layouts", "library_hidden_states"),
    # facts lower floors own
    "audit": ("residlab.audit", None),
    "BLOCK_TYPES": ("residlab.capture.blocks", "BLOCK_TYPES"),
    "SPECIMEN_CONFIGS": ("residlab.capture.blocks", "SPECIMEN_CONFIGS"),
    "PINNED_CONFIG": ("residlab.pythia.specimen", "PINNED_CONFIG"),
    "TOKENIZER_SOURCE": ("residlab.pythia.specimen", "TOKENIZER_SOURCE"),
    "capture_residuals": ("residlab.pythia.observe", "capture_residuals"),
    "OBSERVED_LIBRARIES": ("residlab.pythia.observe", "LIBRARIES"),
    "FetchLimits": ("residlab.pythia.artifacts", "FetchLimits"),
    "load_lock": ("residlab.pythia.lock", "load_lock"),
    "GIT_FILE_MAX_BYTES": ("residlab.pythia.pin", "GIT_FILE_MAX_BYTES"),
}

__all__ = sorted(_INTERFACE)


def __getattr__(name: str):
    if name not in _INTERFACE:
        raise AttributeError(f"residlab.course offers no {name!r}; its interface: {', '.join(__all__)}")
    module_name, attribute = _INTERFACE[name]
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return __all__
