"""Compare the tables of two main-job output folders (e.g. ``--device cuda`` vs ``--device cpu``):
same rows and non-numeric values, numeric values equal to ``--atol`` (default 1e-4, probability
units for p_answer / delta_p / recovered). Exit 1 and name the first difference otherwise.

    .venv/bin/python benchmarks/compare_reports.py OUT_CUDA OUT_CPU [--atol 1e-4]

Last line: ``max_abs_difference: <x>`` (over every numeric column of every table).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

TABLES = ("emergence", "points", "heads", "topk", "components", "head_scores")


def compare(a: Path, b: Path, atol: float = 1e-4) -> tuple[float, list[str]]:
    """``(max abs difference over numeric columns, problems)`` between two report folders."""
    worst, problems = 0.0, []
    for name in TABLES:
        left, right = pd.read_parquet(Path(a) / f"{name}.parquet"), pd.read_parquet(Path(b) / f"{name}.parquet")
        if left.shape != right.shape or list(left.columns) != list(right.columns):
            problems.append(f"{name}: shape {left.shape} vs {right.shape}")
            continue
        for column in left.columns:
            x, y = left[column], right[column]
            if (
                pd.api.types.is_numeric_dtype(x)
                and pd.api.types.is_numeric_dtype(y)
                and not pd.api.types.is_bool_dtype(x)
            ):
                xs, ys = x.to_numpy(dtype=float, na_value=np.nan), y.to_numpy(dtype=float, na_value=np.nan)
                if not np.array_equal(np.isnan(xs), np.isnan(ys)):
                    problems.append(f"{name}.{column}: missing values differ")
                    continue
                diff = float(np.nanmax(np.abs(xs - ys))) if len(xs) and not np.isnan(xs).all() else 0.0
                worst = max(worst, diff)
                if diff > atol:
                    problems.append(f"{name}.{column}: max |difference| {diff:.2e} > {atol:g}")
            elif not x.astype(str).equals(y.astype(str)):
                problems.append(f"{name}.{column}: values differ")
    return worst, problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--atol", type=float, default=1e-4)
    args = parser.parse_args()
    worst, problems = compare(args.a, args.b, args.atol)
    for line in problems:
        print(f"DIFFERS {line}")
    print(f"max_abs_difference: {worst:.3e}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
