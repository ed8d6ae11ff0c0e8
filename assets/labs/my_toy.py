# my_toy.py: Lab 05 Part 3's skeleton, written by `residlab sync` from residlab/course/lab05/toy_skeleton.py.
"""Lab 05 Part 3: the toy residual stream, written by you, in plain Python.

A vector is a list of three numbers, a 3 x 1 column written as a list: x = [1, 2, -1]. A number may be an int,
a float, a fractions.Fraction or a decimal.Decimal: the checker compares each with the exact answer within 1e-9
(relative), so floats pass. Fill in every function below (each now raises NotImplementedError), keeping its name
and arguments: the checker calls them by these names. Every function returns a new list and leaves the lists it
is given unchanged.

Run this file to see what it prints:    python3 my_toy.py
Check it on inputs the page never shows: python3 check_toy.py my_toy.py
"""

import math


def add(a, b):
    """a + b, entry by entry, as a new list. Raise ValueError if the lengths differ (never truncate the
    longer one) or if an entry is not a finite number."""
    raise NotImplementedError


def first_update(x):
    """The first branch's update F(x) = [-x1, 2, 0]."""
    raise NotImplementedError


def second_update(y):
    """The second branch's update G(y) = [y2, -y2, 2*y1]."""
    raise NotImplementedError


def first_block(x):
    """The intermediate stream y = x + F(x): the new state, not the update."""
    raise NotImplementedError


def second_block(y):
    """The final stream z = y + G(y): the new state, not the update."""
    raise NotImplementedError


def norm(v):
    """The Euclidean norm of v, a float."""
    raise NotImplementedError


def readout(z):
    """The scalar s = [0, 0, 1] z."""
    raise NotImplementedError


def trace(x):
    """The five labelled vectors of one pass, as a dict with the keys "input", "first_update",
    "intermediate", "second_update" and "final"."""
    raise NotImplementedError


def total_change_norm(x):
    """The norm of the total change z - x for input x."""
    raise NotImplementedError


def suppress_first(x):
    """The final stream when F writes zeros and G reads the stream it then receives."""
    raise NotImplementedError


def suppress_second(x):
    """The final stream when F writes as usual and only G's write is replaced by zeros."""
    raise NotImplementedError


def parallel(x):
    """The final stream of the parallel arrangement, x + F(x) + G(x): both branches read the original x."""
    raise NotImplementedError


if __name__ == "__main__":
    x = [1, 2, -1]
    print("x =", x)
    print("trace:", trace(x))
    print("readout s =", readout(trace(x)["final"]))
