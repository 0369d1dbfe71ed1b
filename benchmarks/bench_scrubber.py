"""Frame time of the scrubber's head grid against a plotly heatmap grid, in one Chromium run.

Both pages show the same grid: 2 layers x 4 heads of 19 x 19 causal attention patterns (the
embedded quick suite's shape). The scrubber page (interp.report.scrubber) draws each head on its own
canvas; the reference is one plotly figure of 8 heatmap subplots updated by ``Plotly.restyle``
(what plotly frames and sliders would do per frame). A frame is timed in the page with
``performance.now()`` from the update until the next animation frame. Needs headless Chromium
(Debian's ``chromium``) and playwright. Usage::

    .venv/bin/python benchmarks/bench_scrubber.py [--frames 20] [--steps 32]

Last line: ``plotly_over_scrubber_median: <ratio>``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def scrubber_page(folder: Path, steps: int) -> Path:
    from interp.report.scrubber import Scrubber, ScrubData, quantise_patterns

    n = 19
    logits = torch.randn(2, steps, 2, 4, n, n, generator=torch.Generator().manual_seed(0)) * 2
    logits = logits.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    curve = pd.DataFrame(
        {"step": range(steps), "accuracy": np.linspace(0, 1, steps), "p_answer": np.linspace(0, 1, steps)}
    )
    data = ScrubData(
        label="bench seed 0",
        steps=list(range(steps)),
        patterns=quantise_patterns(logits.softmax(-1)),
        tokens=[[str(i % 10) for i in range(n)]] * 2,
        curve=curve,
    )
    return Scrubber(data).save_html(folder / "scrubber.html")


def plotly_page(folder: Path) -> Path:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from interp.report.page import figures_page

    fig = make_subplots(rows=2, cols=4)
    rng = np.random.default_rng(0)
    for i in range(8):
        fig.add_trace(go.Heatmap(z=np.tril(rng.random((19, 19))), showscale=False), row=i // 4 + 1, col=i % 4 + 1)
    fig.update_layout(height=500)
    path = folder / "plotly.html"
    path.write_text(figures_page("plotly heatmap grid", [("grid", fig)]), encoding="utf-8")
    return path


PLOTLY_FRAMES = """async (frames) => {const gd = document.querySelector('.plotly-graph-div'); const out = [];
  for (let r = 0; r < frames; r++) {const zs = [];
    for (let i = 0; i < 8; i++) {const z = []; for (let q = 0; q < 19; q++) {const row = [];
      for (let k = 0; k < 19; k++) row.push(k <= q ? Math.random() : null); z.push(row);} zs.push(z);}
    const t = performance.now(); await Plotly.restyle(gd, {z: zs});
    await new Promise(r => requestAnimationFrame(() => r())); out.push(performance.now() - t);}
  return out;}"""
SCRUBBER_FRAMES = """async (frames) => {const a = ELScrub.all[0]; window.ELScrubFrames = [];
  for (let r = 0; r < frames; r++) await a.go((a.index + 1) % a.steps.length);
  return window.ELScrubFrames;}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--steps", type=int, default=32)
    args = parser.parse_args()
    from browser import open_page

    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for name, path, script in (
            ("scrubber", scrubber_page(Path(tmp), args.steps), SCRUBBER_FRAMES),
            ("plotly", plotly_page(Path(tmp)), PLOTLY_FRAMES),
        ):
            with open_page(path) as (page, visit):
                page.wait_for_function(
                    "() => !document.querySelector('.el-scrub') || document.querySelector('.el-scrub').dataset.ready",
                    timeout=60_000,
                )
                page.wait_for_timeout(1000)
                frames = page.evaluate(script, args.frames)
            results[name] = statistics.median(frames)
            print(f"{name}: median {results[name]:.1f} ms, max {max(frames):.1f} ms over {len(frames)} frames")
    print(f"plotly_over_scrubber_median: {results['plotly'] / results['scrubber']:.1f}")


if __name__ == "__main__":
    main()
