"""What every page family draws with: standard library only, importing no other room.

- ``tables``: Markdown tables and math labels.
- ``diagrams``: box-and-arrow diagrams drawn as inline SVG when the page is built (no diagram library in the site).
- ``explorer``: one explorer data island (``explorer_block``): an explorer script's data, written into the page as
  JSON, the element it fills and the script.
- ``peers``: the boxes showing a capture or patch in TransformerLens and nnsight, from the snippets ``tests/peers/``
  runs.
"""
