"""What only a render needs: values several pages show, computed once per render.

- ``shared``: the shared values the front door offers (the trained copy model, the gradient profile, the
  specimen, Lab 06's audit, ...) and the prefetch that computes them beside Quarto.
- ``render_cache``: the content-addressed cache they are stored in while ``residlab site render`` runs.
"""
