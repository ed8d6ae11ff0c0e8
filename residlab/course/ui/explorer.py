"""One explorer data island: the raw HTML block with which a page hands an explorer (a script in
``assets/explorers/``) its data, computed when the page is built. The browser only formats what the page wrote.

    print(explorer_block("capture-explorer", data, "../assets/explorers/capture-explorer.js",
                         "The capture explorer needs JavaScript. The tables above show the selected position."))

in a cell with ``output: asis``. Standard library only.
"""

from __future__ import annotations

import html
import json


def explorer_block(explorer_id: str, data, script_src: str, without_script: str) -> str:
    """The explorer's raw HTML block: its data as JSON in ``<script type="application/json"
    id="EXPLORER_ID-data">``, the element the script fills (``id=EXPLORER_ID``, ``data-source`` naming the data),
    holding ``without_script`` for readers without JavaScript and naming its script in ``data-residlab-scripts``
    (the site's loader, ``assets/site/explorers.html``, fetches it when the element nears the screen)."""
    data_id = f"{explorer_id}-data"
    # "<" escaped, so no string in the data can end the script element early.
    payload = json.dumps(data, ensure_ascii=True, allow_nan=False).replace("<", "\\u003c")
    return (
        "```{=html}\n"
        f'<script type="application/json" id="{data_id}">{payload}</script>\n'
        f'<div class="residlab-explorer" id="{explorer_id}" data-source="{data_id}"'
        f' data-residlab-scripts="{html.escape(script_src)}"><p>{html.escape(without_script)}</p></div>\n'
        "```\n"
    )
