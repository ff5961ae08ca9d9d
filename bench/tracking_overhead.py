"""Tracking overhead: the same sweep with and without our MLflow callback.

One local Ray (2 CPUs), the tiny PPO CartPole sweep of _common.py run through
`tuner.sweep.run_sweep` with `tracking=None` (A) and with MLflow tracking to a
SQLite store plus a local artifact folder (B), in the order A B B A (repeated with
--repeats, default 2) so that drift cancels. Prints each run, the means, and

    RATIO tracking_overhead = mean wall(B) / mean wall(A)     (goal <= 1.05)

where wall is the whole `run_sweep` call: for B that includes creating the parent
run, a child run per trial, per-iteration metrics, uploading each trial's
checkpoint, and the sweep's result (best config, trials table, learning-curve PNG,
model registration). One-off per-process costs (MLflow DB schema creation, the
matplotlib import) are paid in an untimed warm-up and printed separately.

The wall ratio compares separate runs, so other load on the machine moves it. The
same tracker is also timed from inside (bench/_fit_timer.TimedTracker adds up the
seconds spent in its hooks, before, during and after the fit), which gives a
direct estimate, 1 + tracker seconds / untracked wall, printed above the RATIO.

    .venv/bin/python bench/tracking_overhead.py [--iterations 8] [--repeats 2]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import ITERATIONS, mean, ratio_line, table, tiny_spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=ITERATIONS)
    parser.add_argument("--repeats", type=int, default=2, help="A B B A blocks (default 2)")
    parser.add_argument("--keep", action="store_true", help="keep the temp data dir")
    args = parser.parse_args(argv)

    import ray
    from _fit_timer import FitTimer, fit_seconds, tracker_seconds, use_timed_tracker

    from tuner.spec import parse_spec
    from tuner.sweep import ensure_ray, run_sweep
    from tuner.tracking._mlflow_tracker import TrackingConfig

    tmp = Path(tempfile.mkdtemp(prefix="tuner-bench-tracking-"))
    try:
        t0 = time.perf_counter()
        ensure_ray(num_cpus=2)
        print(f"local Ray (2 CPUs) up in {time.perf_counter() - t0:.1f} s; data in {tmp}")
        tracking = TrackingConfig(
            tracking_uri=f"sqlite:///{tmp / 'mlflow.db'}",
            artifact_location=(tmp / "mlflow-artifacts").as_uri(),
        )
        spec = parse_spec(tiny_spec("bench-tracking", args.iterations))
        use_timed_tracker()  # the same tracker, adding up the seconds spent in it

        # One-off costs of a fresh process and store, paid before timing starts.
        t0 = time.perf_counter()
        from mlflow.tracking import MlflowClient

        MlflowClient(tracking_uri=tracking.tracking_uri).search_experiments()
        schema_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        import matplotlib.pyplot  # noqa: F401 - MLflowTracker.finish draws the curves

        mpl_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        warm = parse_spec(tiny_spec("bench-tracking-warmup", 1))
        run_sweep(warm, storage_path=tmp / "tune", name="warmup", progress=False)
        warm_s = time.perf_counter() - t0
        print(
            f"untimed warm-up: MLflow schema {schema_s:.1f} s, matplotlib import {mpl_s:.1f} s, "
            f"1-iteration sweep {warm_s:.1f} s"
        )

        order = ["untracked", "tracked", "tracked", "untracked"] * args.repeats
        rows, walls = [], {"untracked": [], "tracked": []}
        in_tracker: list[dict[str, float]] = []
        fits, rates = {"untracked": [], "tracked": []}, {"untracked": [], "tracked": []}
        for i, arm in enumerate(order):
            name = f"{arm}-{i}"
            t0 = time.perf_counter()
            summary = run_sweep(
                spec,
                storage_path=tmp / "tune",
                name=name,
                progress=False,
                callbacks=[FitTimer(name)],
                tracking=tracking if arm == "tracked" else None,
            )
            wall = time.perf_counter() - t0
            fit = fit_seconds(name)
            steps = sum(t.env_steps for t in summary.trials)
            ok = sum(t.status == "TERMINATED" for t in summary.trials)
            if arm == "tracked":
                in_tracker.append(tracker_seconds(name))
            walls[arm].append(wall)
            fits[arm].append(fit)
            rates[arm].append(steps / fit)
            rows.append([i + 1, arm, f"{ok}/{len(summary.trials)}", steps, wall, fit, steps / fit])
            print(f"  run {i + 1}/{len(order)} {arm}: {wall:.1f} s", flush=True)

        print()
        print(
            table(
                ["run", "arm", "trials ok", "env steps", "wall s", "fit s", "env steps/s (fit)"],
                rows,
            )
        )
        print()
        summary_rows = [
            [arm, len(walls[arm]), mean(walls[arm]), mean(fits[arm]), mean(rates[arm])]
            for arm in ("untracked", "tracked")
        ]
        print(table(["arm", "runs", "mean wall s", "mean fit s", "mean env steps/s"], summary_rows))
        fit_ratio = mean(fits["tracked"]) / mean(fits["untracked"])
        rate_ratio = mean(rates["tracked"]) / mean(rates["untracked"])
        print()
        print("wall = the whole run_sweep call; fit = Tune's loop only (setup..experiment end).")
        print(f"fit-time ratio tracked/untracked: {fit_ratio:.2f}")
        print(f"throughput ratio tracked/untracked (env steps/s over fit): {rate_ratio:.2f}")
        med = statistics.median(walls["tracked"]) / statistics.median(walls["untracked"])
        print(f"wall ratio of medians tracked/untracked: {med:.2f}")
        best = min(walls["tracked"]) / min(walls["untracked"])
        print(f"wall ratio of minimums (best runs) tracked/untracked: {best:.2f}")
        phases = ("before fit", "during fit", "after fit")
        spent = {k: mean([t[k] for t in in_tracker]) for k in phases}
        total = sum(spent.values())
        print(
            "seconds inside the MLflow tracker per tracked sweep: "
            + ", ".join(f"{k} {v:.2f}" for k, v in spent.items())
            + f"; total {total:.2f}"
        )
        direct = 1 + total / mean(walls["untracked"])
        print(
            f"direct estimate 1 + tracker s / untracked wall: {direct:.3f} (the tracker's own "
            "time only; much less sensitive to other load than the wall ratio)"
        )
        print(
            ratio_line(
                "tracking_overhead", mean(walls["tracked"]) / mean(walls["untracked"]), "<= 1.05"
            )
        )
    finally:
        ray.shutdown()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
