"""residlab: computes everything the residual-stream course site shows.

Six floors, each a folder; imports only run downward (``tests/unit/test_layers.py`` checks it):

- ``residlab.capture``  the bottom: per-architecture block tables, the one site-naming function and resolver,
                        ``record_sites`` (the one recording mechanism), the one patching primitive and the one
                        output-directory rule
- ``residlab.render``   beside it: the per-render cache of the values several pages share (standard library only)
- ``residlab.audit``    the Residual Contribution Audit as a tool: subjects, runs, four-record packets, verification
- ``residlab.pythia``   the pinned Pythia-14M specimen: lock, verified download, offline load, observation
- ``residlab.course``   what the pages compute and draw, and the pages' one front door (``from residlab.course
                        import ...``)
- ``residlab.build``    site checks and render, ``residlab sync``, pins, runner generation, the freeze guard

``residlab.cli`` is the ``residlab`` command above them all (``residlab.__main__``: ``python -m residlab``). Importing the package imports nothing heavy:
``import residlab`` never loads torch.
"""

__version__ = "0.1.0"
