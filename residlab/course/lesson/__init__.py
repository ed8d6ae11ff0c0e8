"""Lesson 2.1 "The Residual Stream": what only the lesson draws (the copy model, its lab and the gradient
profile it shows are in ``models/``: the glossary and Lab 04 read them too).

- ``block_picture``: one picture of the block, a sequential pre-LN block and GPT-NeoX's parallel one, every hook
  site marked with the names the code uses (inline SVG; the lesson and the residual-stream glossary entry).
- ``lesson_figures``: the page's figures and the sentences chosen from numbers (the profile's three stacks, the
  training counts, the retained share, attribution against removal) (package only).
"""
