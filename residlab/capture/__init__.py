"""The bottom floor: where residual quantities live in each supported block, and how they are recorded.

- ``blocks``:    the per-architecture block tables (GPT-NeoX parallel and sequential, GPT-2, Llama, the Lesson 2.1
                 copy model), the random-weight specimen configurations, the module renames between releases.
- ``sites``:     the one site-naming function (``site_name``) and the one resolver (``resolve_sites``), driven by
                 the tables.
- ``recording``: ``record_sites``, the one hook mechanism every capture uses: hooks registered on enter, exactly
                 those removed in ``finally``; optional edits (ablations, patches) at any site, input or output.
- ``patching``:  the one intervention primitive on it: the edits (``zeroed``, ``set_to``, ``taken_from`` another
                 run's recording) at any positions, one patched run (``run_patched``) and the grid of
                 (site, position) cells (``patch_grid``).
- ``vectors``:   ``cosine``, the one definition the observation and the audit's measures share.
- ``versions``:  the library versions a record states, and ``import_transformers_quietly``.
- ``outdir``:    the one output rule (a new name or an empty real directory, written atomically).
- ``files``:     the one read rule (``read_file_bytes``: no link, a regular file, bounded, unchanged while read).

Standard library only; torch is imported when a recording starts. Nothing here imports another floor.
"""
