"""The decode-at-like-load and startup-phase metric families (declared in families.py).

Built at scrape time from each unit's latest comparison, like every other family; label values
are bounded: `verdict` has four values, `bucket` at most MAX_BUCKET_SERIES per unit, `phase` four.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric

from ..compare import phase_durations
from ..model import Comparison, StartupRecord
from .families import gauge

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
    ratio = gauge("decode_throughput_ratio")
    verdict = gauge("decode_verdict")
    samples = gauge("decode_samples")
    median = gauge("decode_bucket_median_tokens_per_second")
    base_median = gauge("baseline_decode_bucket_median_tokens_per_second")
    graph_off = gauge("decode_without_cuda_graph_ratio")
    base_graph_off = gauge("baseline_decode_without_cuda_graph_ratio")
    retractions = gauge("decode_retractions")
    oom = gauge("decode_out_of_memory_lines")
    max_bs = gauge("cuda_graph_max_batch_size")
    base_max_bs = gauge("baseline_cuda_graph_max_batch_size")
    phase = gauge("startup_phase_seconds")
    base_phase = gauge("baseline_startup_phase_seconds")
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


def _add_int(out: GaugeMetricFamily, unit: str, record: StartupRecord) -> None:
    value = record.fact("cuda_graph_max_bs")
    if isinstance(value, int) and not isinstance(value, bool):
        out.add_metric([unit], float(value))
