"""Readiness on every run: would the model solve the task earlier if its heads had the ideal pattern?

For every run of a suite (default: the embedded default suite, all six runs),
:func:`interp.readiness.readiness` with ``heads="auto"`` (at E's post step, the head with the
highest prefix-matching score gets the induction pattern, the other head with the highest
previous-token score the previous-token pattern): per checkpoint, greedy accuracy and p(answer)
as trained and with those two heads' patterns set to ideal; E and R under the same rule (0.5,
holding for the next 2 checkpoints); ``E − R`` (steps) with a 95 % percentile bootstrap over
prompts.

Resumable: each run's result is kept in ``--out/runs/`` and reused by a second call.

Writes to ``--out``: ``readiness.csv`` (one row per run × checkpoint), ``readiness_points.csv``
(one row per run), ``readiness.md`` (the docs block), ``readiness.html`` (one figure per run);
``--update-docs`` replaces the block between ``readiness:begin`` / ``readiness:end`` in
docs/results.md.  Last line: ``readiness_runs: N``.

Usage: ``python -m analyses.readiness [--suite embedded] [--update-docs]``
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import pandas as pd

from interp.cli.options import description
from interp.core.io import atomic_to_csv, atomic_write_text

ROOT = Path(__file__).resolve().parents[1]

NAME = "readiness"
DOCS = ROOT / "docs" / "results.md"
BEGIN, END = "<!-- readiness:begin -->", "<!-- readiness:end -->"


def verdict(points: pd.DataFrame) -> list[str]:
    """One plain line per run, read off the numbers."""
    lines = []
    for _, p in points.iterrows():
        run = f"{p['model']} seed {p['seed']}"
        if pd.isna(p["emergence_step"]):
            lines.append(f"- {run}: no point of emergence (E); no comparison.")
        elif pd.isna(p["readiness_step"]):
            lines.append(
                f"- {run}: E = {int(p['emergence_step'])}, but the ideal-pattern model never crosses "
                "and holds: the ideal patterns of these heads do not make the capability."
            )
        else:
            lo, hi = p["e_minus_r_lo"], p["e_minus_r_hi"]
            ci = "" if pd.isna(lo) else f" [{lo:.0f}, {hi:.0f}]"
            what = (
                "the rest of the circuit was ready before the pattern"
                if p["e_minus_r"] > 0 and not lo <= 0
                else "ready no earlier than it emerged"
                if p["e_minus_r"] <= 0
                else "not clearly earlier"
            )
            lines.append(
                f"- {run}: E = {int(p['emergence_step'])}, R = {int(p['readiness_step'])}, E − R = "
                f"{int(p['e_minus_r'])} steps{ci}: {what}."
            )
    return lines


def markdown(points: pd.DataFrame, settings: str, seconds: float) -> str:
    import tempfile

    from interp.core.io import markdown_table

    with tempfile.TemporaryDirectory() as tmp:
        points.to_csv(Path(tmp) / "p.csv", index=False)
        table = markdown_table(Path(tmp) / "p.csv")
    return (
        "\n".join([settings, "", f"Runtime of this entry: {seconds / 60:.1f} min.", "", table, *verdict(points)]) + "\n"
    )


def update_docs(block: str) -> None:
    """Replace docs/results.md's readiness block (appended if absent)."""
    text = DOCS.read_text()
    if BEGIN not in text:
        text += f"\n### Readiness: capability with ideal patterns\n\n{BEGIN}\n{END}\n"
    text = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda m: f"{BEGIN}\n{block}{END}", text, flags=re.S)
    atomic_write_text(DOCS, text)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="analyses/readiness.py", description=description(__doc__))
    parser.add_argument(
        "--suite",
        default=["embedded"],
        nargs="+",
        help="embedded | embedded-quick | embedded/<run> | run folders (several allowed)",
    )
    parser.add_argument("--prompts", type=int, default=256, help="repetition prompts per checkpoint")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--method", default="fast", choices=["fast", "reference"])
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "analyses" / NAME)
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args(argv)
    if args.prompts < 1 or args.n_boot < 1:
        raise ValueError(f"--prompts {args.prompts} and --n-boot {args.n_boot} must be >= 1")
    from interp.core.settings import StudyConfig
    from interp.readiness import POINTS_COLUMNS, ReadinessResult, readiness, readiness_page
    from interp.sources import open_sources
    from interp.tasks import RepetitionTask

    start = time.time()
    tables, points, results = [], [], []
    for source in open_sources(args.suite, progress=False):
        key = f"{source.root.parent.name}-{source.root.name}-p{args.prompts}-b{args.n_boot}"
        table_file, point_file = args.out / "runs" / f"{key}.csv", args.out / "runs" / f"{key}.json"
        if point_file.is_file():
            table, point = pd.read_csv(table_file), json.loads(point_file.read_text())
        else:
            result = readiness(
                source,
                RepetitionTask(n_prompts=args.prompts).build(source.tokenizer()),
                heads="auto",
                config=StudyConfig(n_boot=args.n_boot, method=args.method),
            )
            table, point = result.table(), result.point_row()
            atomic_to_csv(table, table_file)
            atomic_write_text(point_file, json.dumps(point))
        source.close()
        tables.append(table)
        points.append(point)
        results.append(
            ReadinessResult(
                point["model"],
                point["seed"],
                {},
                table,
                (None, point["emergence_step"]),
                (None, point["readiness_step"]),
                point["e_minus_r"],
                (point["e_minus_r_lo"], point["e_minus_r_hi"]),
                point["boot_defined"],
                point["n_boot"],
                point["threshold"],
                point["hold"],
            )
        )
        results[-1].heads = {
            tuple(int(x) for x in re.findall(r"\d+", h.split("=")[0])): h.split("=")[1]
            for h in point["heads"].split("+")
        }
        print(
            f"{point['model']} seed {point['seed']}: E {point['emergence_step']} R {point['readiness_step']} "
            f"({time.time() - start:.0f} s)",
            flush=True,
        )
    points_df = pd.DataFrame(points, columns=POINTS_COLUMNS).astype(
        {"emergence_step": "Int64", "readiness_step": "Int64", "e_minus_r": "Int64"}
    )
    seconds = time.time() - start
    settings = (
        f"Command: `python -m analyses.readiness --suite {' '.join(args.suite)} --prompts {args.prompts} "
        f"--n-boot {args.n_boot}`; heads: auto (at E's post step, the top prefix-matching head gets the "
        f"induction pattern, the top previous-token head among the others the previous-token pattern); E and R: "
        f"greedy accuracy 0.5 on {args.prompts} repetition prompts, holding for the next 2 checkpoints; "
        f"interval: 95 % percentile bootstrap over prompts."
    )
    block = markdown(points_df, settings, seconds)
    atomic_to_csv(pd.concat(tables, ignore_index=True), args.out / "readiness.csv")
    atomic_to_csv(points_df, args.out / "readiness_points.csv")
    atomic_write_text(args.out / "readiness.md", block)
    atomic_write_text(args.out / "readiness.html", readiness_page(results, title="Readiness on every run"))
    if args.update_docs:
        update_docs(block)
    print(block)
    print(f"wrote {args.out} in {seconds:.0f} s")
    print(f"readiness_runs: {len(points_df)}")


if __name__ == "__main__":
    main()
