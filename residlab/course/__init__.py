"""The pages' front door: every page imports what it computes or shows from here, and from nowhere else.

    from residlab.course import lesson_lab, markdown_table, PINNED_CONFIG

The course floor holds what the pages compute and draw, one room (subpackage) per page family, each room's
``__init__.py`` its manual:

- ``lab05_toy/``: Lab 05 Parts 1-3, the toy hand trace (standard library only);
- ``lesson/``: Lesson 2.1, the trained copy model, its audit and the gradient profile;
- ``lab04_paper/``: Lab 04, section 3 of the original paper checked by code;
- ``glossary/``: the glossary's activation caches and figures;
- ``lab05_observation/``: Lab 05 Part 4, a GPT-NeoX capture shown and explored, and the openers of a reader's files;
- ``lab06_audit/``: Lab 06, the audit tool's worked packet;
- ``induction/``: the two-block induction model the site trains itself, what it learned, measured, and its audit
  (the glossary's attention, logit-lens and activation-patching entries, Lab 06 Part 2);
- ``render/``: what only a render needs, the values several pages share, computed once per render.

Beside them, helpers every room uses: ``tables`` (Markdown tables, math labels), ``diagrams`` (box-and-arrow
diagrams drawn as inline SVG when the page is built), ``threads`` (one CPU thread for the torch experiments),
``needs_torch`` (a runner's one-line stop when torch is missing) and ``peers`` (the boxes showing a capture or patch
in TransformerLens and nnsight, from the snippets ``tests/peers/`` runs). Pages also show a
few facts that lower floors own (the pinned specimen's configuration, the fetch limits, the audit tool); this
door names each one once, with the module that owns it, so no page reaches into a floor's internals.

Names resolve on first use (PEP 562): ``import residlab.course`` loads nothing heavy, and a page that needs no
torch (the toy trace) never imports it.
"""

from __future__ import annotations

import importlib

# name -> (module that owns it, attribute; None: the module itself)
_INTERFACE = {
    # what the pages compute
    "toy": ("residlab.course.lab05_toy.toy", None),
    "lesson_lab": ("residlab.course.lesson.lesson_lab", None),
    "copy_audit": ("residlab.course.lesson.copy_audit", None),
    "paper_lab": ("residlab.course.lab04_paper.paper_lab", None),
    "explorer_data": ("residlab.course.lab05_observation.explorer_data", None),
    "capture_page": ("residlab.course.lab05_observation.capture_page", None),
    "capture_source": ("residlab.course.lab05_observation.capture_source", None),
    "capture_reading": ("residlab.course.lab05_observation.capture_reading", None),
    "open_run": ("residlab.course.lab05_observation.open_run", None),
    "page_explorer": ("residlab.course.lab05_observation.explorer_data", "page_explorer"),
    "decoder_audit": ("residlab.course.lab06_audit.decoder_audit", None),
    "pythia_audit": ("residlab.course.lab06_audit.pythia_audit", None),
    "induction_recipe": ("residlab.course.induction.recipe", None),
    "induction_measures": ("residlab.course.induction.measures", None),
    "induction_audit": ("residlab.course.induction.induction_audit", None),
    "induction_figures": ("residlab.course.induction.figures", None),
    "induction_sentences": ("residlab.course.induction.sentences", None),
    "peers": ("residlab.course.peers", None),
    # what several pages show, once per render (residlab.course.render.shared; outside a render, computed per call)
    "trained_copy_model": ("residlab.course.render.shared", "trained_copy_model"),
    "training_log": ("residlab.course.render.shared", "training_log"),
    "lesson_gradient_profile": ("residlab.course.render.shared", "gradient_profile"),
    "specimen_model": ("residlab.course.render.shared", "specimen_model"),
    "specimen_cache_layouts": ("residlab.course.render.shared", "specimen_cache_layouts"),
    "audited_decoder": ("residlab.course.render.shared", "audited_decoder"),
    "induction_training": ("residlab.course.render.shared", "induction_training"),
    # what they draw and tabulate
    "markdown_table": ("residlab.course.tables", "markdown_table"),
    "math_label": ("residlab.course.tables", "math_label"),
    "plot_gradient_profile": ("residlab.course.lesson.lesson_figures", "plot_gradient_profile"),
    "summarise_profile": ("residlab.course.lesson.lesson_figures", "summarise_profile"),
    "depths_where_first_exceeds": ("residlab.course.lesson.lesson_figures", "depths_where_first_exceeds"),
    "training_exposure": ("residlab.course.lesson.lesson_figures", "training_exposure"),
    "profile_sentences": ("residlab.course.lesson.lesson_figures", "profile_sentences"),
    "retained_verdict": ("residlab.course.lesson.lesson_figures", "retained_verdict"),
    "attribution_contrast": ("residlab.course.lesson.lesson_figures", "attribution_contrast"),
    "plot_positional_encoding": ("residlab.course.lab04_paper.paper_figures", "plot_positional_encoding"),
    "FOUR_TOKENS": ("residlab.course.glossary.glossary_figures", "FOUR_TOKENS"),
    "draw_four_positions": ("residlab.course.glossary.glossary_figures", "draw_four_positions"),
    "plot_four_positions": ("residlab.course.glossary.glossary_figures", "plot_four_positions"),
    # every matplotlib figure drawn for a wide column and for a phone's (residlab.course.figure_widths)
    "both_widths": ("residlab.course.figure_widths", "both_widths"),
    # box-and-arrow diagrams drawn as inline SVG when the page is built (no diagram library in the site)
    "Diagram": ("residlab.course.diagrams", "Diagram"),
    "Node": ("residlab.course.diagrams", "Node"),
    "Arrow": ("residlab.course.diagrams", "Arrow"),
    "diagram_figure": ("residlab.course.diagrams", "diagram_figure"),
    "diagram_svg": ("residlab.course.diagrams", "diagram_svg"),
    "block_figure": ("residlab.course.lesson.block_picture", "block_figure"),
    # the glossary's activation caches
    "encode_prompt": ("residlab.course.glossary.cache_layouts", "encode_prompt"),
    "load_shipped_tokenizer": ("residlab.course.glossary.cache_layouts", "load_shipped_tokenizer"),
    "import_transformers_quietly": ("residlab.pythia.load", "import_transformers_quietly"),
    "record_block_outputs": ("residlab.course.glossary.cache_layouts", "record_block_outputs"),
    "gpt_neox_cache_layouts": ("residlab.course.glossary.cache_layouts", "gpt_neox_cache_layouts"),
    "library_hidden_states": ("residlab.course.glossary.cache_layouts", "library_hidden_states"),
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
    "lock_label": ("residlab.pythia.cache", "lock_label"),
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
