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
                sites of the GPT-NeoX block table; the numerical checks, every position's observation, and the
                three result files (manifest.json, observations.json, captures.json) written all or nothing
                through ``capture.outdir``. ``capture_residuals``, ``ResidualCapture``, ``observe_position``,
                ``observe``, ``observe_to_directory``, ``observations_schema_problem``,
                ``FIXED_TEXT``, ``RESULT_FILES``, ``OBSERVATIONS_SCHEMA`` (observations.json's layout: 3, the
                boundaries named ``resid_pre`` / ``resid_post``), ``OBSERVATIONS_LAYOUT`` (what a refusal says it is),
                ``LIBRARIES`` (the libraries whose versions the manifest records).
- ``runner``    the argparse entry point of ``assets/labs/inspect_residual_stream.py`` (bundled with the
                modules above and capture's ``blocks``, ``sites``, ``recording`` and ``outdir``); a refused
                run is one line on stderr and exit status 1 (``REFUSALS``).
- ``refresh``   the committed capture of verified files, refreshed in one command (``residlab pythia capture``).
- ``pin``       the instructors' command that re-reads a revision from the Hub API and rewrites the lock
                (``GIT_FILE_MAX_BYTES``: the largest file the Hub serves outside LFS).
- ``specimen``  an architecture-identical GPT-NeoX with seeded random weights, for tests and the cached capture
                (``build_specimen_model``, ``write_specimen``, ``PINNED_CONFIG``, ``TOKENIZER_SOURCE``).
- ``onnx_export`` the model a build describes (its verified files, else the specimen) exported to ONNX for the page:
                the logits, every block's input, both writes and the final state at the capture floor's sites, the
                logit lens' top tokens, one additive input per write; cached by the weights' digest with a manifest
                saying which model it is (``exported``, ``page_model_source``, ``specimen_source``).
- ``onnx_reference`` the numbers a browser's run of that export is checked against, from the recording (every
                site, sampled logits, the lens; clean and one write zeroed) and Python's tokenizer (a few hundred strings).
- ``cli``       ``residlab pythia plan|fetch|verify|pin|observe|capture`` (``fetch --cache``: the lock's cache folder).

How fetch and verify treat what they read: the download never reads more than a file's pinned size plus one byte,
whatever the server's headers say; the whole fetch has a deadline (30 minutes, ``--timeout SECONDS``), a connection
silent for 60 s counts as stalled, each file gets three attempts, and a resume the server ignores is refused.
Downloads go through the proxy that ``HTTPS_PROXY``/``HTTP_PROXY`` name, unless ``NO_PROXY`` exempts the host, as
with huggingface_hub. Every file read from an artifact directory (and the lock) is opened without following links,
must be a regular file within its size, and must not change while read; the model and tokenizer are built from those
very bytes, so a file swapped after verification is refused, never used. Trust comes from the lock, or at fetch time
from the Hub's metadata: a file whose lock entry has no sha256 (``generation_config.json`` in the pinned lock) is
checked offline for its size only and is never read by the observation. The page showing a capture refuses, naming
the file, a ``manifest.json``, ``observations.json`` and ``captures.json`` that are not one run. A reader can open
their own run in Lab 05 (and their own packet in Lab 06) the same way: the browser reads the files (nothing is
uploaded), refuses one over the page's stated size before reading it, checks the SHA-256 digests with Web Crypto
(where there is none, the run is not shown, never called verified) and shows a verified run in the page's explorer,
labelled as the reader's (``residlab/course/lab05/open_run.py``, ``assets/explorers/open-*.js``). A
packet's links are checked; its values are re-run only by ``verify``.

Importing this package imports nothing heavy: torch and transformers load only inside the functions that
need them, so the runner's ``--plan`` works with the standard library alone.
"""
