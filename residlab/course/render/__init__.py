"""What only a render needs: values several pages show, computed once per render.

- ``shared``: the shared values the front door offers (the trained copy model, the gradient profile, the
  specimen, Lab 06's audit, ...), each declared once with ``@shared_value``, and the prefetch that computes them
  in the background while Quarto renders the pages before.
- ``render_cache``: the cache they are stored in while Quarto executes this project's pages (any Quarto render),
  keyed by the freeze guard's digest of the execution inputs, one lock file per entry.
"""
