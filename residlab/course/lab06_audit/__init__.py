"""Lab 06 "Audit a Decoder": the Residual Contribution Audit run as a tool, its packet verified.

- ``decoder_audit``: the lab's audit of every write at the last position, its verification and two tampered
  packets that verification refuses; everything is ``residlab.audit``, this room fixes the lab's inputs.
"""
