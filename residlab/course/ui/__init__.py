"""What every page family draws with: standard library only, importing no other room.

- ``tables``: Markdown tables and math labels.
- ``diagrams``: box-and-arrow diagrams drawn as inline SVG when the page is built (no diagram library in the site).
- ``explorer``: one explorer data island (``explorer_block``): an explorer script's data, written into the page as
  JSON, the element it fills and the script.
- ``figure_widths``: every matplotlib figure drawn for a wide column and for a phone (``both_widths``), its
  smallest text at 11 CSS px or more on both.
- ``chance``: where an accuracy stands against its chance level (``against_chance``), for every page's accuracy
  sentence.
- ``peers``: the boxes showing a capture or patch in TransformerLens and nnsight, from the snippets ``tests/peers/``
  runs.
"""
