"""Lab 05 Part 4: the observation of a GPT-NeoX capture (Pythia-14M, or the synthetic specimen labelled as such).

- ``capture_page``: which capture the page shows (fresh from verified files, or the committed one), its tables,
  figures, provenance and the sentences chosen from its numbers.
- ``explorer_data``: what the capture explorer shows for every token position.
- ``open_run``: the HTML blocks with which a reader opens their own capture (Lab 05) or packet (Lab 06) in the
  browser, checked there and never uploaded.
"""
