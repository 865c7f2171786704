"""Decode throughput at like load (startups/decode_samples.py, compare/decode_stats.py): line parsing, the clean-interval
filters, the statistics against hand-computed values, and the detector's error rates on the
simulation harness (bench/decode.py, seeded)."""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import decode as sim  # noqa: E402
from sglang_sentinel.compare import describe, phase_durations  # noqa: E402
from sglang_sentinel.compare.decode_stats import (  # noqa: E402
    compare_decode,
    hodges_lehmann,
    mann_whitney_z,
)
from sglang_sentinel.startups.decode_samples import (  # noqa: E402
    DecodeState,
    graph_size,
    parse_capture_bs,
    parse_decode_line,
)

READY = 1000.0


def decode(
    bs: int, gen: float, *, graph: str = "True", tokens: int | None = None, dp: str = ""
) -> str:
    tok = tokens if tokens is not None else bs * 2000
    return (
        f"[2026-03-09 21:41:22{dp} TP0] Decode batch, #running-req: {bs}, #token: {tok}, "
        f"token usage: 0.10, cuda graph: {graph}, gen throughput (token/s): {gen:.2f}, #queue-req: 0"
    )


PREFILL = (
    "[2026-03-09 21:41:17 TP0] Prefill batch, #new-seq: 1, #new-token: 8192, #cached-token: 0, "
    "token usage: 0.02, #running-req: 2, #queue-req: 1, input throughput (token/s): 6480.12, "
    "cuda graph: True"
)


@pytest.mark.parametrize(
    ("line", "running", "tokens", "graph", "gen", "accept"),
    [
        # 0.5.9 hybrid SSM: `#full token`
        (
            "[2026-03-09 21:41:22 TP0] Decode batch, #running-req: 3, #full token: 13520, full token usage: 0.03, mamba num: 6, mamba usage: 0.04, cuda graph: True, gen throughput (token/s): 156.84, #queue-req: 0",
            3,
            13520,
            True,
            156.84,
            None,
        ),
        # speculative decoding
        (
            "[2026-03-09 21:31:15.123 TP0] Decode batch, #running-req: 12, #token: 40960, token usage: 0.08, accept len: 2.71, accept rate: 0.68, cuda graph: True, gen throughput (token/s): 1024.00, #queue-req: 2",
            12,
            40960,
            True,
            1024.0,
            2.71,
        ),
        # 0.5.3 .. 0.5.7: period, cpu graph, trailing comma
        (
            "Decode batch. #running-req: 2, #token: 300, token usage: 0.00, cpu graph: False, gen throughput (token/s): 20.00, #queue-req: 0, ",
            2,
            300,
            False,
            20.0,
            None,
        ),
        # 0.4.x: no graph field at all (unknown, not False)
        (
            "[2025-02-14 09:20:05 TP0] Decode batch. #running-req: 1, #token: 41, token usage: 0.00, gen throughput (token/s): 35.47, #queue-req: 0",
            1,
            41,
            None,
            35.47,
            None,
        ),
    ],
)
def test_decode_line_fields_in_every_layout(
    line: str, running: int, tokens: int, graph: bool | None, gen: float, accept: float | None
) -> None:
    parsed = parse_decode_line(line)
    assert parsed is not None
    assert (parsed.running, parsed.tokens, parsed.graph, parsed.gen, parsed.accept_len) == (
        running,
        tokens,
        graph,
        gen,
        accept,
    )


def test_capture_bs_lists_of_both_eras() -> None:
    assert parse_capture_bs("Capture cuda graph bs [1, 2, 4, 8, 12, 16, 24, 32]") == (
        1,
        2,
        4,
        8,
        12,
        16,
        24,
        32,
    )
    assert parse_capture_bs(
        "Capture target decode CUDA graph end. bs=[1, 2, 4, 26], elapsed=8.12 s, mem usage=0.55 GB"
    ) == (1, 2, 4, 26)
    assert graph_size(17, (1, 2, 4, 8, 16, 24, 32)) == 24
    assert graph_size(33, (1, 2, 4, 8, 16, 24, 32)) is None


def feed(
    state: DecodeState, lines: list[str], ts: float = READY + 400, warmup: float = 300
) -> None:
    for i, line in enumerate(lines):
        rule = "decode_batch" if "Decode batch" in line else "prefill_batch"
        state.observe(rule, line, ts + i, READY, warmup)


def test_only_clean_intervals_become_samples() -> None:
    """First line, prefill inside, graph off, batch drift and warm-up are each dropped."""
    state = DecodeState()
    state.observe("cuda_graph_capture_bs", "Capture cuda graph bs [8, 16, 32]", 0, None, 0)
    feed(
        state,
        [
            decode(16, 800),  # first line: timer started at scheduler init
            decode(16, 810),  # clean
            PREFILL,
            decode(16, 600),  # prefill inside the interval
            decode(16, 300, graph="False"),  # eager step
            decode(10, 700),  # batch 16 -> 10: drift beyond 25 %
            decode(10, 500),  # clean
            decode(30, 900),  # drift
            decode(31, 905),  # clean (|31-30| <= max(1, 7.75))
        ],
    )
    assert state.counts == {
        "decode_lines": 8,
        "graph_off_lines": 1,
        "dropped_first": 1,
        "clean": 3,
        "dropped_prefill": 1,
        "dropped_no_graph": 1,
        "dropped_batch_drift": 2,
    }
    # bucketed by the captured size each batch pads to, and the context octave (2000/req)
    assert {k: len(v) for k, v in state.buckets.items()} == {
        "bs16/ctx1024": 2,
        "bs32/ctx1024": 1,
    }
    rate, accept, gen, pad, ctx = state.buckets["bs32/ctx1024"][0]
    assert (rate, accept, gen, pad) == (round(905 / 30.5, 3), 0.0, 905.0, 32.0)
    assert ctx == 2000.0
    early = DecodeState()
    feed(early, [decode(16, 800), decode(16, 810)], ts=READY + 10)
    assert early.counts["dropped_warmup"] == 1 and "clean" not in early.counts
    # DP ranks have their own intervals: DP1's prefill does not dirty DP0's interval.
    dp = DecodeState()
    feed(dp, [decode(8, 400, dp=" DP0"), decode(8, 400, dp=" DP1")])
    dp.observe("prefill_batch", PREFILL.replace(" TP0]", " DP1 TP0]"), READY + 500, READY, 300)
    feed(dp, [decode(8, 410, dp=" DP0"), decode(8, 410, dp=" DP1")])
    assert dp.counts["clean"] == 1 and dp.counts["dropped_prefill"] == 1


def test_samples_per_bucket_are_bounded_and_survive_json() -> None:
    state = DecodeState()
    feed(state, [decode(8, 400 + i % 7) for i in range(500)])
    assert [len(v) for v in state.buckets.values()] == [64]
    again = DecodeState.from_dict(state.to_dict())
    assert again.to_dict() == state.to_dict()
    # The interval open at the save continues after the restore (no new "first" line).
    feed(again, [decode(8, 401)], ts=READY + 2000)
    assert again.counts["clean"] == state.counts["clean"] + 1


def test_a_summary_shares_the_samples_and_stays_as_it_was() -> None:
    """A snapshot does not copy each sample (a held startup's samples took twice their size),
    and what it holds does not change as the state goes on and drops its oldest samples."""
    state = DecodeState()
    feed(state, [decode(8, 400 + i % 7) for i in range(65)])
    before = state.summary()
    frozen = json.dumps(before)
    (samples,) = before["buckets"].values()
    assert all(a is b for a, b in zip(samples, state.buckets["bs8/ctx1024"], strict=True))
    feed(state, [decode(8, 450 + i % 5) for i in range(70)], ts=READY + 2000)
    assert json.dumps(before) == frozen
    assert json.dumps(state.summary()) != frozen


def test_mann_whitney_and_hodges_lehmann_against_hand_values() -> None:
    x, y = [1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]
    # U(x) = 0, mean 8, var = 16*9/12 = 12, continuity 0.5: z = (0 - 8 + 0.5) / sqrt(12)
    assert mann_whitney_z(x, y) == pytest.approx(-7.5 / math.sqrt(12))
    assert mann_whitney_z(y, x) == pytest.approx(7.5 / math.sqrt(12))
    assert mann_whitney_z([1.0, 1.0], [1.0, 1.0]) == 0.0
    assert hodges_lehmann(x, y) == -4.0  # differences -7..-1, median -4
    assert hodges_lehmann([0.0, 10.0], [1.0]) == 4.0


def synthetic(rate: float, n: int, seed: int, noise: float = 0.03) -> dict[str, Any]:
    rng = random.Random(seed)
    samples = []
    for i in range(n):
        pad = (16, 24, 32)[i % 3]
        ctx = 1000.0 + 50 * (i % 20)
        r = rate * (1 - pad / 200) * (1 - ctx / 40000) * math.exp(rng.gauss(0, noise))
        samples.append([r, 0.0, r * pad, float(pad), ctx])
    return {"buckets": {"all": samples}, "counts": {"decode_lines": n}}


def test_verdicts_and_the_null_ratio() -> None:
    base = synthetic(50, 150, 1)
    slow = compare_decode(synthetic(40, 80, 2), base)
    assert slow["verdict"] == "regressed"
    assert slow["ratio"] == pytest.approx(0.8, abs=0.02)
    fast = compare_decode(synthetic(60, 80, 3), base)
    assert fast["verdict"] == "improved" and fast["ratio"] == pytest.approx(1.2, abs=0.03)
    same = compare_decode(synthetic(50, 80, 4), base)
    assert same["verdict"] == "unchanged" and same["ratio"] == pytest.approx(1.0, abs=0.02)
    few = compare_decode(synthetic(40, 12, 5), base)
    assert few["verdict"] == "inconclusive" and few["ratio"] is None
    assert few["estimate"] == pytest.approx(0.8, abs=0.05)
    none = compare_decode(synthetic(40, 80, 6), None)
    assert none["verdict"] == "inconclusive" and none["ratio"] is None and none["samples"] == 0
    assert describe(slow).startswith("decode at like load ")
    assert describe(slow) == (
        f"decode at like load {slow['baseline_tps']:.0f} → {slow['current_tps']:.0f} tok/s "
        f"(−{(1 - slow['current_tps'] / slow['baseline_tps']) * 100:.0f} %), 1 bucket, "
        "80 samples: regressed"
    )


def test_speculative_acceptance_is_told_apart_from_step_time() -> None:
    """Same verify-step rate, accept length 3.0 -> 2.4: the token rate falls by acceptance only."""

    def spec(accept: float, seed: int) -> dict[str, Any]:
        rng = random.Random(seed)
        samples = []
        for i in range(90):
            a = accept * math.exp(rng.gauss(0, 0.02))
            r = 20 * a * math.exp(rng.gauss(0, 0.02))
            samples.append([r, a, r * 16, 16.0, 2000.0 + i])
        return {"buckets": {"b": samples}}

    result = compare_decode(spec(2.4, 1), spec(3.0, 2))
    assert result["verdict"] == "regressed"
    assert result["speculative"]["accept_len_ratio"] == pytest.approx(0.8, abs=0.02)
    assert result["speculative"]["step_rate_ratio"] == pytest.approx(1.0, abs=0.02)


def test_phase_durations_from_first_lines() -> None:
    phases = {
        "load_begin": 100.0,
        "load_end": 172.0,
        "pool_end": 175.5,
        "capture_begin": 176.0,
        "capture_end": 187.25,
        "ready": 200.0,
    }
    assert phase_durations(phases, 90.0) == {
        "weight_load": 72.0,
        "kv_allocation": 3.5,
        "graph_capture": 11.25,
        "time_to_ready": 110.0,
    }


@pytest.mark.heavy
def test_simulation_meets_the_detector_targets() -> None:
    """Seeded, 60 runs per scenario: no change -> no directional verdict; 15 % slower ->
    regressed in >= 95 % of the runs with >= 30 like-load samples; median |ratio error| <= 0.03;
    short runs -> never the wrong direction."""
    r = sim.measure(60, seed=7)
    assert r["no_change_false_verdict"] == 0.0
    assert r["slowdown_regressed"] >= 0.95
    assert r["ratio_error_median"] <= 0.03
    assert r["few_samples_wrong_direction"] == 0.0
    assert r["passed"], r


def test_impossible_values_are_dropped_not_raised() -> None:
    """inf / nan throughput, a 400-digit #token: the interval is dropped, nothing raises."""
    state = DecodeState()
    lines = [
        decode(8, 400),
        decode(8, 400).replace("400.00", "inf"),
        decode(8, 400).replace("400.00", "nan"),
        decode(8, 400, tokens=int("9" * 400)),
        decode(8, 401),
    ]
    feed(state, lines)
    assert state.counts["dropped_invalid"] == 3 and state.counts["clean"] == 1


def test_a_400_digit_batch_size_is_dropped_not_raised() -> None:
    """A 400-digit #running-req, and the ordinary line after it: the batch drift between them is
    compared in ints (compiled, an int compared with a float overflows; pure, 0.25 * it did)."""
    state = DecodeState()
    huge = int("9" * 400)
    feed(state, [decode(8, 400), decode(huge, 400), decode(8, 400), decode(8, 401)])
    assert state.counts["dropped_batch_drift"] == 2 and state.counts["clean"] == 1
