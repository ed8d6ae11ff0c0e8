"""Lesson 2.1 "The Residual Stream": the trained copy model, its audit and the gradient profile (Figure 5).

- ``copy_model``: the one-block pre-LN copy model, its hook points, its seeded training and weight identity.
- ``lesson_lab``: the lesson's lab: readouts, interventions and the Residual Contribution Audit of the trained
  model; the report of ``residlab lesson`` and of the runner ``assets/labs/residual_stream_lab.py``.
- ``copy_audit``: ``residlab audit --copy-model``, the audit tool pointed at this model.
- ``gradient_profile``: matched pre-LN and post-LN stacks at initialisation, median gradient norm per depth
  (Lab 04 shows it too).
- ``lesson_figures``: the page's figures and the sentences derived from the profile (package only).
"""
