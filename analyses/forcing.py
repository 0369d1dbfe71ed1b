"""Forcing the pattern: does biasing a head toward its ideal pattern move the point of emergence?

For every run of an embedded suite (default: the default suite, all six runs) and four
conditions:

- ``plain``: the suite's own run (the trainer with ``forcing=None``; its bytes are the plain
  trainer's, tests/interp/test_forcing.py);
- ``prev``: ``β · log(previous-token pattern + ε)`` on the attention scores of a layer-0 head
  (``--prev-head``, default L0H0);
- ``ind``: the induction pattern on a layer-1 head (``--ind-head``, default L1H0);
- ``both``: the two together;

each forced run trained from the same initialisation and data order as the plain one
(:func:`interp.sources.embedded.train_run` with an :class:`interp.forcing.Forcing`: full ``β`` for
``--force-steps`` steps, then linearly to 0 over ``--anneal-steps``).  Every checkpoint of every
run is evaluated *without* the bias (greedy accuracy on ``--prompts`` repetition prompts), the
point of emergence E is the first checkpoint crossing 0.5 that holds for the next 2
(:func:`interp.readiness.crossing`), and per run ``shift = E_forced − E_plain`` (steps; negative =
earlier).  The mean shift per condition has a 95 % t-interval over runs (t quantiles for up to 30
runs below).  Final loss: mean training loss over the last 100 steps (nats), forced relative to
plain (``loss_change``; "within 1 %" = ``|loss_change| <= 0.01``).

Resumable: each forced run is trained into ``--sweep-dir/<run>/<condition>/`` and appears there
only when complete (a temporary folder renamed), and a run's evaluation is kept in
``--out/runs/``; a second call trains and evaluates only what is missing.

Writes to ``--out``: ``forcing.csv`` (one row per run × condition), ``forcing_shift.csv`` (one
row per condition), ``forcing.md`` (the docs block), ``forcing.html`` (capability curves),
``answer.md`` (the plain answer of docs/results.md §3, :func:`answer`, from this table and the
readiness entry's ``readiness_points.csv`` beside ``--out`` when present); ``--update-docs``
replaces the blocks between ``forcing:begin`` / ``forcing:end`` and
``pattern-bottleneck-answer:begin`` / ``:end`` in docs/results.md.  Last line: ``forcing_runs: N``.

Usage: ``python -m analyses.forcing [--suite embedded] [--jobs 2] [--update-docs]``
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import time
from pathlib import Path

import pandas as pd

from interp.cli.options import description
from interp.core.io import atomic_to_csv, atomic_write_text
from interp.core.terms import DEFAULT_THRESHOLD
from interp.population.forced import crossing_of, mean_interval, select_runs, train_forced

ROOT = Path(__file__).resolve().parents[1]

NAME = "forcing"
DOCS = ROOT / "docs" / "results.md"
BEGIN, END = "<!-- forcing:begin -->", "<!-- forcing:end -->"
CONDITIONS = ("plain", "prev", "ind", "both")
COLUMNS = [
    "model",
    "seed",
    "condition",
    "forcing",
    "emergence_pre",
    "emergence_step",
    "shift",
    "final_loss",
    "plain_final_loss",
    "loss_change",
    "within_1pct",
]


def parse_head(text: str, layer: int, option: str) -> tuple[int, int]:
    """``"L0H2"`` -> ``(0, 2)``; the layer must be ``layer``.

    Raises:
        ValueError: not ``L<layer>H<head>``, or another layer.
    """
    match = re.fullmatch(r"L(\d+)H(\d+)", text.strip(), flags=re.IGNORECASE)
    if not match or int(match.group(1)) != layer:
        raise ValueError(f"{option} {text!r}: expected a layer-{layer} head such as L{layer}H0")
    return int(match.group(1)), int(match.group(2))


def forcings(prev: tuple[int, int], ind: tuple[int, int], beta: float, steps: int, anneal: int) -> dict:
    """condition -> :class:`interp.forcing.Forcing` (None for plain)."""
    from interp.forcing import Forcing

    kw = dict(beta=beta, steps=steps, anneal_steps=anneal)
    return {
        "plain": None,
        "prev": Forcing(((*prev, "previous_token"),), **kw),
        "ind": Forcing(((*ind, "induction"),), **kw),
        "both": Forcing(((*prev, "previous_token"), (*ind, "induction")), **kw),
    }


def evaluate_run(
    folder: Path, n_prompts: int, threshold: float = DEFAULT_THRESHOLD, hold: int = 2
) -> tuple[pd.DataFrame, tuple]:
    """``(curve [step, accuracy, p_answer], (pre, post))`` of a run folder, every checkpoint, no bias."""
    from interp.emergence import full_scan
    from interp.readiness import crossing
    from interp.sources import LocalSuiteSource
    from interp.tasks import RepetitionTask

    source = LocalSuiteSource(folder)
    curve = full_scan(source, RepetitionTask(n_prompts=n_prompts).build(source.tokenizer()))
    source.close()
    return curve, crossing(curve["step"], curve["accuracy"], threshold, hold)


def final_loss(folder: Path, last: int = 100) -> float:
    """Mean training loss (nats) over the run's last ``last`` steps (``loss.csv``)."""
    losses = pd.read_csv(folder / "loss.csv")
    return float(losses["loss"].tail(last).mean())


def summarise(table: pd.DataFrame) -> pd.DataFrame:
    """forcing_shift.csv: per forced condition, runs, runs whose E is defined in both, mean shift
    with its 95 % t-interval over runs, runs earlier / later / same, mean loss change, runs within 1 %,
    runs whose final loss is at most 1 % above plain (``runs_not_worse_1pct``: lower counts too)."""
    rows = []
    for condition in CONDITIONS[1:]:
        sub = table[table["condition"] == condition]
        shifts = sub["shift"].dropna()
        mean, lo, hi = mean_interval(shifts)
        rows.append(
            {
                "condition": condition,
                "forcing": sub["forcing"].iloc[0] if len(sub) else "",
                "runs": len(sub),
                "runs_with_shift": len(shifts),
                "mean_shift": mean,
                "shift_lo": lo,
                "shift_hi": hi,
                "earlier": int((shifts < 0).sum()),
                "later": int((shifts > 0).sum()),
                "same": int((shifts == 0).sum()),
                "mean_loss_change": float(sub["loss_change"].mean()),
                "runs_within_1pct": int(sub["within_1pct"].sum()),
                "runs_not_worse_1pct": int((sub["loss_change"] <= 0.01).sum()),
            }
        )
    return pd.DataFrame(rows)


def verdict(shift: pd.DataFrame) -> list[str]:
    """One plain line per forced condition, read off the numbers."""
    lines = []
    for _, r in shift.iterrows():
        if r["runs_with_shift"] == 0:
            lines.append(
                f"- **{r['condition']}**: no run has a point of emergence in both the plain and the forced "
                "run; no shift can be stated."
            )
            continue
        ci = "" if pd.isna(r["shift_lo"]) else f" (95 % interval over runs {r['shift_lo']:.0f} to {r['shift_hi']:.0f})"
        if not pd.isna(r["shift_lo"]) and r["shift_hi"] < 0:
            moved = "moves the point of emergence **earlier**"
        elif not pd.isna(r["shift_lo"]) and r["shift_lo"] > 0:
            moved = "moves the point of emergence **later**"
        else:
            moved = "does **not** move the point of emergence measurably"
        lines.append(
            f"- **{r['condition']}** {moved}: mean shift {r['mean_shift']:.0f} steps{ci}; earlier on "
            f"{r['earlier']}, later on {r['later']}, unchanged on {r['same']} of {r['runs_with_shift']} runs; "
            f"final loss {100 * r['mean_loss_change']:+.2f} % on average, within 1 % on "
            f"{r['runs_within_1pct']} and at most 1 % worse on {r.get('runs_not_worse_1pct', r['runs_within_1pct'])} "
            f"of {r['runs']} runs."
        )
    return lines


def markdown(table: pd.DataFrame, shift: pd.DataFrame, settings: str, seconds: float) -> str:
    """The docs/results.md block: settings, the per-run table, the per-condition table, the verdict."""
    from interp.core.io import markdown_table

    def md(df: pd.DataFrame) -> str:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            df.to_csv(Path(tmp) / "t.csv", index=False)
            return markdown_table(Path(tmp) / "t.csv")

    lines = [
        settings,
        "",
        f"Runtime of this entry: {seconds / 60:.1f} min.",
        "",
        "Per run (E in steps; shift = E_forced − E_plain, negative = earlier):",
        "",
        md(table[["model", "seed", "condition", "emergence_step", "shift", "final_loss", "loss_change"]]),
        "Per condition (mean over runs, 95 % t-interval):",
        "",
        md(shift.drop(columns=["forcing"])),
        *verdict(shift),
    ]
    return "\n".join(lines) + "\n"


def curves_figure(curves: pd.DataFrame):
    """Greedy accuracy per checkpoint, one panel per run, one line per condition."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    runs = list(dict.fromkeys(zip(curves["model"], curves["seed"])))
    cols = min(3, len(runs))
    fig = make_subplots(
        rows=math.ceil(len(runs) / cols),
        cols=cols,
        shared_yaxes=True,
        subplot_titles=[f"{m} seed {s}" for m, s in runs],
    )
    for i, (model, seed) in enumerate(runs):
        for condition in CONDITIONS:
            sub = curves[(curves["model"] == model) & (curves["seed"] == seed) & (curves["condition"] == condition)]
            if len(sub):
                fig.add_trace(
                    go.Scatter(
                        x=sub["step"],
                        y=sub["accuracy"],
                        mode="lines",
                        name=condition,
                        legendgroup=condition,
                        showlegend=i == 0,
                    ),
                    row=i // cols + 1,
                    col=i % cols + 1,
                )
    fig.add_hline(y=0.5, line_dash="dot", line_color="gray")
    fig.update_xaxes(title_text="training step")
    fig.update_yaxes(title_text="greedy accuracy (no bias)")
    fig.update_layout(title="Capability per checkpoint, plain vs forced", height=330 * math.ceil(len(runs) / cols))
    return fig


ANSWER_BEGIN, ANSWER_END = "<!-- pattern-bottleneck-answer:begin -->", "<!-- pattern-bottleneck-answer:end -->"


def _not_worse(shift: pd.DataFrame) -> str:
    """The column counting runs whose final loss is at most 1 % worse (older tables: within 1 %)."""
    return "runs_not_worse_1pct" if "runs_not_worse_1pct" in shift.columns else "runs_within_1pct"


def answer(readiness_points: pd.DataFrame | None, shift: pd.DataFrame) -> str:
    """The plain paragraph of docs/results.md §3, read off the two experiments' tables by a fixed rule.

    Readiness supports the claim on a run when R exists and the lower end of E − R's interval is
    above 0 (the ideal-pattern model solved the task at an earlier checkpoint). Forcing supports
    it when the ``both`` condition's mean shift has its 95 % interval below 0 and at least half of
    its runs end with a final loss at most 1 % above the plain run's (the bias must not cost the
    model anything; a lower final loss, as a run that emerged earlier and then trained longer past
    its plateau reaches, does not count against it). Both: the pattern is the bottleneck; one:
    partly; neither: not.
    """
    both = shift[shift["condition"] == "both"]
    forced = (
        bool(len(both))
        and not pd.isna(both["shift_hi"].iloc[0])
        and both["shift_hi"].iloc[0] < 0
        and both[_not_worse(both)].iloc[0] * 2 >= both["runs"].iloc[0]
    )
    if len(both) and not pd.isna(both["mean_shift"].iloc[0]):
        r = both.iloc[0]
        ci = "" if pd.isna(r["shift_lo"]) else f", 95 % interval {r['shift_lo']:.0f} to {r['shift_hi']:.0f}"
        forcing_text = (
            f"forcing both patterns moved the point of emergence by {r['mean_shift']:.0f} steps on "
            f"average ({r['earlier']} of {r['runs_with_shift']} runs earlier{ci}), with the final loss "
            f"within 1 % on {r['runs_within_1pct']} and at most 1 % worse on {r[_not_worse(both)]} of "
            f"{r['runs']} runs (mean change {100 * r['mean_loss_change']:+.2f} %)"
        )
    else:
        forcing_text = "forcing gave no run with a point of emergence in both the plain and the forced run"
    if readiness_points is None or not len(readiness_points):
        ready, readiness_text = False, "the readiness entry has not been run"
    else:
        p = readiness_points
        early = p[p["readiness_step"].notna() & (p["e_minus_r_lo"].fillna(-1) > 0)]
        no_r = int(p["readiness_step"].isna().sum())
        ready = len(early) * 2 > len(p)
        readiness_text = (
            f"the ideal patterns made the capability at an earlier checkpoint (E − R > 0 with its "
            f"interval above 0) on {len(early)} of {len(p)} runs, and never on {no_r}"
        )
    verdict = (
        "**is the bottleneck**"
        if ready and forced
        else "**is partly the bottleneck**"
        if ready or forced
        else "**is not the bottleneck**"
    )
    return (
        f"On this suite, finding the pattern {verdict} of emergence: {readiness_text}; {forcing_text}. "
        "(Rule: readiness counts when R precedes E on most runs; forcing counts when the mean shift's interval "
        "lies below 0 with the final loss at most 1 % worse than plain on at least half the runs; both = the bottleneck, one = "
        "partly, neither = not.)\n"
    )


def update_docs(block: str, answer_text: str | None = None) -> None:
    """Replace docs/results.md's forcing block (created under the pattern-bottleneck section if
    absent) and, given ``answer_text``, the answer paragraph's block."""
    text = DOCS.read_text()
    if BEGIN not in text:
        text += f"\n### Forcing the pattern during training\n\n{BEGIN}\n{END}\n"
    text = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda m: f"{BEGIN}\n{block}{END}", text, flags=re.S)
    if answer_text is not None:
        if ANSWER_BEGIN not in text:
            text += f"\n### The answer\n\n{ANSWER_BEGIN}\n{ANSWER_END}\n"
        text = re.sub(
            re.escape(ANSWER_BEGIN) + r".*?" + re.escape(ANSWER_END),
            lambda m: f"{ANSWER_BEGIN}\n{answer_text}{ANSWER_END}",
            text,
            flags=re.S,
        )
    atomic_write_text(DOCS, text)


def suite_config(name: str, steps: int | None, checkpoint_every: int | None):
    """The suite's config, with ``--steps`` / ``--checkpoint-every`` overrides (CI scale)."""
    from interp.sources.catalogue import SUITES

    if name not in SUITES:
        raise ValueError(f"--suite {name!r} is unknown; valid: {', '.join(SUITES)}")
    cfg = SUITES[name]
    if steps is not None:
        cfg = dataclasses.replace(cfg, steps=steps, size_steps=())
    if checkpoint_every is not None:
        cfg = dataclasses.replace(cfg, checkpoint_every=checkpoint_every)
    return cfg


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="analyses/forcing.py", description=description(__doc__))
    parser.add_argument("--suite", default="embedded", help="embedded | embedded-quick")
    parser.add_argument("--steps", type=int, default=None, help="override the suite's training steps (CI scale)")
    parser.add_argument("--checkpoint-every", type=int, default=None, help="override the checkpoint spacing (CI scale)")
    parser.add_argument("--prev-head", default="L0H0", help="layer-0 head biased toward the previous-token pattern")
    parser.add_argument("--ind-head", default="L1H0", help="layer-1 head biased toward the induction pattern")
    parser.add_argument("--beta", type=float, default=1.0, help="bias scale (nats per unit of log(ideal + eps))")
    parser.add_argument("--force-steps", type=int, default=500, help="steps at full beta (N)")
    parser.add_argument("--anneal-steps", type=int, default=250, help="steps of the linear anneal to 0 after N")
    parser.add_argument("--prompts", type=int, default=256, help="repetition prompts per checkpoint")
    parser.add_argument("--jobs", type=int, default=2, help="training processes")
    parser.add_argument("--sweep-dir", type=Path, default=ROOT / "results" / "sweeps" / NAME)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "analyses" / NAME)
    parser.add_argument(
        "--runs",
        default=None,
        help="comma-separated model names (neox-2l-128d) or run names (neox-2l-128d-seed0): only "
        "these runs (default: every run of the suite); the docs block then says which",
    )
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args(argv)
    prev = parse_head(args.prev_head, 0, "--prev-head")
    ind = parse_head(args.ind_head, 1, "--ind-head")
    if args.jobs < 1 or args.prompts < 1:
        raise ValueError(f"--jobs {args.jobs} and --prompts {args.prompts} must be >= 1")
    cfg = suite_config(args.suite, args.steps, args.checkpoint_every)
    selected = select_runs(cfg, args.runs)
    by_condition = forcings(prev, ind, args.beta, args.force_steps, args.anneal_steps)  # validates beta / steps

    from concurrent.futures import ProcessPoolExecutor

    from interp.report import page as vis
    from interp.sources import embedded, environment
    from interp.sources.catalogue import run_name

    start = time.time()
    plain = dict(zip(cfg.run_names(), embedded.ensure_suite(cfg, progress=False)))
    tag = (
        f"{cfg.digest()}-{environment.environment_key(cfg)}-b{args.beta:g}-n{args.force_steps}-a{args.anneal_steps}"
        f"-{args.prev_head}-{args.ind_head}"
    )
    jobs = [
        (size, seed, args.sweep_dir / tag / run_name(size, seed) / condition, forcing)
        for size, seed in selected
        for condition, forcing in by_condition.items()
        if forcing
    ]
    missing = [j for j in jobs if not (j[2] / "suite.json").exists()]
    # longest first, so that the pool stays busy to the end
    missing.sort(key=lambda j: -(cfg.steps_for(j[0]) * j[0].n_layers * j[0].d_model ** 2))
    if missing:
        from interp.core.kernel_pins import pinned_context  # forced runs train with the suite's kernel pins

        with ProcessPoolExecutor(min(args.jobs, len(missing)), mp_context=pinned_context(cfg.threads)) as pool:
            for future in [
                pool.submit(train_forced, size, seed, cfg, forcing, folder) for size, seed, folder, forcing in missing
            ]:
                print(f"trained {future.result()} ({time.time() - start:.0f} s)", flush=True)
    print(f"forced runs: {len(jobs)} ({len(missing)} trained now)", flush=True)

    rows, curves = [], []
    for size, seed in selected:
        name = run_name(size, seed)
        folders = {"plain": plain[name], **{c: args.sweep_dir / tag / name / c for c, f in by_condition.items() if f}}
        result = {}
        for condition, folder in folders.items():
            key = args.out / "runs" / f"{tag}-{name}-{condition}-p{args.prompts}.csv"
            if key.is_file():
                curve = pd.read_csv(key)
                point = crossing_of(curve)
            else:
                curve, point = evaluate_run(folder, args.prompts)
                atomic_to_csv(curve, key)
            curves.append(curve.assign(model=size.name, seed=seed, condition=condition))
            result[condition] = (point, final_loss(folder))
        (plain_point, plain_loss) = result["plain"]
        for condition, (point, loss) in result.items():
            e, e0 = point[1], plain_point[1]
            change = loss / plain_loss - 1
            rows.append(
                {
                    "model": size.name,
                    "seed": seed,
                    "condition": condition,
                    "forcing": "" if by_condition[condition] is None else by_condition[condition].label(),
                    "emergence_pre": point[0],
                    "emergence_step": e,
                    "shift": None if e is None or e0 is None else int(e - e0),
                    "final_loss": loss,
                    "plain_final_loss": plain_loss,
                    "loss_change": change,
                    "within_1pct": abs(change) <= 0.01,
                }
            )
        print(
            f"{name}: E " + ", ".join(f"{c} {result[c][0][1]}" for c in result) + f" ({time.time() - start:.0f} s)",
            flush=True,
        )
    table = pd.DataFrame(rows, columns=COLUMNS).astype(
        {"emergence_pre": "Int64", "emergence_step": "Int64", "shift": "Int64"}
    )
    shift = summarise(table)
    seconds = time.time() - start
    settings = (
        f"Command: `python -m analyses.forcing --suite {args.suite} --prev-head {args.prev_head} --ind-head "
        f"{args.ind_head} --beta {args.beta:g} --force-steps {args.force_steps} --anneal-steps "
        f"{args.anneal_steps} --prompts {args.prompts}`"
        + ("" if args.steps is None else f" `--steps {args.steps}`")
        + f"; suite `{cfg.digest()}-{environment.environment_key(cfg)}`; bias β·log(ideal + 1e-3) for "
        f"{args.force_steps} steps, then linearly to 0 over {args.anneal_steps}; E: greedy accuracy 0.5 on "
        f"{args.prompts} repetition prompts, holding for the next 2 checkpoints, measured without the bias; "
        f"final loss: mean training loss of the last 100 steps."
        + (
            ""
            if args.runs is None
            else f" **Runs: {', '.join(run_name(size, seed) for size, seed in selected)} only** "
            f"(`--runs {args.runs}`); the suite's other runs were not forced."
        )
    )
    block = markdown(table, shift, settings, seconds)
    atomic_to_csv(table, args.out / "forcing.csv")
    atomic_to_csv(shift, args.out / "forcing_shift.csv")
    atomic_write_text(args.out / "forcing.md", block)
    atomic_write_text(
        args.out / "forcing.html",
        vis.figures_page(
            "Forcing the pattern", [("Capability per checkpoint", curves_figure(pd.concat(curves, ignore_index=True)))]
        ),
    )
    # the readiness entry writes beside this one (OUT/analyses/readiness/, analyses/results.py)
    ready_csv = args.out.parent / "readiness" / "readiness_points.csv"
    answer_text = answer(pd.read_csv(ready_csv) if ready_csv.is_file() else None, shift)
    atomic_write_text(args.out / "answer.md", answer_text)
    if args.update_docs:
        update_docs(block, answer_text)
    print(block)
    print(answer_text)
    print(f"wrote {args.out} in {seconds:.0f} s")
    print(f"forcing_runs: {len(table)}")


if __name__ == "__main__":
    main()
