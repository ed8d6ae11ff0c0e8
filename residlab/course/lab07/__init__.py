"""Lab 07, patching methods against a known mechanism: activation patching (denoising and noising, every block x
position cell of every site kind, and per head), path patching and attribution patching, run on the induction model
the site trains (``models/induction``), whose mechanism is known: a previous-token head in block 0, an induction
head in block 1. Every method runs over held-out prompt pairs, and each share is read against a null of the same
trained model: pairs that change a token the mechanism does not use (``distribution``).

- ``designs``: the clean / corrupt pairs. ``copied_token`` keeps the repeat and changes only the token induction
  should copy; ``matched_position`` keeps every token and the repeat but moves the earlier occurrence, so what
  changes is where block 1's keys match. Each is checked on construction.
- ``patching``: the two runs of a design recorded once at every site (``Pair``, the capture floor's
  ``record_sites``), exact activation patching (``activation_grids``, both directions, one batched forward per
  direction), per-head patching (``head_grid``) and path patching of block 0's attention write into block
  1's queries, keys or values only, against the whole write (``path_patching``). One orientation for every share:
  positive when the clean site carries the behaviour.
- ``attribution``: attribution patching from one backward pass of the corrupt run (``attribution_grids``,
  ``head_attribution``) and, at every cell's exact patch, how far the last block's attention at the readout moved
  and how much the final LayerNorm's scale changed (``bend_measures``), and the estimate's error split exactly into
  the final LayerNorm's part and the upstream part (``error_split``).
- ``verdicts``: the words the page and the runner share: the head kinds and methods as both name them, each
  verdict's words, how a fraction is written, and when a kind's verdict is only the complement of another's.
- ``cells``: the cells fixed by construction (``identities``, checked on every pair) and which cells of a design's
  grids are one tensor or one intervention under two names, or a hybrid prompt's run: marked before any value is read.
- ``predictions``: where the mechanism predicts a head's share near 0, the prediction tested against the null pairs
  (one-sided Fisher exact test of how often the share passes the null bar, counted in size), said in words.
- ``distribution``: the held-out pairs, their null pairs (a change of each design's own kind), every method's mean
  share, interval and verdict fractions over the pairs, the null bar with its resampled range, and each head's share
  against its own null pair's, pair by pair (``null_paired``).
- ``naming``: the heads named by a rule that can fail (a score above its own control), on a draw of their own.
- ``lab``: ``run_lab(model)``, the whole report (plain data: the worked example, the distribution over pairs, the
  untrained models' gaps as a labelled baseline), ``summary_lines`` and ``main``, the runner
  ``assets/labs/patching_methods.py``.
- ``sentences``: what the page says, each sentence chosen from the report's numbers and read against the null;
  ``error_sentences``: Part 5's, about attribution patching's error and its exact split.
- ``compare_sentences``: the two directions cell by cell over the pairs and pair by pair, the worked example beside
  the pairs, and the copied-token corruption beside Lab 06's and the glossary's.
- ``goal_sentences``: the Goal's results in plain words, its list of which verdicts are tests, with their scope, and
  the verdicts at a glance.
- ``head_sentences``: Part 6's sentences about heads over the pairs (verdicts, score ties, current-token heads);
  ``chance``: the chance models they read counts against (Wilson intervals, independent orders, rank correlation,
  the permutation over namings, the null bar's resampled range) and the null's reach at the end of the prompt;
  ``position_sentences``: attention read position by position, where the matched-position design acts;
  ``size_sentences``: a named head's size against its own null pair's share, pair by pair.
- ``figures``: the SVG heatmaps drawn at build time and the explorer's data island
  (``assets/explorers/patching-explorer.js``).
- ``page``: the report of this render's induction model, once per render, and the invariants the page asserts.
"""
