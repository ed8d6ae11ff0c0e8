"""Lab 04 "Read the Original Transformer Paper": section 3 of Vaswani et al. (2017) checked by code.

- ``paper_lab``: the report of ``residlab paper`` and of the runner ``assets/labs/read_transformer_paper.py``.
- ``positional_encoding``: the base model's sizes and the sinusoidal encoding, with the fixed-offset rotation.
- ``traced_block``: PyTorch's post-LN encoder layer traced with ``record_sites`` and checked against the paper.
- ``paper_figures``: the positional-encoding figure (package only).
"""
