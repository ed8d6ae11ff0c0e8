"""Loading has one home: ``residlab/audit/loading.py``. Nowhere else in the audit or the course rooms is a model
loaded, built from a config, dispatched by accelerate, finished (``_finish_model``) or given a torch dtype by the
loaders' rule (``torch_dtype``, or a ``torch_dtype=`` / ``device_map=`` argument); everything else asks
``loading`` once for a placed, loaded ``Subject`` (a ``Placement(device_map=...)`` is such a question). ``subject.py`` says what a subject is and imports neither
transformers nor the loader.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HOME = "residlab/audit/loading.py"
SCANNED = ("residlab/audit", "residlab/course")
# Calls (a name, or an attribute of anything) that load, build, dispatch or finish a model, or decide its dtype.
LOADING_CALLS = {
    "from_pretrained", "from_config", "dispatch_model", "load_checkpoint_and_dispatch", "init_empty_weights",
    "infer_auto_device_map", "torch_dtype", "_finish_model",
}  # fmt: skip
LOADING_KEYWORDS = {"torch_dtype", "device_map"}
# (file, function) -> why it may load: not an audit Subject, and its own runner bundles no audit loader.
ALLOWED = {
    ("residlab/course/models/induction/recipe.py", "load_induction_model"):
        "the induction recipe reloads the checkpoint it trained and saved (float32, CPU) for the course's pages and "
        "Lab 07's runner, which bundles no audit module; the audit of that model goes through loading",
}  # fmt: skip


def loading_calls(source: str) -> list[tuple[str, int, str]]:
    """(enclosing function, line, what) for every loading call or loading keyword argument in ``source``."""
    found = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if called in LOADING_CALLS:
                found.append((function, node.lineno, f"{called}()"))
            for keyword in node.keywords:  # a Placement names a device map for loading to honour: asking, not doing
                if keyword.arg in LOADING_KEYWORDS and called != "Placement":
                    found.append((function, node.lineno, f"{keyword.arg}="))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), "<module>")
    return found


def scanned_files() -> list[Path]:
    return sorted(path for folder in SCANNED for path in (ROOT / folder).rglob("*.py"))


def test_models_are_loaded_in_loading_alone():
    elsewhere = [
        f"{relative}:{line} ({function}): {what}"
        for path in scanned_files()
        if (relative := path.relative_to(ROOT).as_posix()) != HOME
        for function, line, what in loading_calls(path.read_text(encoding="utf-8"))
        if (relative, function) not in ALLOWED
    ]
    assert elsewhere == [], f"load, place and dispatch models in {HOME} only; ask it for a Subject"


def test_the_rule_finds_what_it_forbids():
    # The rule must be able to fail: each way of loading outside the home is named.
    source = '''
def load(directory, transformers, accelerate, torch):
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, torch_dtype=torch.bfloat16)
    model = accelerate.dispatch_model(model, device_map={"": "cpu"})
    placement = Placement(device_map="auto")  # asking loading for a device map is fine
    return _finish_model(model, None, "float32", "cpu").to(torch_dtype("float16"))
'''
    assert {what for _, _, what in loading_calls(source)} == {
        "from_pretrained()", "torch_dtype=", "dispatch_model()", "device_map=", "_finish_model()", "torch_dtype()",
    }  # fmt: skip
    assert all(function == "load" for function, _, _ in loading_calls(source))
    # ...and the home does what the others may not, so the scan reads the right files.
    home = {what for _, _, what in loading_calls((ROOT / HOME).read_text(encoding="utf-8"))}
    assert {"from_pretrained()", "dispatch_model()", "init_empty_weights()", "torch_dtype()", "_finish_model()"} <= home
    assert ROOT / HOME in scanned_files()


def test_every_allowed_exception_is_still_there():
    present = {(path.relative_to(ROOT).as_posix(), function) for path in scanned_files()
               for function, _, _ in loading_calls(path.read_text(encoding="utf-8"))}  # fmt: skip
    assert set(ALLOWED) <= present, "an exception no longer needed: remove it from ALLOWED"


def test_subject_says_what_a_subject_is_and_loads_nothing():
    tree = ast.parse((ROOT / "residlab/audit/subject.py").read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not imported & {"transformers", "accelerate", "residlab.audit.loading"}
    defined = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert not defined & {"build_specimen", "load_model_directory", "model_config", "torch_dtype", "_finish_model"}
