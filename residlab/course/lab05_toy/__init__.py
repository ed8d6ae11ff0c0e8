"""Lab 05 Parts 1-3: the toy residual trace, exact, with the standard library alone.

- ``toy``: the two update rules, the trace of a column vector through both branches, the readouts and the
  report the page, the toy runner (``assets/labs/trace_residual_toy.py``) and ``residlab toy`` print.
- ``toy_skeleton``: Part 3's skeleton (the download ``my_toy.py``), the functions a learner writes, on plain lists.
- ``code_check``: Part 3's checker (the download ``check_toy.py``, also run in the page under Pyodide): a learner's
  functions on held-out inputs against ``toy``, each "passes" or its mistake named.
- ``exact_vectors``: ``Vector``, exact rational entries with norms kept in exact form; the toy explorer and the
  answer checker (``assets/explorers/``) repeat this arithmetic in JavaScript.
"""
