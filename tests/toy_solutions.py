"""A correct solution of Lab 05 Part 3 (the functions of residlab/course/lab05/toy_skeleton.py), and the same
solution with each mistake the checker names planted in it: tests/unit/course/test_code_check.py runs them through
the checker in Python, tests/site/test_python_in_page.py through the page's editor.

A plant is (the function it is planted in, what the checker must say there, the line of the solution it replaces,
the line that replaces it).
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
    "not_applied": (
        "suppress_first", "a suppression never applied",
        "    y = add(x, [0, 0, 0])\n    return second_block(y)",
        "    y = first_block(x)\n    return second_block(y)",
    ),
    "difference_of_norms": (
        "total_change_norm", "a difference of norms where the norm of the difference is asked",
        "    return norm([b - a for a, b in zip(x, z)])",
        "    return norm(z) - norm(x)",
    ),
    "index_off": (
        "readout", "an index read one place off",
        "    return z[2]",
        "    return z[1]",
    ),
}

# The same mistakes written another way, which the checker must still name from the values alone (the plants above
# are what the page's tests run; these show the checker does not recognise their code).
VARIANTS = {
    "not_applied_scaled": (
        "suppress_first", "a suppression never applied",
        "    y = add(x, [0, 0, 0])\n    return second_block(y)",
        "    y = add(x, [1 * value for value in first_update(x)])\n    return second_block(y)",
    ),
    "not_applied_second": (
        "suppress_second", "a suppression never applied",
        "    y = first_block(x)\n    return add(y, [0, 0, 0])",
        "    return trace(x)['final']",
    ),
    "difference_of_norms_reversed": (
        "total_change_norm", "a difference of norms where the norm of the difference is asked",
        "    return norm([b - a for a, b in zip(x, z)])",
        "    return math.hypot(*x) - math.hypot(*z)",
    ),
    "index_off_one_based": (
        "second_update", "an index read one place off",
        "    return [y[1], -y[1], 2 * y[0]]",
        "    return [y[2], -y[2], 2 * y[1]]",
    ),
    "index_off_single_read": (
        "second_update", "an index read one place off",
        "    return [y[1], -y[1], 2 * y[0]]",
        "    return [y[1], -y[1], 2 * y[1]]",
    ),
    "index_off_first_update": (
        "first_update", "an index read one place off",
        "    return [-x[0], 2, 0]",
        "    second = x[1]\n    return [-second, 2, 0]",
    ),
    "index_off_negative": (
        "readout", "an index read one place off",
        "    return z[2]",
        "    return z[-2]",
    ),
}


def planted(name: str) -> str:
    """The correct solution with one mistake planted (a plant's name or a variant's)."""
    _, _, old, new = PLANTS[name] if name in PLANTS else VARIANTS[name]
    assert CORRECT.count(old) == 1, old
    return CORRECT.replace(old, new)


INFINITE_LOOP = "while True:\n    pass\n"
