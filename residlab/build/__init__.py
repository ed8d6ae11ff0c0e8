"""The top floor: what checks, renders and derives the site; nothing in the package imports it.

- ``site``: the ``residlab site`` command and the Quarto render it wraps, failing on any warning line; exit
  statuses chosen by the error's type.
- ``site_check``: the static checks of the sources (``residlab site check``), the site's pages and configuration.
- ``site_verify``: the checks of what a render built (``residlab site verify DIR``).
- ``sync``: ``residlab sync`` writes, and ``--check`` verifies, every file derived from the package.
- ``pins``: the lock's pins carried into ``_variables.yml`` and the requirements files; pin drift reported; a
  re-pin written into ``requirements.txt`` and the lock together.
- ``pins_command``: ``residlab pins outdated | try-latest | write``, on ``package_index`` (the newest release of a
  library, asked of pip, every wait bounded) and ``try_latest`` (the newest releases tried in a throwaway copy,
  a failure traced to one library; the plan is ``[tool.residlab.try-latest]`` in ``pyproject.toml``).
- ``runners``: the downloadable runners, each built from the modules its registry entry lists
  (``residlab/course/pages.py``), in that order.
- ``bundle``: reads a runner's modules and checks the list against their imports (its docstring: the conventions
  a runner's module follows).
- ``checkout``: the project as a fresh clone has it, copied elsewhere (the render tests' clean copy, the trial's
  throwaway copy).
- ``npm_installs``: the first Quarto pre-render step, the npm packages the site serves (``assets/*/``) installed
  from their locks when missing, so a plain ``quarto render`` of a fresh clone builds.
- ``freeze_guard``: the Quarto pre-render step that drops frozen page results when a page's inputs changed.
- ``preview_image``: a Quarto post-render step, the site's social-preview image drawn into the built site.
- ``page_weight``: a Quarto post-render step, what a phone downloads before it paints: the fonts subset to what
  the pages use, the site's own scripts and stylesheet and every page's inline scripts minified (``minify``), then
  ``first_paint``'s rewrites of every page.
- ``minify``: esbuild, the build's one JavaScript and CSS tool, from ``assets/editor``'s npm lock: it minifies for
  ``page_weight`` and bundles for ``editor_bundle``.
- ``first_paint``: the rewrites of Quarto's HTML for which Quarto offers no option of its own, each stopping the
  build with a clear error when the pattern it rewrites is missing.
- ``phone_figures``: a Quarto post-render step, each figure's phone drawing (``course/ui/figure_widths``) put
  beside it in the site and offered to a phone by ``<picture>``.
- ``pyodide_files``: a Quarto post-render step, the pinned Pyodide files Lab 05's editor runs copied into the site
  (from ``make pyodide``'s install).
- ``editor_bundle``: a Quarto post-render step, Lab 05's code editor (CodeMirror 6) bundled by esbuild into the site
  (from ``make editor``'s install).
- ``onnx_files``: a Quarto post-render step, the page's model exported to ONNX (``pythia.onnx_export``, cached by the
  weights' digest) with its licence and the numbers a browser's run is checked against, and the pinned onnxruntime-web
  and tokenizers files that run it, copied into the site (from the npm install in ``assets/onnx-runtime/``).
- ``numbers_list``: a Quarto post-render step, the pages' lists of every number they show (``assets/site/numbers.lua``)
  gathered into ``numbers.json`` of the site with the pins the build ran with.
- ``release``: ``residlab release TERM | verify TERM | diff A B``: a build kept as a term's release under
  ``releases/TERM/`` with a sha256 manifest, checked against it, and two builds' pins and numbers compared.
- ``lighthouse``: Lighthouse run on the built site served as GitHub Pages serves it (the site tests and
  ``benchmarks/lighthouse_scores.py``).
"""
