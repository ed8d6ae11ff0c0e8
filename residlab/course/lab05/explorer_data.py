"""What Lab 05's capture explorer shows: the observation of every token position of a capture, as the capture's
own ``observations.json`` holds it.

The observation (``residlab.pythia.observe``) observes every position and writes them all; ``read_capture`` has
checked each against the tensors in ``captures.json``. This module only picks what the explorer needs and writes
it into the page: no model is built and nothing is observed again at render time. The browser only formats what
this module writes (``assets/explorers/capture-explorer.js``).
"""

from __future__ import annotations

from residlab.course.models.capture_page import PageCapture
from residlab.course.ui.explorer import explorer_block

EXPLORER_ID = "capture-explorer"


def explorer_data(capture: PageCapture) -> dict:
    """Every position's observation of this capture, with the tokens and where the capture came from."""
    observations = capture.observations
    return {
        "synthetic": capture.synthetic,
        "fresh": capture.fresh,
        "repository": capture.manifest["repository"],
        "revision": capture.manifest["revision"],
        "text": observations["text"],
        "tokens": [{"position": t["position"], "id": t["id"], "piece": t["piece"]} for t in observations["tokens"]],
        "selected_position": observations["selected_position"],
        "positions": capture.positions,
    }


def explorer_html(data: dict, script_src: str) -> str:
    """The explorer's raw HTML block: its data as JSON, the element the script fills, and the script."""
    return explorer_block(EXPLORER_ID, data, script_src,
                          "The capture explorer needs JavaScript. The tables above show the selected position.")


def page_explorer(capture: PageCapture, script_src: str) -> str:
    """For a page cell with ``output: asis``: the explorer of the capture the page shows."""
    return explorer_html(explorer_data(capture), script_src)
