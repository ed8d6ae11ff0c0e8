"""The pinned Pythia-14M specimen: its lock, the verified download, the capture and its observations.

- ``lock``      the one lock file (repository, revision, six files with sizes and hashes, library versions)
- ``artifacts`` the download plan, the pinned fetch through huggingface_hub, offline verification
- ``pin``       the instructors' command that re-reads a revision from the Hub API and rewrites the lock
- ``specimen``  an architecture-identical GPT-NeoX with seeded random weights, for tests and the cached capture
- ``runner``    the argparse entry point of ``assets/labs/inspect_residual_stream.py``
- ``cli``       ``residlab pythia plan|fetch|verify|pin|observe``

Importing this package imports nothing heavy: torch and transformers load only inside the functions that
need them.
"""
