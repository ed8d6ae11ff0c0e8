"""What only a render needs, below ``course/`` and ``build/`` (standard library only; both import it).

- ``render_cache``: the cache in which the values several pages show are stored while Quarto executes this
  project's pages (any Quarto render), keyed by the freeze guard's digest of the execution inputs, one lock file
  per entry. The values themselves are declared in ``residlab/course/shared.py``.
"""
