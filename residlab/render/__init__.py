"""What only a render needs, below ``course/`` and ``build/`` (standard library only; both import it).

- ``render_cache``: the cache in which the values several pages show are stored while Quarto executes this
  project's pages (any Quarto render), keyed by the freeze guard's digest of the execution inputs, one lock file
  per entry. The values themselves are declared in ``residlab/course/shared.py``.
- ``inline_numbers``: in a kernel Quarto started for this project, each inline ``{python}`` result holding a digit
  marked with its expression, for the build's list of every number a page shows (``assets/site/numbers.lua``).
"""
