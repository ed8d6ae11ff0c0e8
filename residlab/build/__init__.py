"""The top floor: what checks, renders and derives the site; nothing in the package imports it.

- ``site``: the site checks and the Quarto render (``residlab site``), failing on any warning line.
- ``sync``: ``residlab sync`` writes, and ``--check`` verifies, every file derived from the package.
- ``pins``: the lock's pins carried into ``_variables.yml`` and the requirements files; pin drift reported.
- ``runners``: the downloadable runners, each built from the modules its entry in ``RUNNERS`` lists, in that order
  (its docstring is the manual of the bundling conventions).
- ``freeze_guard``: the Quarto pre-render step that drops frozen page results when a page's inputs changed.
"""
