"""The pinned Pythia-14M specimen, a floor on the capture floor: its lock, the verified download, the offline
load, the capture and its observations.

Modules, bottom to top (each imports only those above it in this list and ``residlab.capture``):

- ``lock``      the one lock file (repository, revision, six files with sizes and hashes, library versions) and
                the one rule for reading a file (from ``residlab.capture.files``). ``load_lock``, ``parse_lock``,
                ``ALLOWED_FILES``, ``read_file_bytes``, ``LockError``, ``UnsafeFileError``.
- ``hub``       the bounded HTTP client of the fetch and the pin (``FetchLimits``, ``download_file``), the Hub API's
                metadata (``hub_metadata``), ``ArtifactError`` and ``HubUnreachable`` (no connection at all: the
                host or proxy tried, the proxy variables honoured, what to do).
- ``artifacts`` the download plan, the pinned fetch and the offline verification, returning the bytes it hashed.
                ``plan_text``, ``fetch_artifacts``, ``verify_artifacts``, ``VerifiedArtifacts``, ``FetchLimits``,
                ``OBSERVE_READS`` (the files the observation reads), ``ArtifactError``.
- ``cache``     which lock a build uses (``RESIDLAB_PYTHIA_LOCK``, else the pinned one), the folder its fetched
                files are kept in (``.residlab-pythia/<the lock's digest>``, ``make pythia``), those files verified
                offline (``verified_files``), and the name of a committed capture of them.
- ``load``      the model and tokenizer built from those verified bytes, offline. ``load_offline``,
                ``ObservationError`` (every failure of the observation itself).
- ``observe``   the capture of every residual boundary and branch write through ``capture.recording``, at the
                sites of the GPT-NeoX block table; the numerical checks, one position's observation, and the
                three result files (manifest.json, observations.json, captures.json) written all or nothing
                through ``capture.outdir``. ``capture_residuals``, ``ResidualCapture``, ``observe_position``,
                ``observe``, ``observe_to_directory``, ``FIXED_TEXT``, ``RESULT_FILES``, ``LIBRARIES`` (the
                libraries whose versions the manifest records).
- ``runner``    the argparse entry point of ``assets/labs/inspect_residual_stream.py`` (bundled with the
                modules above and capture's ``blocks``, ``sites``, ``recording`` and ``outdir``); a refused
                run is one line on stderr and exit status 1 (``REFUSALS``).
- ``refresh``   the committed capture of verified files, refreshed in one command (``residlab pythia capture``).
- ``pin``       the instructors' command that re-reads a revision from the Hub API and rewrites the lock
                (``GIT_FILE_MAX_BYTES``: the largest file the Hub serves outside LFS).
- ``specimen``  an architecture-identical GPT-NeoX with seeded random weights, for tests and the cached capture
                (``build_specimen_model``, ``write_specimen``, ``PINNED_CONFIG``, ``TOKENIZER_SOURCE``).
- ``cli``       ``residlab pythia plan|fetch|verify|pin|observe|capture`` (``fetch --cache``: the lock's cache folder).

Importing this package imports nothing heavy: torch and transformers load only inside the functions that
need them, so the runner's ``--plan`` works with the standard library alone.
"""
