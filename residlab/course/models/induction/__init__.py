"""The induction model: a two-block ``GPTNeoXForCausalLM`` the site trains itself on repeated random tokens, and
what it learned, measured (the glossary's attention, logit-lens and activation-patching entries; Lab 06 Part 2).

- ``recipe``: the configuration, the data (P distinct random tokens, then the same P again, with the period P
  drawn afresh for every batch, so no fixed offset predicts the repeat), the training (deterministic from a seed
  on one CPU thread, ending at a measured criterion: ten fresh batches in a row at least 0.98 top-1 on the repeat)
  and the model directory (config.json and model.safetensors, as Transformers saves them).
- ``measures``: on held-out sequences, loss and accuracy on each half; per head, the previous-token and induction
  scores and the heads found by the rule (the highest score of each kind over every head); the logit-lens
  trajectory; the activation-patching heatmap (block x position, clean vs a corrupted first half).
- ``induction_lab``: ``train_and_measure`` (the model and its report, plain data), ``InductionResults`` (what the
  pages read of one training) and the manifest.
- ``figures``: the two heads' patterns, the lens trajectory and the patching heatmap, drawn from a report.
- ``sentences``: the sentences chosen from a report's numbers.

Its audit (Lab 06 Part 2) is ``residlab.course.lab06.induction_audit``; the command ``residlab induction`` and the
runner ``assets/labs/induction_model.py`` (train, describe, audit, verify) are ``residlab.course.lab06.induction_cli``.

Pages reach it through the front door: ``induction_training()`` (the report and the audit, trained once per render,
``residlab.course.shared``) and the modules under ``induction_*`` names.
"""
