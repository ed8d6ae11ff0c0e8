"""residlab: computes everything the residual-stream course site shows.

Layers, by module:

- ``residlab.course.toy``        the Lab 05 hand trace (standard library only)
- ``residlab.course.lesson_lab`` the Lesson 2.1 copy-model audit and pre-LN/post-LN gradient profile (torch)
- ``residlab.pythia``     the pinned Pythia-14M specimen: lock, download, capture, observations
- ``residlab.build.pins``       one source of truth for pinned versions, fanned out to pages and runners
- ``residlab.build.runners``    builds the downloadable scripts in ``assets/labs/`` from these modules

Importing the package imports nothing heavy: ``import residlab`` never loads torch.
"""

__version__ = "0.1.0"
