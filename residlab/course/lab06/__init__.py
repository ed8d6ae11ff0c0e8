"""Lab 06 "Audit a Decoder": the Residual Contribution Audit run as a tool, its packet verified.

- ``decoder_audit``: the lab's audit of every write at the last position, its verification and two tampered
  packets that verification refuses; everything is ``residlab.audit``, this room fixes the lab's inputs.
- ``induction_audit``: Part 2, the audit of the induction model loaded back from its directory by
  ``residlab.audit``, and what it says about the write the mechanism predicts.
- ``induction_cli``: ``residlab induction`` and the runner ``assets/labs/induction_model.py``: train, describe,
  audit on Part 2's input, verify.
- ``pythia_audit``: Part 3, the same audit on the build's verified files (Pythia-14M's, when they are there) with a
  repeated-token prompt pair, and the sentence that says whether the model separates the two prompts.
- ``copy_audit``: the ``residlab audit`` command's worked example, ``residlab audit --copy-model``: the audit tool
  pointed at Lesson 2.1's copy model.
- ``scale_audit``: the section for bigger models: the lab's audit dispatched with blocks on disk, and in
  bfloat16, each compared with the float32 packet.
"""
