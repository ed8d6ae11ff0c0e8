"""Lab 05 "Trace a Residual Stream": the toy trace (Parts 1-3) and the observation of a GPT-NeoX capture (Part 4).

- ``toy``: the two update rules, the trace of a column vector through both branches, the readouts and the
  report the page, the toy runner (``assets/labs/trace_residual_toy.py``) and ``residlab toy`` print (standard
  library only).
- ``notation``: the one grammar of numbers and column vectors the runner, the toy explorer and the answer checker
  accept (the forms the page prints, ``[3;-2;0]`` included; the Unicode minus read as ASCII's).
- ``toy_skeleton``: Part 3's skeleton (the download ``my_toy.py``), the functions a learner writes, on plain lists.
- ``editor``: Part 3's editor: its words and element, and the facts of the Pyodide it runs (``SHIPPED``, the
  files the site serves of it; ``RUN_LIMIT_S``).
- ``code_check``: Part 3's checker (the download ``check_toy.py``, also run in the page under Pyodide): a learner's
  functions on held-out inputs against ``toy``, each "passes" or its mistake named.
- ``exact_vectors``: ``Vector``, exact rational entries with norms kept in exact form; the toy explorer and the
  answer checker (``assets/explorers/``) repeat this arithmetic in JavaScript.
- ``capture_reading``: the sentences that interpret a capture, each chosen from its numbers and read against its
  null (the analytic spread of a cosine in d dimensions; the random-weight run of the same shape).
- ``explorer_data``: what the capture explorer shows for every token position.
- ``run_in_page``: Part 4's "Run it in the page": the block that runs the page's model (an ONNX export) in the
  reader's browser, what it says the model is, and the bytes its button fetches (``RUNTIME_SHIPPED``).
- ``open_run``: the HTML blocks with which a reader opens their own capture (Lab 05) or packet (Lab 06) in the
  browser, checked there and never uploaded (the Lab 06 page takes them through the front door).

The capture itself (``capture_page``, ``capture_source``) is in ``models/``: Lab 06 Part 3 reads it too.
"""
