"""Lab 05 Part 4: the observation of a GPT-NeoX capture (Pythia-14M, or the synthetic specimen labelled as such).

- ``capture_page``: a capture read and checked as one run, its tables, figures and provenance.
- ``capture_source``: which capture a page shows (fresh from verified files, the committed capture of the lock's
  files, or the synthetic specimen's), and the words that say which, of which repository, revision and lock; the
  lock's pins and how each was obtained.
- ``capture_reading``: the sentences that interpret a capture, each chosen from its numbers and read against its
  null (the analytic spread of a cosine in d dimensions; the random-weight run of the same shape).
- ``explorer_data``: what the capture explorer shows for every token position.
- ``open_run``: the HTML blocks with which a reader opens their own capture (Lab 05) or packet (Lab 06) in the
  browser, checked there and never uploaded.
"""
