"""Lab 05 Parts 1-3: the toy residual trace, exact, with the standard library alone.

- ``toy``: the two update rules, the trace of a column vector through both branches, the readouts and the
  report the page, the toy runner (``assets/labs/trace_residual_toy.py``) and ``residlab toy`` print.
- ``exact_vectors``: ``Vector``, exact rational entries with norms kept in exact form; the toy explorer and the
  answer checker (``assets/explorers/``) repeat this arithmetic in JavaScript.
"""
