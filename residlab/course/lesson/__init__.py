"""Lesson 2.1 "The Residual Stream": the trained copy model, its audit and the gradient profile (Figure 5).

- ``copy_model``: the one-block pre-LN copy model, its hook points (TransformerLens's names: ``hook_resid_pre``,
  ``hook_attn_out``, ``hook_resid_mid``, ``hook_mlp_out``, ``hook_resid_post``), its seeded training, how often
  given sequences occur in the training batches (``training_sequence_counts``) and its weight identity.
- ``lesson_lab``: the lesson's lab: readouts, interventions and the Residual Contribution Audit of the trained
  model, with its direct logit attribution (``residlab.audit.attribution``); the report of ``residlab lesson``
  and of the runner ``assets/labs/residual_stream_lab.py``; the audit as a packet, written and verified (the
  runner's ``packet DIR`` and ``verify DIR``).
- ``copy_audit``: ``residlab audit --copy-model``, the audit tool pointed at this model.
- ``gradient_profile``: matched pre-LN and post-LN stacks at initialisation and the control (the pre-LN stack
  with a final LayerNorm), median gradient norm per depth (Lab 04 shows it too).
- ``block_picture``: one picture of the block, a sequential pre-LN block and GPT-NeoX's parallel one, every hook
  site marked with the names the code uses (inline SVG; the lesson and the residual-stream glossary entry).
- ``lesson_figures``: the page's figures and the sentences chosen from numbers (the profile's three stacks, the
  training counts, the retained share, attribution against removal) (package only).
"""
