"""The audit's arithmetic exists once, in residlab/audit/measures.py: no other module of the package writes the
metric (a logit of the target less one of the rival, or the direction u_target - u_rival) or a patch recovery (a
difference over a difference from the same baseline). The scan is shown to find both shapes in measures.py itself
and in the lesson's former copy, so an empty result means something."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from residlab.audit import measures

PACKAGE = Path(measures.__file__).resolve().parents[1]
MEASURES = Path(measures.__file__).resolve()

# Lesson 2.1's audit before it called measures.py: the second copy this test exists to refuse.
FORMER_LESSON_COPY = '''
def _logit_difference(logits, target, rival):
    return (logits[0, target] - logits[0, rival]).item()

def _component_audit(model, target, rival, runs, patched):
    direction = model.unembed.weight[target] - model.unembed.weight[rival]
    ld_clean = _logit_difference(runs["clean"].logits, target, rival)
    ld_corrupt = _logit_difference(runs["corrupt"].logits, target, rival)
    ld_patched = _logit_difference(runs[patched].logits, target, rival)
    return (ld_patched - ld_corrupt) / (ld_clean - ld_corrupt)
'''
GAP_NAMED_FIRST = '''
def recovery(clean, corrupt, patched):
    gap = clean - corrupt
    return (patched - corrupt) / gap
'''


def _mentions(node: ast.AST, word: str) -> bool:
    return any(word in (getattr(n, "id", None) or getattr(n, "attr", None) or "") for n in ast.walk(node))


def _target_less_rival(node: ast.BinOp) -> bool:
    """``X[... target ...] - X[... rival ...]`` with the same X: the metric, or the direction it is read along."""
    left, right = node.left, node.right
    return (isinstance(left, ast.Subscript) and isinstance(right, ast.Subscript)
            and ast.dump(left.value) == ast.dump(right.value)
            and _mentions(left.slice, "target") and _mentions(right.slice, "rival"))  # fmt: skip


def _ratio_of_differences(node: ast.BinOp, assigned: dict[str, ast.AST]) -> bool:
    """``(a - c) / (b - c)``, the denominator possibly a local name bound to ``b - c`` first."""
    numerator = node.left
    denominator = assigned.get(node.right.id, node.right) if isinstance(node.right, ast.Name) else node.right
    if not all(isinstance(side, ast.BinOp) and isinstance(side.op, ast.Sub) for side in (numerator, denominator)):
        return False
    return ast.dump(numerator.right) == ast.dump(denominator.right)


def audit_arithmetic(source: str) -> list[str]:
    """Where ``source`` computes the audit's metric, its direction or a patch recovery: 'line N: what'."""
    found = []
    tree = ast.parse(source)
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))] + [tree]
    for scope in scopes:
        assigned = {target.id: n.value for n in ast.walk(scope) if isinstance(n, ast.Assign)
                    for target in n.targets if isinstance(target, ast.Name)}  # fmt: skip
        for node in ast.walk(scope):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and _target_less_rival(node):
                found.append(f"line {node.lineno}: target less rival")
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _ratio_of_differences(node, assigned):
                found.append(f"line {node.lineno}: a recovery ratio")
    return sorted(set(found))


def test_the_scan_finds_the_arithmetic_where_it_is_written():
    assert any("target less rival" in hit for hit in audit_arithmetic(MEASURES.read_text(encoding="utf-8")))
    assert any("recovery ratio" in hit for hit in audit_arithmetic(MEASURES.read_text(encoding="utf-8")))
    former = audit_arithmetic(FORMER_LESSON_COPY)
    assert sum("target less rival" in hit for hit in former) == 2 and any("recovery ratio" in hit for hit in former)
    assert audit_arithmetic(GAP_NAMED_FIRST) == ["line 4: a recovery ratio"]


def test_no_module_but_measures_computes_the_audit_arithmetic():
    copies = {
        path.relative_to(PACKAGE.parent).as_posix(): hits
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.resolve() != MEASURES and (hits := audit_arithmetic(path.read_text(encoding="utf-8")))
    }
    assert copies == {}, f"a second copy of the audit's arithmetic (call residlab.audit.measures instead): {copies}"


@pytest.mark.parametrize(("clean", "corrupt", "patched", "expected"), [(3.0, 1.0, 2.0, 0.5), (2.0, 2.0, 5.0, None)])
def test_the_recovery_is_undefined_at_a_zero_gap_and_a_ratio_elsewhere(clean, corrupt, patched, expected):
    assert measures.patch_recovery(clean, corrupt, patched) == expected


@pytest.mark.parametrize(("value", "digits", "printed"), [(-0.0004, 3, "0.000"), (-0.0, 3, "0.000"), (-0.0005001, 3, "-0.001"),
                                                          (-0.004, 2, "0.00"), (0.0004, 3, "0.000"), (-1.25, 2, "-1.25")])
def test_a_value_that_rounds_to_zero_prints_without_a_sign(value, digits, printed):
    # "-0.000" reads as a sign the number does not have (the packet's table, Lab 07's sentences and cells).
    assert f"{measures.shown(value, digits):.{digits}f}" == printed
