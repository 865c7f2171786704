"""The benchmark journal: N entries written with systemd-journal-remote, several files, cached.

About 75% of the entries come from one SGLang unit: a few complete startups (full server_args
line, the TP0 summary line, per-rank KV/weight lines, MoE config warnings, piecewise CUDA graph
captured or disabled) and, after each, steady-state Prefill/Decode batch lines and uvicorn access
lines in the layout of that startup's SGLang version (sglang-log-facts.md §8). The other 25% come
from other units (sshd, cron, containerd, a second SGLang unit, the kernel, PID 1 about sessions).

A second shape, "mixed" (`build(..., shape="mixed")`), is there so that the scan is not tuned to
one generator: the watched unit is 40 % of the entries, interleaved line by line with three
other SGLang servers (0.5.9 and 0.5.23 layouts) besides the system noise, and it starts eleven
times, mostly as 0.5.23 with its own capacities.

Speed matters at 1M entries, so entries are written as Journal Export Format bytes directly from
per-process header templates (no dict per entry), each output file is one journal-remote run fed
on stdin while Python produces the next chunk, and the result is cached under bench/cache keyed
by GENERATOR_VERSION and N. The manifest (written last, so a half-built cache is never used)
records the mix and what each startup must yield, for the tests and the mtail cross-check.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Bump when the generated content changes: it is part of the cache key.
GENERATOR_VERSION = 4
UNIT = "sglang-bench.service"
OTHER_SGLANG_UNIT = "sglang-embed.service"
OTHER_SHARE = 0.25
ENTRIES_PER_FILE = 200_000  # journald's default rotation gives files of this order
JOURNAL_REMOTE = Path("/lib/systemd/systemd-journal-remote")
CACHE_DIR = Path(__file__).resolve().parent / "cache"
SERVER_ARGS = Path(__file__).resolve().parent / "data" / "server_args_0.5.9.txt"

BOOT_ID = "6a1c2d3e4f5061728394a5b6c7d8e9f0"
MACHINE_ID = "3d1219c7c4c5404aaa1f6d2a48adfda4"
HOSTNAME = "llm-bench"
START_US = 1_773_100_800_000_000  # 2026-03-10 00:00:00 UTC
BOOT_US = START_US - 3_600_000_000
MEAN_GAP_US = 12_000  # ~80 entries/s overall: a busy GPU host

UNIT_STARTING = "7d4958e842da4a758f6c1cdc7b36dcc5"
UNIT_STARTED = "39f53479d3a045ac8e11786248231fbf"
UNIT_STOPPING = "de5b426a63be47a7b6ac3eaac82e2f6f"
UNIT_STOPPED = "9d1aaa27d60140bd96365438aad20286"
UNIT_SUCCESS = "7ad2d189f7e94e70a38c781354912448"

MOE_DIR = (
    "/opt/sglang/.venv/lib/python3.12/site-packages/sglang/srt/layers/moe/fused_moe_triton/"
    "configs/triton_3_5_1/"
)
MOE_HINT = (
    ", you can create them with "
    "https://github.com/sgl-project/sglang/tree/main/benchmark/kernels/fused_moe_triton"
)


@dataclass(frozen=True)
class Version:
    """One SGLang release's startup facts and batch-line layout."""

    name: str
    model: str
    tp: int
    max_running_requests: int
    kv_tokens: int
    piecewise: bool | None  # captured, disabled (with a line), or None: not logged at all
    moe_missing: tuple[str, ...]


# Four startups, one per layout family; the 0.5.10 one regresses (capacity, PCG off).
VERSIONS = (
    Version("0.5.3", "/models/Llama-3.1-70B-Instruct", 4, 2049, 1_203_512, None, ()),
    Version(
        "0.5.9",
        "/models/Qwen3.5-122B-A10B",
        4,
        48,
        507_050,
        True,
        (
            "E=256,N=256,device_name=NVIDIA_H100_80GB_HBM3.json",
            "E=256,N=256,device_name=NVIDIA_H100_80GB_HBM3_down.json",
        ),
    ),
    Version(
        "0.5.10",
        "/models/Qwen3.5-122B-A10B",
        4,
        26,
        277_552,
        False,
        ("E=256,N=256,device_name=NVIDIA_H100_80GB_HBM3.json",),
    ),
    Version("0.5.23", "/models/Qwen3-30B-A3B", 2, 512, 2_412_800, True, ()),
)


# The mixed shape's startups: mostly 0.5.23, with capacities of their own, a few older layouts.
_LATEST = [
    Version("0.5.23", "/models/Qwen3-30B-A3B", 2, 256 + 32 * i, 2_000_000 + 10_007 * i, True, ())
    for i in range(8)
]
MIXED_VERSIONS = (VERSIONS[0], *_LATEST[:3], VERSIONS[1], *_LATEST[3:6], VERSIONS[2], *_LATEST[6:])


@dataclass(frozen=True)
class Shape:
    """A benchmark journal's mix: the watched unit's startups, the others' share and kinds."""

    name: str
    versions: tuple[Version, ...]
    other_share: float
    # Other SGLang servers: kind, unit, layout version, weight among the other kinds, model,
    # share of prefill lines among its batch lines.
    sglang_others: tuple[tuple[str, str, str, int, str, float], ...]
    burst: float  # chance that one more other entry follows an other entry
    # Appended to every SGLang server's command line (the "longcmd" shape's long _CMDLINE).
    cmdline_tail: str = ""


# The flags of a long production launch (~1.3 kB with the path and model): journald (and
# journal-remote) compress a field of 512 bytes or more, so every entry of these servers carries
# a compressed _CMDLINE, which any reader walking the entry's fields past it decompresses.
LONG_FLAGS = " " + " ".join(
    [
        "--host 0.0.0.0 --port 30000 --trust-remote-code --dtype bfloat16",
        "--mem-fraction-static 0.88 --chunked-prefill-size 8192 --max-prefill-tokens 16384",
        "--schedule-policy lpm --schedule-conservativeness 1.0 --cuda-graph-max-bs 256",
        "--enable-torch-compile --torch-compile-max-bs 32 --attention-backend fa3",
        "--sampling-backend flashinfer --grammar-backend xgrammar --tool-call-parser qwen25",
        "--reasoning-parser qwen3 --enable-metrics --log-requests --log-requests-level 1",
        "--decode-log-interval 40 --watchdog-timeout 600 --kv-cache-dtype fp8_e4m3",
        "--enable-mixed-chunk --enable-dp-attention --dp-size 2 --moe-a2a-backend deepep",
        "--deepep-mode auto --ep-num-redundant-experts 32 --enable-eplb --eplb-rebalance-num-iterations 1000",
        "--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1",
        "--speculative-num-draft-tokens 4 --speculative-draft-model-path /models/Qwen3-30B-A3B-EAGLE3",
        "--served-model-name qwen3-30b-a3b-prod --api-key-file /etc/sglang/api-key",
        "--download-dir /models/cache --random-seed 1234 --stream-interval 1 --stream-output",
        "--allow-auto-truncate --context-length 131072 --json-model-override-args",
        '\'{"rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}}\'',
        "--enable-cache-report --show-time-cost --bucket-time-to-first-token 0.1 0.25 0.5 1 2 4 8",
        "--bucket-inter-token-latency 0.002 0.005 0.01 0.02 0.05 0.1 --collect-tokens-histogram",
    ]
)


SHAPES = {
    "single": Shape(
        "single",
        VERSIONS,
        OTHER_SHARE,
        (("embed", OTHER_SGLANG_UNIT, "0.5.9", 20, "bge-m3", 0.0),),
        0.75,
    ),
    "mixed": Shape(
        "mixed",
        MIXED_VERSIONS,
        0.6,
        (
            ("embed", OTHER_SGLANG_UNIT, "0.5.9", 60, "bge-m3", 0.0),
            ("chat2", "sglang-chat2.service", "0.5.23", 120, "Qwen3-32B", 0.3),
            ("rerank", "sglang-rerank.service", "0.5.23", 80, "bge-reranker", 0.3),
        ),
        0.9,
    ),
    # The watched unit and three other SGLang servers interleaved, as in "mixed", each launched
    # with a long command line (LONG_FLAGS): what decompressing a field costs every reader.
    "longcmd": Shape(
        "longcmd",
        MIXED_VERSIONS,
        0.6,
        (
            ("embed", OTHER_SGLANG_UNIT, "0.5.9", 60, "bge-m3", 0.0),
            ("chat2", "sglang-chat2.service", "0.5.23", 120, "Qwen3-32B", 0.3),
            ("rerank", "sglang-rerank.service", "0.5.23", 80, "bge-reranker", 0.3),
        ),
        0.9,
        LONG_FLAGS,
    ),
}


def _prefix(ts_s: str, rank: int | None) -> str:
    return f"[{ts_s} TP{rank}] " if rank is not None else f"[{ts_s}] "


def startup_lines(v: Version) -> list[tuple[int | None, str]]:
    """(rank, body) of one complete startup of version `v`; rank None is the main process."""
    args = SERVER_ARGS.read_text().strip()
    args = args.replace("'/models/Qwen3.5-122B-A10B'", repr(v.model)).replace(
        "tp_size=4", f"tp_size={v.tp}"
    )
    if v.piecewise is False:
        args = args.replace("enable_piecewise_cuda_graph=True", "enable_piecewise_cuda_graph=False")
    ranks = range(v.tp)
    out: list[tuple[int | None, str]] = [
        (
            None,
            "INFO server_args.py:1835: Attention backend not specified. Use flashinfer backend by default.",
        ),
        (None, f"server_args={args}"),
        (None, "Using default HuggingFace chat template with detected content format: openai"),
    ]
    out += [(r, "Init torch distributed begin.") for r in ranks]
    out += [(0, "sglang is using nccl==2.27.5")]
    out += [(r, "Init torch distributed ends. elapsed=2.87 s, mem usage=0.61 GB") for r in ranks]
    out += [(r, f"Load weight begin. avail mem={93.72 + r / 100:.2f} GB") for r in ranks]
    out += [
        (
            r,
            f"Load weight end. elapsed={71.9 + r / 50:.2f} s, type=Qwen3_5MoeForConditionalGeneration, "
            "dtype=torch.bfloat16, avail mem=34.42 GB, mem usage=59.30 GB.",
        )
        for r in ranks
    ]
    out += [(0, "Using KV cache dtype: torch.bfloat16")]
    out += [
        (r, f"KV Cache is allocated. #tokens: {v.kv_tokens}, K size: 2.90 GB, V size: 2.90 GB")
        for r in ranks
    ]
    out += [(r, "Memory pool end. avail mem=23.34 GB") for r in ranks]
    out += [
        (r, "Capture cuda graph begin. This can take up to several minutes. avail mem=22.81 GB")
        for r in ranks
    ]
    for r in ranks:
        for name in v.moe_missing:
            what = (
                "Using MoE kernel config with down_moe=False"
                if name.endswith("_down.json")
                else "Using default MoE kernel config"
            )
            out.append(
                (
                    r,
                    f"{what}. Performance might be sub-optimal! Config file not found at "
                    f"{MOE_DIR}{name}{MOE_HINT}",
                )
            )
    out += [
        (r, "Capture cuda graph end. Time elapsed: 11.37 s. mem usage=0.74 GB. avail mem=22.07 GB.")
        for r in ranks
    ]
    if v.piecewise:
        out += [(r, "Capture piecewise CUDA graph begin. avail mem=22.07 GB") for r in ranks]
        out += [
            (
                r,
                "Capture piecewise CUDA graph end. Time elapsed: 96.45 s. mem usage=1.41 GB. "
                "avail mem=20.66 GB.",
            )
            for r in ranks
        ]
    elif v.piecewise is False:
        out += [
            (r, "Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set")
            for r in ranks
        ]
    out += [
        (
            0,
            f"max_total_num_tokens={v.kv_tokens}, chunked_prefill_size=8192, "
            f"max_prefill_tokens=16384, max_running_requests={v.max_running_requests}, "
            "context_len=262144, available_gpu_mem=20.66 GB",
        ),
        (None, "INFO:     Started server process [412305]"),
        (None, "INFO:     Waiting for application startup."),
        (None, "INFO:     Application startup complete."),
        (None, "INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)"),
        (None, 'INFO:     127.0.0.1:48210 - "GET /model_info HTTP/1.1" 200 OK'),
        (None, "The server is fired up and ready to roll!"),
    ]
    return out


class SteadyState:
    """Batch and access line bodies in one version's layout, with varying numbers."""

    def __init__(self, version: str, rng: random.Random) -> None:
        self.version = version
        self.rng = rng

    def decode(self) -> tuple[str, float]:
        r = self.rng
        run = r.randint(1, 48)
        tok = run * r.randint(200, 9000)
        use = r.random() * 0.9
        gen = r.random() * 3000
        q = r.randint(0, 4)
        v = self.version
        if v == "0.5.3":
            body = (
                f"Decode batch. #running-req: {run}, #token: {tok}, token usage: {use:.2f}, "
                f"cuda graph: True, gen throughput (token/s): {gen:.2f}, #queue-req: {q}, "
            )
        elif v == "0.5.23":
            body = (
                f"Decode batch, #running-req: {run}, #token: {tok}, token usage: {use:.2f}, "
                f"cuda graph: True, gen throughput (token/s): {gen:.2f}, #queue-req: {q}"
            )
        else:  # 0.5.9 / 0.5.10, hybrid SSM model
            body = (
                f"Decode batch, #running-req: {run}, #full token: {tok}, full token usage: "
                f"{use:.2f}, mamba num: {run * 2}, mamba usage: {use + 0.01:.2f}, cuda graph: "
                f"True, gen throughput (token/s): {gen:.2f}, #queue-req: {q}"
            )
        return body, round(gen, 2)

    def prefill(self) -> str:
        r = self.rng
        new = r.randint(1, 8192)
        cached = r.randint(0, 4096)
        use = r.random() * 0.9
        run = r.randint(0, 48)
        q = r.randint(0, 4)
        thr = r.random() * 20000
        v = self.version
        if v == "0.5.3":
            return (
                f"Prefill batch. #new-seq: 1, #new-token: {new}, #cached-token: {cached}, "
                f"token usage: {use:.2f}, #running-req: {run}, #queue-req: {q}, "
            )
        if v == "0.5.9":
            return (
                f"Prefill batch, #new-seq: 1, #new-token: {new}, #cached-token: {cached}, "
                f"full token usage: {use:.2f}, mamba usage: {use + 0.01:.2f}, #running-req: "
                f"{run}, #queue-req: {q}, input throughput (token/s): {thr:.2f}, cuda graph: True"
            )
        if v == "0.5.10":
            return (
                f"Prefill batch, #new-seq: 1, #new-token: {new}, #cached-token: {cached}, "
                f"full token usage: {use:.2f}, mamba usage: {use + 0.01:.2f}, #running-req: "
                f"{run}, #queue-req: {q}, cuda graph: False, input throughput (token/s): {thr:.2f}"
            )
        return (
            f"Prefill batch, #new-seq: 2, #new-token: {new}, #cached-token: {cached}, token "
            f"usage: {use:.2f}, #running-req: {run}, #queue-req: {q}, #pending-token: "
            f"{new * 2}, cuda graph: True, input throughput (token/s): {thr:.2f}"
        )

    def access(self) -> str:
        r = self.rng
        path = r.choice(("/v1/chat/completions", "/v1/chat/completions", "/generate", "/health"))
        return (
            f"INFO:     10.20.{r.randint(0, 9)}.{r.randint(2, 250)}:{r.randint(32768, 60999)} - "
            f'"POST {path} HTTP/1.1" 200 OK'
        )


# --- export encoding --------------------------------------------------------------------------


def _fields(**kv: str) -> bytes:
    return b"".join(f"{k}={v}\n".encode() for k, v in kv.items())


def _service_header(unit: str, inv: str, pid: int, comm: str, exe: str, cmdline: str) -> bytes:
    return _fields(
        _BOOT_ID=BOOT_ID,
        _MACHINE_ID=MACHINE_ID,
        _HOSTNAME=HOSTNAME,
        _PID=str(pid),
        _UID="0",
        _GID="0",
        _COMM=comm,
        _EXE=exe,
        _CMDLINE=cmdline,
        _SYSTEMD_CGROUP=f"/system.slice/{unit}",
        _SYSTEMD_UNIT=unit,
        _SYSTEMD_SLICE="system.slice",
        _SYSTEMD_INVOCATION_ID=inv,
        _TRANSPORT="stdout",
        _STREAM_ID=inv[::-1],
        SYSLOG_IDENTIFIER=unit.rsplit(".", 1)[0],
        PRIORITY="6",
        SYSLOG_FACILITY="3",
    )


# The trusted fields journald attaches to every line PID 1 writes.
_PID1_IDENTITY = {
    "_BOOT_ID": BOOT_ID,
    "_MACHINE_ID": MACHINE_ID,
    "_HOSTNAME": HOSTNAME,
    "_PID": "1",
    "_UID": "0",
    "_GID": "0",
    "_COMM": "systemd",
    "_EXE": "/usr/lib/systemd/systemd",
    "_CMDLINE": "/sbin/init",
    "_SYSTEMD_CGROUP": "/init.scope",
    "_SYSTEMD_UNIT": "init.scope",
}


def _pid1_header(unit: str, inv: str, message_id: str) -> bytes:
    return _fields(
        **_PID1_IDENTITY,
        _SYSTEMD_SLICE="-.slice",
        _TRANSPORT="journal",
        SYSLOG_FACILITY="3",
        SYSLOG_IDENTIFIER="systemd",
        CODE_FILE="src/core/job.c",
        UNIT=unit,
        INVOCATION_ID=inv,
        PRIORITY="6",
        MESSAGE_ID=message_id,
    )


_ENTRY = b"__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=%d\n%sMESSAGE=%s\n\n"


class _Others:
    """Entries of the other units: headers built once, messages varied cheaply."""

    def __init__(self, rng: random.Random, shape: Shape) -> None:
        self.rng = rng
        inv = "0f" * 16
        self.kinds: list[tuple[str, bytes, int]] = [
            (
                "sshd",
                _service_header(
                    "ssh.service",
                    inv,
                    811,
                    "sshd",
                    "/usr/sbin/sshd",
                    "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups",
                ),
                22,
            ),
            (
                "cron",
                _service_header(
                    "cron.service", "1e" * 16, 702, "cron", "/usr/sbin/cron", "/usr/sbin/cron -f"
                ),
                10,
            ),
            (
                "containerd",
                _service_header(
                    "containerd.service",
                    "2d" * 16,
                    955,
                    "containerd",
                    "/usr/bin/containerd",
                    "/usr/bin/containerd",
                ),
                25,
            ),
            (
                "kernel",
                _fields(
                    _BOOT_ID=BOOT_ID,
                    _MACHINE_ID=MACHINE_ID,
                    _HOSTNAME=HOSTNAME,
                    _TRANSPORT="kernel",
                    SYSLOG_FACILITY="0",
                    SYSLOG_IDENTIFIER="kernel",
                    PRIORITY="4",
                ),
                13,
            ),
            (
                "pid1",
                _fields(
                    **_PID1_IDENTITY,
                    _TRANSPORT="journal",
                    SYSLOG_IDENTIFIER="systemd",
                    UNIT="session-42.scope",
                    PRIORITY="6",
                ),
                10,
            ),
        ]
        # The other SGLang servers go after containerd (the single shape's order, as cached).
        self.sglang: dict[str, tuple[SteadyState, float]] = {}
        for number, (kind, unit, version, weight, model, prefills) in enumerate(
            shape.sglang_others
        ):
            cmd = f"/opt/sglang/.venv/bin/python3 -m sglang.launch_server --model /models/{model}"
            cmd += shape.cmdline_tail
            inv = f"{0x3C + number:02x}" * 16
            header = _service_header(
                unit, inv, 9001 + number, "python3", "/usr/bin/python3.12", cmd
            )
            self.kinds.insert(3 + number, (kind, header, weight))
            self.sglang[kind] = (SteadyState(version, rng), prefills)
        self._choices = [k for k in self.kinds for _ in range(k[2])]

    def pick(self, ts_s: str) -> tuple[str, bytes, bytes]:
        name, header, _ = self.rng.choice(self._choices)
        r = self.rng
        if name == "sshd":
            msg = (
                f"Accepted publickey for deploy from 10.0.{r.randint(0, 255)}.{r.randint(1, 254)} "
                f"port {r.randint(30000, 65000)} ssh2: ED25519 SHA256:Zk3b9Jc0wq7Hq1x2bench"
            )
        elif name == "cron":
            msg = "(root) CMD (command -v debian-sa1 > /dev/null && debian-sa1 1 1)"
        elif name == "containerd":
            msg = (
                f'time="{ts_s.replace(" ", "T")}.{r.randint(0, 999999):06d}Z" level=info '
                f'msg="loading plugin" id=io.containerd.snapshotter.v1.{r.choice(("overlayfs", "native"))}'
            )
        elif name in self.sglang:
            # Another SGLang server: its lines must not leak into the watched unit's facts.
            steady, prefills = self.sglang[name]
            body = steady.prefill() if prefills and r.random() < prefills else steady.decode()[0]
            msg = f"[{ts_s}] {body}" if name == "embed" else f"[{ts_s} TP0] {body}"
        elif name == "kernel":
            msg = (
                f"[UFW BLOCK] IN=eth0 OUT= MAC=52:54:00:12:34:56 SRC=203.0.113.{r.randint(1, 254)} "
                f"DST=10.0.0.5 LEN=44 TOS=0x00 PROTO=TCP SPT={r.randint(1024, 65000)} DPT=22"
            )
        else:
            msg = "session-42.scope: Deactivated successfully."
        return name, header, msg.encode()


def _ts_string(us: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(us // 1_000_000))


def generate_entries(n: int, seed: int = 5, shape: str = "single") -> Iterator[tuple[str, bytes]]:
    """Yield (kind, export bytes of one entry) for `n` entries; manifest facts via `plan`."""
    yield from _Generator(n, seed, SHAPES[shape]).run()


class _Generator:
    def __init__(self, n: int, seed: int, shape: Shape) -> None:
        self.n = n
        self.shape = shape
        self.rng = random.Random(seed)
        self.others = _Others(self.rng, shape)
        self.ts = START_US
        self.startups: list[dict[str, object]] = []

    def _tick(self) -> int:
        self.ts += self.rng.randint(1, 2 * MEAN_GAP_US)
        return self.ts

    def _entry(self, header: bytes, message: bytes) -> bytes:
        ts = self._tick()
        return _ENTRY % (ts, ts - BOOT_US, header, message)

    def run(self) -> Iterator[tuple[str, bytes]]:
        n, rng = self.n, self.rng
        share = self.shape.other_share
        others_total = round(n * share)
        unit_total = n - others_total
        versions = self.shape.versions
        # Each startup: PID 1 starting/started, its lines, then steady state, then stopping/stopped.
        fixed = sum(len(startup_lines(v)) + 5 for v in versions)
        steady_total = max(0, unit_total - fixed)
        emitted_unit = 0
        emitted_other = 0
        count = 0

        def interleave() -> Iterator[tuple[str, bytes]]:
            # Other units' entries in between, so that 25% of all entries are theirs at any point.
            nonlocal emitted_other, count
            while (
                emitted_other < others_total
                and emitted_other * (1 - share) < (emitted_unit * share)
                and rng.random() < self.shape.burst
            ):
                name, header, msg = self.others.pick(_ts_string(self.ts))
                emitted_other += 1
                count += 1
                yield "other:" + name, self._entry(header, msg)

        for index, v in enumerate(versions):
            inv = f"{index + 1:02x}" + "b7e1" * 7 + "c0"  # 32 hex digits, stable across runs
            main_pid = 412_000 + index * 100
            cmd = f"/opt/sglang/.venv/bin/python3 -m sglang.launch_server --model-path {v.model} --tp-size {v.tp}"
            cmd += self.shape.cmdline_tail
            main = _service_header(UNIT, inv, main_pid, "python3", "/usr/bin/python3.12", cmd)
            ranks = [
                _service_header(UNIT, inv, main_pid + 1 + r, "python3", "/usr/bin/python3.12", cmd)
                for r in range(v.tp)
            ]
            title = f"{UNIT} - SGLang {v.model.rsplit('/', 1)[-1]} (TP{v.tp})"
            for mid, text in (
                (UNIT_STARTING, f"Starting {title}..."),
                (UNIT_STARTED, f"Started {title}."),
            ):
                emitted_unit += 1
                count += 1
                yield "pid1", self._entry(_pid1_header(UNIT, inv, mid), text.encode())
            for rank, body in startup_lines(v):
                header = main if rank is None else ranks[rank]
                msg = (_prefix(_ts_string(self.ts), rank) + body).encode()
                emitted_unit += 1
                count += 1
                yield "startup", self._entry(header, msg)
                yield from interleave()
            steady = SteadyState(v.name, rng)
            last_gen: float | None = None
            steady_share = steady_total // len(versions) + (
                steady_total % len(versions) if index == len(versions) - 1 else 0
            )
            tp0 = ranks[0]
            for _ in range(steady_share):
                ts_s = _ts_string(self.ts)
                roll = rng.random()
                if roll < 0.55:
                    body, last_gen = steady.decode()
                    kind, header, text = "decode", tp0, f"[{ts_s} TP0] {body}"
                elif roll < 0.75:
                    kind, header, text = "prefill", tp0, f"[{ts_s} TP0] {steady.prefill()}"
                else:
                    kind, header, text = "access", main, f"[{ts_s}] {steady.access()}"
                emitted_unit += 1
                count += 1
                yield kind, self._entry(header, text.encode())
                yield from interleave()
            for mid, text in (
                (UNIT_STOPPING, f"Stopping {title}..."),
                (UNIT_SUCCESS, f"{UNIT}: Deactivated successfully."),
                (UNIT_STOPPED, f"Stopped {title}."),
            ):
                emitted_unit += 1
                count += 1
                yield "pid1", self._entry(_pid1_header(UNIT, inv, mid), text.encode())
            self.startups.append(
                {
                    "version": v.name,
                    "invocation_id": inv,
                    "max_running_requests": v.max_running_requests,
                    "kv_cache_tokens": v.kv_tokens,
                    "piecewise_cuda_graph": v.piecewise,
                    "moe_config_missing": list(v.moe_missing),
                    "last_gen_throughput": last_gen,
                }
            )
        while emitted_other < others_total:
            name, header, msg = self.others.pick(_ts_string(self.ts))
            emitted_other += 1
            count += 1
            yield "other:" + name, self._entry(header, msg)


# --- building the journal ---------------------------------------------------------------------


def journal_dir_for(n: int, cache: Path = CACHE_DIR, shape: str = "single") -> Path:
    tag = "" if shape == "single" else f"{shape}-"
    return cache / f"journal-v{GENERATOR_VERSION}-{tag}n{n}"


def build(
    n: int, out_dir: Path, *, per_file: int | None = None, seed: int = 5, shape: str = "single"
) -> dict[str, object]:
    """Write an N-entry journal of `shape` to `out_dir` (several files); return its manifest."""
    if per_file is None:
        # Several files even for a small journal: reading across files is part of the cost.
        per_file = min(ENTRIES_PER_FILE, max(1000, -(-n // 5)))
    if not JOURNAL_REMOTE.exists():
        raise RuntimeError(f"{JOURNAL_REMOTE} not found: apt-get install systemd-journal-remote")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    started = time.perf_counter()
    gen = _Generator(n, seed, SHAPES[shape])
    kinds: Counter[str] = Counter()
    files: list[str] = []
    procs: list[subprocess.Popen[bytes]] = []
    chunk: list[bytes] = []
    in_file = 0
    # journal-remote's stderr goes to a file: a pipe could fill up and block it.
    with tempfile.TemporaryFile() as errors:

        def flush() -> None:
            nonlocal chunk, in_file
            if not chunk:
                return
            # Journald-style rotated names: the archived files sort by their first entry.
            name = f"system@bench-{len(files):04d}.journal"
            files.append(name)
            proc = subprocess.Popen(
                [str(JOURNAL_REMOTE), f"--output={out_dir / name}", "-"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=errors,
            )
            assert proc.stdin is not None
            proc.stdin.write(b"".join(chunk))
            proc.stdin.close()
            procs.append(proc)
            chunk, in_file = [], 0
            # At most two writers at once on a 2-core box; Python keeps generating meanwhile.
            while sum(p.poll() is None for p in procs) >= 2:
                time.sleep(0.05)

        for kind, data in gen.run():
            kinds[kind] += 1
            chunk.append(data)
            in_file += 1
            if in_file >= per_file:
                flush()
        flush()
        for proc in procs:
            if proc.wait() != 0:
                errors.seek(0)
                raise RuntimeError(
                    f"systemd-journal-remote failed ({proc.returncode}): {errors.read().decode()}"
                )
    others = sum(v for k, v in kinds.items() if k.startswith("other:"))
    manifest: dict[str, object] = {
        "generator_version": GENERATOR_VERSION,
        "shape": shape,
        "entries": sum(kinds.values()),
        "unit": UNIT,
        "unit_entries": sum(kinds.values()) - others,
        "other_entries": others,
        "kinds": dict(sorted(kinds.items())),
        # journal-remote rotates by itself past its size limit, as journald would.
        "files": sorted(p.name for p in out_dir.glob("*.journal")),
        "bytes": sum(p.stat().st_size for p in out_dir.glob("*.journal")),
        "startups": gen.startups,
        "build_seconds": round(time.perf_counter() - started, 2),
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def ensure(
    n: int, cache: Path = CACHE_DIR, shape: str = "single"
) -> tuple[Path, dict[str, object]]:
    """The cached N-entry journal directory and its manifest; built when missing or stale."""
    out = journal_dir_for(n, cache, shape)
    manifest_path = out / "manifest.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if all((out / f).exists() for f in manifest["files"]):
            return out, manifest
    return out, build(n, out, shape=shape)


if __name__ == "__main__":
    import sys

    size = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    path, info = ensure(size, shape=sys.argv[2] if len(sys.argv) > 2 else "single")
    print(
        path,
        json.dumps(
            {k: info[k] for k in ("entries", "unit_entries", "other_entries", "build_seconds")}
        ),
    )
