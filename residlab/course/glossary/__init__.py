"""The glossary: "Residual stream" and the entries it links.

- ``cache_layouts``: the activation-cache entry's two layouts of one forward pass (per-block outputs and the L + 1
  residual boundaries), on the synthetic GPT-NeoX specimen and on the copy model, and the shipped tokenizer.
- ``tokenizer_facts``: the tokenizer entry's counts, read from the shipped tokenizer file beside the pinned one.
- ``glossary_figures``: the residual-stream entry's four-position schematic (analytic, drawn by code).
"""
