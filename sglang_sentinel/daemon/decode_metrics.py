"""The decode-at-like-load and startup-phase metric families (names documented in README).

Built at scrape time from each unit's latest comparison, like every other family; label values
are bounded: `verdict` has four values, `bucket` at most MAX_BUCKET_SERIES per unit, `phase` four.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric

from ..compare import phase_durations
from ..facts import metric_of
from ..model import Comparison, StartupRecord

PREFIX = "sglang_sentinel_"
VERDICTS = ("regressed", "improved", "unchanged", "inconclusive")
PHASES = ("weight_load", "kv_allocation", "graph_capture", "time_to_ready")
MAX_BUCKET_SERIES = 8


class _View(Protocol):
    @property
    def unit(self) -> str: ...

    @property
    def comparison(self) -> Comparison | None: ...


def decode_metrics(views: Sequence[_View]) -> Iterator[Metric]:
    """Every decode / phase family for the units' latest comparisons."""
    ratio = GaugeMetricFamily(
        PREFIX + "decode_throughput_ratio",
        "Decode throughput at like load, current / baseline (absent while inconclusive).",
        labels=["unit"],
    )
    verdict = GaugeMetricFamily(
        PREFIX + "decode_verdict",
        "1 for the decode comparison's current verdict, 0 for the others.",
        labels=["unit", "verdict"],
    )
    samples = GaugeMetricFamily(
        PREFIX + "decode_samples",
        "Clean decode samples at like load counted by the comparison, per side.",
        labels=["unit", "side"],
    )
    median = GaugeMetricFamily(
        PREFIX + "decode_bucket_median_tokens_per_second",
        "Median gen throughput of a like-load bucket (captured graph batch / context octave).",
        labels=["unit", "bucket"],
    )
    base_median = GaugeMetricFamily(
        PREFIX + "baseline_decode_bucket_median_tokens_per_second",
        "Baseline startup's median gen throughput of the same bucket.",
        labels=["unit", "bucket"],
    )
    graph_off = GaugeMetricFamily(
        PREFIX + "decode_without_cuda_graph_ratio",
        "Share of decode lines with `cuda graph: False` in the latest startup.",
        labels=["unit"],
    )
    base_graph_off = GaugeMetricFamily(
        PREFIX + "baseline_decode_without_cuda_graph_ratio",
        "Baseline startup's share of decode lines with `cuda graph: False`.",
        labels=["unit"],
    )
    retractions = GaugeMetricFamily(
        PREFIX + "decode_retractions",
        "`KV cache pool is full. Retract requests.` lines in the latest startup.",
        labels=["unit"],
    )
    oom = GaugeMetricFamily(
        PREFIX + "decode_out_of_memory_lines",
        "`Decode/Prefill out of memory` lines in the latest startup.",
        labels=["unit"],
    )
    max_bs_metric = metric_of("cuda_graph_max_bs")  # facts.py
    max_bs = GaugeMetricFamily(PREFIX + max_bs_metric.name, max_bs_metric.help, labels=["unit"])
    base_max_bs = GaugeMetricFamily(
        PREFIX + "baseline_" + max_bs_metric.name, max_bs_metric.baseline_text, labels=["unit"]
    )
    phase = GaugeMetricFamily(
        PREFIX + "startup_phase_seconds",
        "Startup phase durations from the first line of each phase.",
        labels=["unit", "phase"],
    )
    base_phase = GaugeMetricFamily(
        PREFIX + "baseline_startup_phase_seconds",
        "Baseline startup's phase durations.",
        labels=["unit", "phase"],
    )
    for view in views:
        c = view.comparison
        if c is None:
            continue
        unit = view.unit
        d: dict[str, Any] = dict(c.decode)
        if d:
            if d.get("ratio") is not None:
                ratio.add_metric([unit], float(d["ratio"]))
            for v in VERDICTS:
                verdict.add_metric([unit, v], 1.0 if d.get("verdict") == v else 0.0)
            samples.add_metric([unit, "current"], float(d.get("samples", 0)))
            samples.add_metric([unit, "baseline"], float(d.get("baseline_samples", 0)))
            top = sorted(
                d.get("buckets", ()), key=lambda b: -min(b["samples"], b["baseline_samples"])
            )
            for b in top[:MAX_BUCKET_SERIES]:
                median.add_metric([unit, b["bucket"]], float(b["median_tps"]))
                base_median.add_metric([unit, b["bucket"]], float(b["baseline_median_tps"]))
            if d.get("graph_off_share") is not None:
                graph_off.add_metric([unit], float(d["graph_off_share"]))
            if d.get("baseline_graph_off_share") is not None:
                base_graph_off.add_metric([unit], float(d["baseline_graph_off_share"]))
        r = c.record
        counts = r.decode.get("counts", {})
        retractions.add_metric([unit], float(counts.get("retractions", 0)))
        oom.add_metric([unit], float(counts.get("oom_lines", 0)))
        _add_int(max_bs, unit, r)
        if c.baseline is not None:
            _add_int(base_max_bs, unit, c.baseline)
        for name, secs in phase_durations(r.decode.get("phases", {}), r.started_at).items():
            phase.add_metric([unit, name], secs)
        if c.baseline is not None:
            b = c.baseline
            for name, secs in phase_durations(b.decode.get("phases", {}), b.started_at).items():
                base_phase.add_metric([unit, name], secs)
    yield from (
        ratio,
        verdict,
        samples,
        median,
        base_median,
        graph_off,
        base_graph_off,
        retractions,
        oom,
        max_bs,
        base_max_bs,
        phase,
        base_phase,
    )


def _add_int(family: GaugeMetricFamily, unit: str, record: StartupRecord) -> None:
    value = record.fact("cuda_graph_max_bs")
    if isinstance(value, int) and not isinstance(value, bool):
        family.add_metric([unit], float(value))
