"""Whether scripts parse, judged by Node's own parser in one process: each is compiled, never run, a module
(one with a top-level import or export, such as python-worker.js) as a module. Used by the unit tests of
residlab/build/page_weight.py and by the site test of what it serves."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

PARSE_EACH = """const vm = require("vm"); let input = "";
process.stdin.on("data", (chunk) => input += chunk).on("end", () => process.stdout.write(JSON.stringify(
  JSON.parse(input).map(([code, module]) => { try { module ? new vm.SourceTextModule(code) : new vm.Script(code); return true; }
                                             catch (error) { return false; } }))));"""


def node_parses(texts: list[str]) -> list[bool]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: these tests parse the site's scripts in it (Node 18 or newer)")
    scripts = [[text, bool(re.search(r"^(import|export)\b", text, re.M))] for text in texts]
    done = subprocess.run([node, "--experimental-vm-modules", "-e", PARSE_EACH], input=json.dumps(scripts),
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)
