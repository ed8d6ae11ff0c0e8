"""What several page families share: the models the site trains or builds, and the specimen capture the pages show.
No page-family room imports another; what two of them need lives here (or in ``ui/``).

- ``copy_model``: Lesson 2.1's one-block pre-LN copy model, its hook points (TransformerLens's names:
  ``hook_resid_pre``, ``hook_attn_out``, ``hook_resid_mid``, ``hook_mlp_out``, ``hook_resid_post``), its seeded
  training, how often given sequences occur in the training batches (``training_sequence_counts``) and its weight
  identity.
- ``lesson_lab``: the copy model's lab: readouts, interventions and the Residual Contribution Audit of the trained
  model, with its direct logit attribution (``residlab.audit.attribution``); the report of ``residlab lesson`` and
  of the runner ``assets/labs/residual_stream_lab.py`` (the lesson, the glossary's entries and ``residlab audit
  --copy-model`` read it).
- ``gradient_profile``: matched pre-LN and post-LN stacks at initialisation and the control (the pre-LN stack with
  a final LayerNorm), median gradient norm per depth (the lesson and Lab 04).
- ``induction/``: the two-block induction model the site trains itself, what it learned, measured (its own manual).
- ``capture_page``: a GPT-NeoX capture read and checked as one run, its tables, figures and provenance (Lab 05
  Part 4, Lab 06 Part 3).
- ``capture_source``: which capture a page shows (fresh from verified files, the committed capture of the lock's
  files, or the synthetic specimen's), and the words that say which, of which repository, revision and lock; the
  lock's pins and how each was obtained.
- ``threads``: one CPU thread for the torch experiments (their numbers do not depend on the machine's cores).
- ``needs_torch``: a runner's one-line stop when torch is missing (bundled first by the runners that need torch).
"""
