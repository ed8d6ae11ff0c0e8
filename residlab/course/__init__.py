"""The pages' front door: every page imports what it computes or shows from here, and from nowhere else.

    from residlab.course import lesson_lab, markdown_table, PINNED_CONFIG

The course floor holds what the pages compute and draw, one room (subpackage) per page family, each room's
``__init__.py`` its manual:

- ``lesson/``: Lesson 2.1, the block picture and the lesson's figures;
- ``lab04/``: Lab 04, section 3 of the original paper checked by code;
- ``lab05/``: Lab 05, the toy hand trace (Parts 1-3, standard library only) and the observation of a GPT-NeoX
  capture (Part 4), with the openers of a reader's files;
- ``lab06/``: Lab 06, the audit tool's worked packets (the decoder, the induction model, the specimen) and the
  ``residlab audit`` command's worked example;
- ``lab07/``: Lab 07, activation, path and attribution patching on the induction model, over held-out prompt pairs against a null of the same model;
- ``glossary/``: the glossary's activation caches, figures and tokenizer facts.

A room imports no other page-family room; what several share lives in two shared rooms:

- ``models/``: the copy model and its lab, the gradient profile, the induction model the site trains, the
  specimen capture a page shows, one CPU thread for torch, a runner's stop when torch is missing;
- ``ui/``: Markdown tables and math labels, box-and-arrow diagrams, the peer boxes (TransformerLens and nnsight).

``pages`` is the registry of page families (each page, its room, runners, scripts, downloads, place in the
sidebar and on the learning path, the shown cells that run from a download, which ``downloads`` stands in for while
a page is built); ``shared`` declares the values several pages show, computed once per render (``residlab/render/`` holds the
cache). Pages also show a few facts that lower floors own (the pinned specimen's configuration, the fetch limits,
the audit tool); this door names each one once, with the module that owns it, so no page reaches into a floor's
internals.

Names resolve on first use (PEP 562): ``import residlab.course`` loads nothing heavy, and a page that needs no
torch (the toy trace) never imports it.
"""

from __future__ import annotations

import importlib

from residlab.render import inline_numbers

# In a kernel Quarto started for this project, each inline `{python}` result is marked with its expression, for the
# build's list of every number a page shows (assets/site/numbers.lua); anywhere else this does nothing.
inline_numbers.install()

# name -> (module that owns it, attribute; None: the module itself)
_INTERFACE = {
    # what the pages compute
    "toy": ("residlab.course.lab05.toy", None),
    "toy_code_check": ("residlab.course.lab05.code_check", None),
    "toy_skeleton": ("residlab.course.lab05.toy_skeleton", None),
    "lesson_lab": ("residlab.course.models.lesson_lab", None),
    "copy_audit": ("residlab.course.lab06.copy_audit", None),
    "paper_lab": ("residlab.course.lab04.paper_lab", None),
    "explorer_data": ("residlab.course.lab05.explorer_data", None),
    "capture_page": ("residlab.course.models.capture_page", None),
    "capture_source": ("residlab.course.models.capture_source", None),
    "capture_reading": ("residlab.course.lab05.capture_reading", None),
    "open_run": ("residlab.course.lab05.open_run", None),
    "page_explorer": ("residlab.course.lab05.explorer_data", "page_explorer"),
    "run_in_page_block": ("residlab.course.lab05.run_in_page", "run_in_page_block"),
    "decoder_audit": ("residlab.course.lab06.decoder_audit", None),
    "pythia_audit": ("residlab.course.lab06.pythia_audit", None),
    "scale_audit": ("residlab.course.lab06.scale_audit", None),
    "induction_recipe": ("residlab.course.models.induction.recipe", None),
    "induction_measures": ("residlab.course.models.induction.measures", None),
    "induction_audit": ("residlab.course.lab06.induction_audit", None),
    "induction_figures": ("residlab.course.models.induction.figures", None),
    "induction_sentences": ("residlab.course.models.induction.sentences", None),
    "peers": ("residlab.course.ui.peers", None),
    "downloads_table": ("residlab.course.pages", "downloads_table"),
    "learning_path": ("residlab.course.pages", "learning_path"),
    "download_href": ("residlab.course.pages", "download_href"),
    "LEARNER_PYTHON": ("residlab.course.pages", "LEARNER_PYTHON"),
    "stand_in_download": ("residlab.course.downloads", "stand_in"),
    "toy_editor": ("residlab.course.lab05.editor", None),
    "patching_methods": ("residlab.course.lab07.page", None),
    # what several pages show, once per render (residlab.course.shared; outside a render, computed per call)
    "trained_copy_model": ("residlab.course.shared", "trained_copy_model"),
    "training_log": ("residlab.course.shared", "training_log"),
    "lesson_gradient_profile": ("residlab.course.shared", "gradient_profile"),
    "specimen_model": ("residlab.course.shared", "specimen_model"),
    "specimen_cache_layouts": ("residlab.course.shared", "specimen_cache_layouts"),
    "audited_decoder": ("residlab.course.shared", "audited_decoder"),
    "scaled_audit": ("residlab.course.shared", "scaled_audit"),
    "induction_training": ("residlab.course.shared", "induction_training"),
    "patching_report": ("residlab.course.shared", "patching_report"),
    # what they draw and tabulate
    "markdown_table": ("residlab.course.ui.tables", "markdown_table"),
    "shown": ("residlab.audit.measures", "shown"),
    "math_label": ("residlab.course.ui.tables", "math_label"),
    "plot_gradient_profile": ("residlab.course.lesson.lesson_figures", "plot_gradient_profile"),
    "summarise_profile": ("residlab.course.lesson.lesson_figures", "summarise_profile"),
    "depths_where_first_exceeds": ("residlab.course.lesson.lesson_figures", "depths_where_first_exceeds"),
    "training_exposure": ("residlab.course.lesson.lesson_figures", "training_exposure"),
    "profile_sentences": ("residlab.course.lesson.lesson_figures", "profile_sentences"),
    "retained_verdict": ("residlab.course.lesson.lesson_figures", "retained_verdict"),
    "attribution_contrast": ("residlab.course.lesson.lesson_figures", "attribution_contrast"),
    "readout_sentence": ("residlab.course.lesson.lesson_figures", "readout_sentence"),
    "recovery_control_sentence": ("residlab.course.lesson.lesson_figures", "recovery_control_sentence"),
    "copy_accuracy_sentence": ("residlab.course.lesson.lesson_figures", "accuracy_sentence"),
    "copy_loss_sentence": ("residlab.course.lesson.lesson_figures", "loss_sentence"),
    "direct_effect_reading": ("residlab.course.lesson.lesson_figures", "direct_effect_reading"),
    "total_effect_reading": ("residlab.course.lesson.lesson_figures", "total_effect_reading"),
    "plot_positional_encoding": ("residlab.course.lab04.paper_figures", "plot_positional_encoding"),
    "FOUR_TOKENS": ("residlab.course.glossary.glossary_figures", "FOUR_TOKENS"),
    "draw_four_positions": ("residlab.course.glossary.glossary_figures", "draw_four_positions"),
    "plot_four_positions": ("residlab.course.glossary.glossary_figures", "plot_four_positions"),
    # every matplotlib figure drawn for a wide column and for a phone's (residlab.course.ui.figure_widths)
    "both_widths": ("residlab.course.ui.figure_widths", "both_widths"),
    # box-and-arrow diagrams drawn as inline SVG when the page is built (no diagram library in the site)
    "Diagram": ("residlab.course.ui.diagrams", "Diagram"),
    "Node": ("residlab.course.ui.diagrams", "Node"),
    "Arrow": ("residlab.course.ui.diagrams", "Arrow"),
    "diagram_figure": ("residlab.course.ui.diagrams", "diagram_figure"),
    "diagram_svg": ("residlab.course.ui.diagrams", "diagram_svg"),
    "block_figure": ("residlab.course.lesson.block_picture", "block_figure"),
    # the glossary's activation caches
    "encode_prompt": ("residlab.course.glossary.cache_layouts", "encode_prompt"),
    "load_shipped_tokenizer": ("residlab.course.glossary.cache_layouts", "load_shipped_tokenizer"),
    "shipped_tokenizer_facts": ("residlab.course.glossary.tokenizer_facts", "shipped_tokenizer_facts"),
    "import_transformers_quietly": ("residlab.capture.versions", "import_transformers_quietly"),
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
