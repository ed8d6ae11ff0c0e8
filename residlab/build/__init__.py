"""The top floor: what checks, renders and derives the site; nothing in the package imports it.

- ``site``: the site checks and the Quarto render (``residlab site``), failing on any warning line.
- ``sync``: ``residlab sync`` writes, and ``--check`` verifies, every file derived from the package.
- ``pins``: the lock's pins carried into ``_variables.yml`` and the requirements files; pin drift reported; a
  re-pin written into ``requirements.txt`` and the lock together.
- ``pins_command``: ``residlab pins outdated | try-latest | write``, on ``package_index`` (the newest release of a
  library, asked of pip, every wait bounded) and ``try_latest`` (the newest releases tried in a throwaway copy,
  a failure traced to one library; the plan is ``[tool.residlab.try-latest]`` in ``pyproject.toml``).
- ``runners``: the downloadable runners, bundled from each entry module's ``# bundled`` imports (its docstring is
  the manual of the bundling conventions).
- ``freeze_guard``: the Quarto pre-render step that drops frozen page results when a page's inputs changed.
"""
