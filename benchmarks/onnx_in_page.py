"""Lab 05 Part 4's "Run it in the page": what the button fetches, how long the reader waits from the press to the
first result (cold: a fresh browser with an empty cache; warm: the model already loaded), and a prompt's time in
the page beside the same forward in torch (the exported module, one thread), side by side in one run.

    make page PAGE=labs/05-trace-residual-stream.qmd && python benchmarks/onnx_in_page.py [_site] [--rounds 3]
        [--against OTHER_SITE]

Each round opens Lab 05 in a fresh headless Chromium with every host but 127.0.0.1 unreachable, served as GitHub
Pages serves it (residlab.build.lighthouse: gzip for text, the rest as it is), scrolls to the block, presses the
button and waits for the status line that reports the run; the bytes are the ones the server sent after the press.
Then the same prompt is run again (warm) ``--warm`` times. The torch side runs the module the graph was traced from
(``onnx_export.exportable``) on the same ids, in this process, on one thread. First, the page's bytes at load (not
scrolled), and with ``--against`` another build's, side by side: nothing of the model may be fetched before the
button. Loopback has no network latency: on a phone's connection the download adds its size divided by the bandwidth.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from python_in_page import LAB, browser, bytes_at_load, serve  # noqa: E402 - the same server and browser

PROMPT = "The small red boat crossed the lake and reached the far shore before the storm."
LIMIT_S = 300


def press_and_wait(driver, button: str) -> float:
    """Seconds from the press to the status line that reports a run."""
    driver.execute_script("document.getElementById('onnx-status').textContent = ''; window.__pressed = performance.now();"
                          "document.getElementById(arguments[0]).click()", button)  # fmt: skip
    deadline = time.monotonic() + LIMIT_S
    while time.monotonic() < deadline:
        text = driver.execute_script("return document.getElementById('onnx-status').textContent")
        if " tokens, run in " in text:
            return driver.execute_script("return performance.now() - window.__pressed") / 1000
        if text.startswith("Not run"):
            raise SystemExit(f"onnx_in_page: {text}")
        time.sleep(0.02)
    raise SystemExit(f"onnx_in_page: no result within {LIMIT_S} s")


def one_round(site: Path, warm_runs: int) -> dict:
    sent: list = []
    server = serve(site, sent)
    driver = browser()
    try:
        driver.get(f"http://127.0.0.1:{server.server_address[1]}/{LAB}")
        driver.execute_script("document.getElementById('onnx-explorer').scrollIntoView()")
        deadline = time.monotonic() + 30
        while not driver.execute_script("return !!document.getElementById('onnx-run')"):
            if time.monotonic() > deadline:
                raise SystemExit("onnx_in_page: the block never came when it neared the screen")
            time.sleep(0.1)
        driver.execute_script("document.getElementById('onnx-prompt').value = arguments[0]", PROMPT)
        before = len(sent)
        cold = press_and_wait(driver, "onnx-run")
        downloaded = sum(size for _, size in sent[before:])
        warm = [press_and_wait(driver, "onnx-run") for _ in range(warm_runs)]
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
    return {"cold_s": cold, "warm_s": statistics.median(warm), "bytes": downloaded}


def torch_forward_seconds(runs: int) -> tuple[float, int]:
    """The median time of the exported module's forward in torch on one thread, and the prompt's length."""
    import torch
    from tokenizers import Tokenizer

    from residlab.pythia import onnx_export

    source = onnx_export.page_model_source()
    model = source.build()
    module = onnx_export.exportable(model)
    ids = torch.tensor([Tokenizer.from_str(source.tokenizer_json.decode("utf-8")).encode(PROMPT, add_special_tokens=False).ids])
    depth, width = model.config.num_hidden_layers, model.config.hidden_size
    zeros = torch.zeros((depth, 1, ids.shape[1], width))
    torch.set_num_threads(1)
    times = []
    with torch.inference_mode():
        for index in range(runs + 3):  # three untimed: first calls allocate and pick kernels
            started = time.perf_counter()
            module(ids, zeros, zeros.clone())
            if index >= 3:
                times.append(time.perf_counter() - started)
    return statistics.median(times), ids.shape[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", type=Path, default=ROOT / "_site", help="the built site (default: _site)")
    parser.add_argument("--rounds", type=int, default=3, help="fresh browsers, one after another (default 3)")
    parser.add_argument("--warm", type=int, default=10, help="warm runs per round (default 10)")
    parser.add_argument("--against", type=Path, help="another build of Lab 05: its bytes at load beside this one's")
    args = parser.parse_args(argv)
    if not (args.site / LAB).is_file() or not (args.site / "assets/onnx-model/model.onnx").is_file():
        parser.error(f"{args.site} holds no Lab 05 with its model: run `make page PAGE=labs/05-trace-residual-stream.qmd`")
    if args.rounds < 1 or args.warm < 1:
        parser.error("--rounds and --warm must be at least 1")
    loads = {site: statistics.median(bytes_at_load(site) for _ in range(args.rounds))
             for site in filter(None, (args.site, args.against))}
    print(f"Lab 05 at load: {loads[args.site]:,.0f} bytes ({args.site})")
    if args.against:
        print(f"Lab 05 at load: {loads[args.against]:,.0f} bytes ({args.against}); ratio "
              f"{loads[args.site] / loads[args.against]:.4f}")
    rounds = [one_round(args.site, args.warm) for _ in range(args.rounds)]
    median = {key: statistics.median(r[key] for r in rounds) for key in ("cold_s", "warm_s", "bytes")}
    torch_s, length = torch_forward_seconds(args.warm * 3)
    print(f"rounds: {args.rounds}, each a fresh headless Chromium (empty cache); prompt of {length} tokens; medians")
    print(f"fetched by the button: {median['bytes']:,.0f} bytes (gzip for text, as GitHub Pages serves it)")
    each = ", ".join(f"{r['cold_s']:.2f}" for r in rounds)
    print(f"press to first result, cold: {median['cold_s']:.2f} s  (rounds: {each})")
    print(f"press to result, warm (tokenize, forward, lens tokens decoded, tables drawn): {median['warm_s'] * 1000:.1f} ms")
    print(f"the same forward in torch, one thread: {torch_s * 1000:.1f} ms; ratio page warm / torch: "
          f"{median['warm_s'] / torch_s:.1f}x; cold / warm: {median['cold_s'] / median['warm_s']:.0f}x")
    print("load average (1, 5, 15 min): " + ", ".join(f"{load:.1f}" for load in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
