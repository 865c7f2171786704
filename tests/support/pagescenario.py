"""A journal with three units for the status page and the Grafana dashboard tests.

- the seed fixture's `sglang-qwen.service`: a baseline startup, then a regressed one (critical);
- an OK unit: four startups (ready, ready, failed, ready) with decode batch lines after ready;
- a failed unit: one ready startup, then a failed one whose error line carries HTML and a URL
  (log-derived strings are hostile; the page must show them as text and load nothing);
- a decoding unit: a baseline and a restart that decodes 20 % slower at like load (the decode
  benchmark's simulated batch lines, bench/decode.py), runs some decode lines eager and logs a
  retraction;
- a stalled unit: one ready startup, then one that began months before the test runs and never
  became ready or failed (startup_stalled, judged at the time the page or metrics are read).

Unit names carry a per-run token so nothing here can be mistaken for a real service.
"""

from __future__ import annotations

import random
import secrets
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import journaltools

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for bench/
from bench import decode as sim

SEED_UNIT = "sglang-qwen.service"
SEED_BASELINE = "6a1f0c2e9b7d4e3f8a5b1c0d2e4f6a8b"
SEED_REGRESSED = "c37e91d04a5b4f6e9d8c7b6a5f4e3d2c"
HOSTILE = "<script>document.title='pwned'</script><img src=http://203.0.113.9/x.png> & \"quoted\""


@dataclass(frozen=True)
class Scenario:
    journal_dir: Path
    seed_unit: str
    ok_unit: str
    failed_unit: str
    stalled_unit: str
    decode_unit: str

    @property
    def units(self) -> list[str]:
        return [
            self.seed_unit,
            self.ok_unit,
            self.failed_unit,
            self.stalled_unit,
            self.decode_unit,
        ]


def _ready(
    unit: str, day: str, mrr: int, kv: int, *, batches: bool = False
) -> journaltools.StartupScript:
    s = journaltools.StartupScript(
        unit=unit, start=f"{day} 10:00:00", boot_at="2026-03-10 00:00:00", pid=5000 + int(day[-2:])
    )
    s.started(f"{day} 10:00:00")
    s.line(f"[{day} 10:00:05 TP0] Load weight begin. avail mem=76.47 GB")
    s.line(
        f"[{day} 10:00:20 TP0] Load weight end. elapsed=12.50 s, type=Qwen3ForCausalLM, "
        "dtype=torch.bfloat16, avail mem=61.20 GB, mem usage=15.27 GB."
    )
    s.line(
        f"[{day} 10:00:30 TP0] KV Cache is allocated. #tokens: {kv}, K size: 10.00 GB, "
        "V size: 10.00 GB"
    )
    s.line(
        f"[{day} 10:00:35 TP0] Capture cuda graph begin. This can take up to several minutes. "
        "avail mem=22.81 GB"
    )
    s.line(
        f"[{day} 10:00:45 TP0] Capture cuda graph end. Time elapsed: 9.80 s. mem usage=0.74 GB. "
        "avail mem=22.07 GB."
    )
    s.line(
        f"[{day} 10:00:50 TP0] max_total_num_tokens={kv}, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={mrr}, "
        "context_len=32768, available_gpu_mem=10.00 GB"
    )
    s.line(f"[{day} 10:00:55] The server is fired up and ready to roll!")
    if batches:
        for i, tput in enumerate((148.20, 151.63, 156.84)):
            s.line(
                f"[{day} 10:0{1 + i}:00 TP0] Decode batch, #running-req: 3, #token: 13520, "
                f"token usage: 0.03, cuda graph: True, gen throughput (token/s): {tput}, "
                "#queue-req: 0"
            )
    return s


def _failed(unit: str, day: str, reason: str) -> journaltools.StartupScript:
    s = journaltools.StartupScript(
        unit=unit, start=f"{day} 12:00:00", boot_at="2026-03-10 00:00:00", pid=6000 + int(day[-2:])
    )
    s.started(f"{day} 12:00:00")
    s.line(f"[{day} 12:00:20 TP0] Scheduler hit an exception: {reason}")
    s.process_exited(1, when=f"{day} 12:00:21")
    s.failed("exit-code", when=f"{day} 12:00:21")
    return s


def _hung(unit: str, day: str) -> journaltools.StartupScript:
    s = journaltools.StartupScript(
        unit=unit, start=f"{day} 09:00:00", boot_at="2026-03-10 00:00:00", pid=7000 + int(day[-2:])
    )
    s.started(f"{day} 09:00:00")
    s.line(f"[{day} 09:00:05 TP0] Load weight begin. avail mem=76.47 GB")
    return s


def _stamp(ts: float, ranks: str = " TP0") -> str:
    return time.strftime("[%Y-%m-%d %H:%M:%S", time.gmtime(ts)) + f"{ranks}] "


def _decoding(
    unit: str, start: float, *, speed: float, eager_every: int, seed: int
) -> journaltools.StartupScript:
    """A ready startup with every startup phase and 300 simulated decode intervals after it."""
    at = datetime.fromtimestamp(start, timezone.utc)
    s = journaltools.StartupScript(unit=unit, start=at, boot_at="2026-03-10 00:00:00")
    s.started(at)
    t = start + 10
    s.line(_stamp(t) + "Load weight begin. avail mem=78.10 GB")
    t += 60
    s.line(
        _stamp(t) + "Load weight end. elapsed=60.00 s, type=LlamaForCausalLM, "
        "dtype=torch.bfloat16, avail mem=63.20 GB, mem usage=14.99 GB."
    )
    s.line(
        _stamp(t + 2) + "KV Cache is allocated. #tokens: 500000, K size: 10.00 GB, V size: 10.00 GB"
    )
    s.line(_stamp(t + 3) + "Memory pool end. avail mem=20.00 GB")
    s.line(
        _stamp(t + 4)
        + "Capture cuda graph begin. This can take up to several minutes. avail mem=20.00 GB"
    )
    s.line(_stamp(t + 4) + sim.CAPTURE_LINE)
    s.line(
        _stamp(t + 14)
        + "Capture cuda graph end. Time elapsed: 10.00 s. mem usage=0.50 GB. avail mem=19.50 GB."
    )
    s.line(
        _stamp(t + 15) + "max_total_num_tokens=500000, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=64, context_len=32768, "
        "available_gpu_mem=19.50 GB"
    )
    ready_after = t + 20 - start
    s.line(_stamp(start + ready_after, ranks="") + "The server is fired up and ready to roll!")
    lines = sim.simulate_lines(
        sim.Model(speed=speed, noise=0.04),
        300,
        random.Random(seed),
        0.012,
        started=start,
        ready_after=ready_after,
    )
    decodes = 0
    for i, (ts, rule, body) in enumerate(lines.lines):
        if rule == "decode_batch":
            decodes += 1
            if eager_every and decodes % eager_every == 0:
                body = body.replace("cuda graph: True", "cuda graph: False")
        s.line(_stamp(ts) + body, when=datetime.fromtimestamp(ts, timezone.utc))
        if i == 150:
            s.line(
                _stamp(ts) + "KV cache pool is full. Retract requests. #retracted_reqs: 2, "
                "#new_tokens_gained: 646, #new_token_ratio: 0.0980 -> 0.3487"
            )
    return s


def build(tmp_path: Path) -> Scenario:
    """Write the export files and turn them, with the seed fixture's, into one journal."""
    token = secrets.token_hex(4)
    ok_unit = f"sglang-pages-ok-{token}.service"
    failed_unit = f"sglang-pages-failed-{token}.service"
    stalled_unit = f"sglang-pages-stalled-{token}.service"
    decode_unit = f"sglang-pages-decode-{token}.service"
    t0 = datetime(2026, 3, 17, 8, 0, tzinfo=timezone.utc).timestamp()
    scripts = [
        _ready(ok_unit, "2026-03-11", 64, 400_000),
        _ready(ok_unit, "2026-03-12", 64, 400_000),
        _failed(ok_unit, "2026-03-13", "torch.OutOfMemoryError: CUDA out of memory."),
        _ready(ok_unit, "2026-03-14", 64, 400_000, batches=True),
        _ready(failed_unit, "2026-03-11", 32, 200_000),
        _failed(failed_unit, "2026-03-15", HOSTILE),
        _ready(stalled_unit, "2026-03-12", 16, 100_000),
        _hung(stalled_unit, "2026-03-16"),
        _decoding(decode_unit, t0, speed=1.0, eager_every=0, seed=1),
        _decoding(decode_unit, t0 + 6 * 3600, speed=0.8, eager_every=4, seed=2),
    ]
    exports = [journaltools.seed_fixture_dir() / "journal.export"]
    for i, script in enumerate(scripts):
        exports.append(script.write(tmp_path / f"page-{i}.export"))
    journal_dir = journaltools.build_journal(exports, tmp_path / "page-journal", "pages")
    return Scenario(journal_dir, SEED_UNIT, ok_unit, failed_unit, stalled_unit, decode_unit)
