"""A correct solution of Lab 05 Part 3 (the functions of residlab/course/lab05/toy_skeleton.py), and the same
solution with each mistake the checker names planted in it: tests/unit/course/test_code_check.py runs them through
the checker in Python, tests/site/test_python_in_page.py through the page's editor.

A plant is (what the checker must say, the line of the solution it replaces, the line that replaces it).
"""

from __future__ import annotations

CORRECT = '''import math


def add(a, b):
    if len(a) != len(b):
        raise ValueError(f"cannot add vectors of lengths {len(a)} and {len(b)}")
    for value in list(a) + list(b):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a finite number")
    return [p + q for p, q in zip(a, b)]


def first_update(x):
    return [-x[0], 2, 0]


def second_update(y):
    return [y[1], -y[1], 2 * y[0]]


def first_block(x):
    return add(x, first_update(x))


def second_block(y):
    return add(y, second_update(y))


def norm(v):
    return math.sqrt(sum(value * value for value in v))


def readout(z):
    return z[2]


def trace(x):
    y = first_block(x)
    z = second_block(y)
    return {"input": list(x), "first_update": first_update(x), "intermediate": y,
            "second_update": second_update(y), "final": z}


def total_change_norm(x):
    z = trace(x)["final"]
    return norm([b - a for a, b in zip(x, z)])


def suppress_first(x):
    y = add(x, [0, 0, 0])
    return second_block(y)


def suppress_second(x):
    y = first_block(x)
    return add(y, [0, 0, 0])


def parallel(x):
    return add(add(x, first_update(x)), second_update(x))


if __name__ == "__main__":
    print("z =", trace([1, 2, -1])["final"])
'''

PLANTS = {
    "truncated": (
        "add", "a length mismatch truncated instead of refused",
        '        raise ValueError(f"cannot add vectors of lengths {len(a)} and {len(b)}")',
        "        pass",
    ),
    "mutated": (
        "suppress_first", "the baseline mutated",
        "    y = add(x, [0, 0, 0])\n    return second_block(y)",
        "    update = second_update(x)\n    for i in range(3):\n        x[i] += update[i]\n    return x",
    ),
    "subtracted": (
        "suppress_first", "the first branch suppressed by subtracting its old update",
        "    y = add(x, [0, 0, 0])\n    return second_block(y)",
        "    old = trace(x)\n    return [z - f for z, f in zip(old['final'], old['first_update'])]",
    ),
    "reads_intermediate": (
        "parallel", "the parallel arrangement reading the intermediate state",
        "    return add(add(x, first_update(x)), second_update(x))",
        "    y = add(x, first_update(x))\n    return add(y, second_update(y))",
    ),
    "wrong_norm": (
        "total_change_norm", "a norm of the wrong vector",
        "    return norm([b - a for a, b in zip(x, z)])",
        "    return norm(z)",
    ),
    "update_not_state": (
        "first_block", "an update returned instead of the new state",
        "    return add(x, first_update(x))",
        "    return first_update(x)",
    ),
}


def planted(name: str) -> str:
    """The correct solution with one mistake planted."""
    _, _, old, new = PLANTS[name]
    assert CORRECT.count(old) == 1, old
    return CORRECT.replace(old, new)


INFINITE_LOOP = "while True:\n    pass\n"
