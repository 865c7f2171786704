"""Decode-throughput detector benchmark: simulated SGLang startups, the detector's error rates.

    python -m bench.decode            # full: 200 runs per scenario (bench/results/decode.json)
    python -m bench.decode --smoke    # CI: 30 runs per scenario, seeded (about 20 s)

A throughput model generates the `Prefill batch` / `Decode batch` lines SGLang 0.5.9 prints
(`report_decode_stats`: tokens since the previous decode line over the wall time since it) with
the confounders of a real server: Poisson arrivals whose prefill sits inside decode intervals,
requests finishing mid-interval (batch drift), context growing every step, idle gaps, a slowly
drifting load level, JIT warm-up after ready, the first line's timer starting at scheduler init,
CUDA-graph padding, and 2-7 % multiplicative noise per interval. The lines go through the real
`DecodeState` and `compare_decode`. Scenarios:

- `no_change`: baseline and current drawn from the same model -> regressed/improved <= 1 %;
- `slowdown_15`: current decode 15 % slower -> regressed >= 95 % of the runs whose new startup
  has >= 30 clean samples at like load (inside the baseline's batch/context range; the rest are
  `inconclusive`, counted apart, and must be <= 20 % of the runs);
- `few_samples` / `few_samples_no_change`: a short new startup (90 decode lines, most in warm-up
  or dirty), 15 % slower / unchanged -> never the wrong direction (`improved` when slower,
  `regressed` or `improved` when unchanged); mostly `inconclusive`;
and the median |ratio error| over the runs where the detector gave a ratio.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_sentinel.compare.decode_stats import DecodeSettings, compare_decode
from sglang_sentinel.startups.decode_samples import (
    DECODE_RULE,
    PREFILL_RULE,
    DecodeState,
    graph_size,
)

RESULTS = Path(__file__).resolve().parent / "results"
CAPTURED = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80)
SETTINGS = DecodeSettings()
TARGETS = {
    "no_change_false_verdict_max": 0.01,
    "slowdown_regressed_min": 0.95,
    "ratio_error_median_max": 0.03,
    "few_samples_wrong_direction_max": 0.0,
}


@dataclass(frozen=True, slots=True)
class Model:
    """Step time (s) = (a + b * padded_bs + c * padded_bs * ctx_per_req) / speed."""

    a: float = 0.012
    b: float = 0.00012
    c: float = 8.5e-8
    speed: float = 1.0  # 0.85: every decode step takes 1/0.85 as long
    noise: float = 0.04  # sigma of the per-interval log-normal noise
    jit_factor: float = 1.6  # steps this much slower during the first `jit_seconds` after ready
    jit_seconds: float = 240.0

    def step(self, bs: int, ctx: float, since_ready: float) -> float:
        pad = graph_size(bs, CAPTURED) or bs
        t = (self.a + self.b * pad + self.c * pad * ctx) / self.speed
        return t * (self.jit_factor if since_ready < self.jit_seconds else 1.0)


@dataclass(frozen=True, slots=True)
class Simulated:
    """One simulated startup: when it started and became ready, and its batch lines (time,
    rule id, line body without the `[ts TP0] ` prefix), in order."""

    started: float
    ready: float
    lines: list[tuple[float, str, str]]


def simulate_lines(
    model: Model,
    intervals: int,
    rng: random.Random,
    load: float,
    started: float = 1.7e9,
    ready_after: float = 90.0,
) -> Simulated:
    """One startup: `intervals` decode lines after ready, with the prefill lines between them.

    `load` is the workload's starting arrival rate (requests per decode step); it drifts.
    """
    out: list[tuple[float, str, str]] = []
    ready = started + ready_after
    now = ready + rng.uniform(5, 60)  # first requests arrive a while after ready
    last_decode = started + 60.0  # the decode timer starts at scheduler init
    heap: list[tuple[int, int]] = []  # (finish step, id)
    ctx: dict[int, int] = {}
    step_no = 0
    next_id = 0
    level = load  # arrivals per step; drifts slowly
    tokens_since = 0
    prev_line_bs = 0

    def admit(n: int) -> float:
        nonlocal next_id
        new_tokens = 0
        for _ in range(n):
            prompt = rng.randint(300, 6000)
            out_len = rng.randint(400, 3000)
            ctx[next_id] = prompt
            heapq.heappush(heap, (step_no + out_len, next_id))
            next_id += 1
            new_tokens += prompt
        line = (
            f"Prefill batch, #new-seq: {n}, #new-token: {new_tokens}, #cached-token: 0, "
            f"token usage: 0.10, #running-req: {len(ctx)}, #queue-req: 0, "
            f"input throughput (token/s): 1000.00, cuda graph: True"
        )
        out.append((now, PREFILL_RULE, line))
        return new_tokens * 2.5e-5 / model.speed  # prefill time inside the decode interval

    admit(max(1, int(level * 1500)))
    for _ in range(intervals):
        elapsed = 0.0
        if rng.random() < 0.03:  # idle gap: everything finishes, later new requests arrive
            heap.clear()
            ctx.clear()
            elapsed += rng.uniform(2, 60)
            now += elapsed
            elapsed += admit(max(1, int(level * 1500)))
        level = min(0.03, max(0.004, level * math.exp(rng.gauss(0, 0.05))))
        steps = 0
        while steps < 40:
            if not ctx:
                elapsed += admit(1)
            if rng.random() < level:
                elapsed += admit(1 + (rng.random() < 0.2))
            bs = len(ctx)
            mean_ctx = sum(ctx.values()) / bs
            elapsed += model.step(bs, mean_ctx, now + elapsed - ready)
            for rid in ctx:
                ctx[rid] += 1
            tokens_since += bs
            step_no += 1
            steps += 1
            while heap and heap[0][0] <= step_no:
                _, rid = heapq.heappop(heap)
                ctx.pop(rid, None)
        elapsed *= math.exp(rng.gauss(0, model.noise))
        now += elapsed
        bs = len(ctx) or prev_line_bs
        total_ctx = sum(ctx.values())
        gen = tokens_since / (now - last_decode)
        last_decode = now
        tokens_since = 0
        prev_line_bs = bs
        line = (
            f"Decode batch, #running-req: {bs}, #token: {total_ctx}, token usage: 0.20, "
            f"cuda graph: True, gen throughput (token/s): {gen:.2f}, #queue-req: 0"
        )
        out.append((now, DECODE_RULE, line))
    return Simulated(started, ready, out)


CAPTURE_LINE = f"Capture cuda graph bs {list(CAPTURED)}"


def simulate(model: Model, intervals: int, rng: random.Random, load: float) -> DecodeState:
    """`simulate_lines` fed to a DecodeState, as the startup tracker feeds it."""
    sim = simulate_lines(model, intervals, rng, load)
    state = DecodeState()
    state.observe("cuda_graph_capture_bs", CAPTURE_LINE, sim.started, None, 0)
    for ts, rule, body in sim.lines:
        state.observe(rule, "[ts TP0] " + body, ts, sim.ready, SETTINGS.warmup_seconds)
    return state


def run_scenario(
    name: str, runs: int, speed: float, intervals: int, seed: int, base_intervals: int = 500
) -> dict[str, Any]:
    verdicts: dict[str, int] = {}
    enough: dict[str, int] = {}  # verdicts of the runs with >= 30 like-load clean samples
    errors: list[float] = []
    clean: list[int] = []
    for i in range(runs):
        rng = random.Random(f"{seed}:{name}:{i}")
        noise = rng.uniform(0.02, 0.07)
        load = rng.uniform(0.006, 0.025)  # one workload for both startups: like load
        base = simulate(Model(noise=noise), base_intervals, rng, load)
        cur = simulate(Model(noise=noise, speed=speed), intervals, rng, load)
        result = compare_decode(cur.summary(), base.summary(), SETTINGS)
        verdicts[result["verdict"]] = verdicts.get(result["verdict"], 0) + 1
        clean.append(cur.counts.get("clean", 0))
        if result["samples"] >= 30:
            enough[result["verdict"]] = enough.get(result["verdict"], 0) + 1
        if result["ratio"] is not None:
            errors.append(abs(result["ratio"] - speed))
    return {
        "runs": runs,
        "speed": speed,
        "intervals": intervals,
        "verdicts": verdicts,
        "verdicts_with_30_like_samples": enough,
        "median_clean_samples": statistics.median(clean),
        "min_clean_samples": min(clean),
        "ratio_errors": len(errors),
        "median_abs_ratio_error": round(statistics.median(errors), 4) if errors else None,
    }


def measure(runs: int, seed: int = 11) -> dict[str, Any]:
    started = time.perf_counter()
    no_change = run_scenario("no_change", runs, 1.0, 500, seed)
    slowdown = run_scenario("slowdown_15", runs, 0.85, 300, seed)
    few = run_scenario("few_samples", runs, 0.85, 90, seed)
    few_same = run_scenario("few_samples_no_change", runs, 1.0, 90, seed)
    errors = [
        s["median_abs_ratio_error"]
        for s in (no_change, slowdown)
        if s["median_abs_ratio_error"] is not None
    ]
    wrong_nc = no_change["verdicts"].get("regressed", 0) + no_change["verdicts"].get("improved", 0)
    results = {
        "no_change": no_change,
        "slowdown_15": slowdown,
        "few_samples": few,
        "few_samples_no_change": few_same,
        "no_change_false_verdict": round(wrong_nc / runs, 4),
        "slowdown_regressed_all_runs": round(slowdown["verdicts"].get("regressed", 0) / runs, 4),
        "slowdown_regressed": round(
            slowdown["verdicts_with_30_like_samples"].get("regressed", 0)
            / max(1, sum(slowdown["verdicts_with_30_like_samples"].values())),
            4,
        ),
        "ratio_error_median": max(errors) if errors else None,
        "few_samples_wrong_direction": round(
            (
                few["verdicts"].get("improved", 0)
                + few_same["verdicts"].get("improved", 0)
                + few_same["verdicts"].get("regressed", 0)
            )
            / (2 * runs),
            4,
        ),
        "seconds": round(time.perf_counter() - started, 1),
        "runs": runs,
    }
    results["passed"] = passed(results)
    return results


def passed(r: dict[str, Any]) -> bool:
    return bool(
        r["no_change_false_verdict"] <= TARGETS["no_change_false_verdict_max"]
        and r["slowdown_regressed"] >= TARGETS["slowdown_regressed_min"]
        and r["ratio_error_median"] is not None
        and r["ratio_error_median"] <= TARGETS["ratio_error_median_max"]
        and r["few_samples_wrong_direction"] <= TARGETS["few_samples_wrong_direction_max"]
        and sum(r["slowdown_15"]["verdicts_with_30_like_samples"].values()) >= 0.8 * r["runs"]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.decode", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="30 runs per scenario")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)
    runs = args.runs or (30 if args.smoke else 200)
    results = measure(runs, args.seed)
    out = RESULTS / ("decode-smoke.json" if args.smoke else "decode.json")
    out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    json.dump(results, sys.stdout, indent=2, sort_keys=True)
    print()
    return 0 if results["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
