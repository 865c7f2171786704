"""`make bench` part: `sentinel scan` of a Docker json-file log against `jq -r .log | grep -E`.

    python -m bench.files            # 1M lines, 3 interleaved runs each
    python -m bench.files --smoke    # 20k lines, one run

The log holds the service lines of bench/generate.py's "single" journal (the same startups,
decode, prefill and access lines, the server_args line in 16 KiB pieces as Docker's copier
splits it), written as moby's json-file driver writes them. The grep pattern is the startup
rules' required literals (bench/__main__.py's part b), so grep finds the lines the rules would
look at and parses nothing. Results: bench/results/files.json (smoke: files-smoke.json).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import generate
from .__main__ import startup_pattern

RESULTS = Path(__file__).resolve().parent / "results"
CID = "b" * 64
PIECE = 16 * 1024


def _time(us: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(us // 1_000_000)) + (
        f".{us % 1_000_000:06d}000Z"
    )


def write_log(root: Path, n: int) -> Path:
    """`n` entries' service lines as `<root>/containers/<id>/<id>-json.log`."""
    cdir = root / "containers" / CID
    cdir.mkdir(parents=True)
    (cdir / "config.v2.json").write_text(json.dumps({"ID": CID, "Name": "/sglang"}))
    path = cdir / f"{CID}-json.log"
    with open(path, "w", encoding="utf-8") as out:
        for kind, entry in generate.generate_entries(n, shape="single"):
            if kind == "pid1" or kind.startswith("other:"):
                continue
            head, _, message = entry.rpartition(b"MESSAGE=")
            us = int(head.split(b"\n", 1)[0].split(b"=", 1)[1])
            text = message.rstrip(b"\n").decode("utf-8", "replace")
            for at in range(0, max(len(text), 1), PIECE):
                piece = text[at : at + PIECE]
                last = at + PIECE >= len(text)
                record = {
                    "log": piece + ("\n" if last else ""),
                    "stream": "stderr",
                    "time": _time(us),
                }
                out.write(json.dumps(record, separators=(",", ":")) + "\n")  # as moby writes it
    return path


def run(argv: list[str], stdout: Any = subprocess.DEVNULL, shell: bool = False) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=stdout, stderr=subprocess.DEVNULL, check=True, shell=shell)
    return time.perf_counter() - started


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.files")
    parser.add_argument("--smoke", action="store_true")
    opts = parser.parse_args(args)
    n, rounds = (20_000, 1) if opts.smoke else (1_000_000, 3)
    jq = shutil.which("jq")
    pattern = startup_pattern()
    with tempfile.TemporaryDirectory(prefix="bench-files-") as tmp:
        work = Path(tmp)
        log = write_log(work / "docker", n)
        with open(log, "rb") as fh:
            lines = sum(1 for _ in fh)
        size = log.stat().st_size
        (work / "empty-journal").mkdir()
        times: dict[str, list[float]] = {"scan": [], "jq_grep": []}
        for r in range(rounds):
            state = work / f"state{r}"
            times["scan"].append(
                run(
                    [
                        sys.executable,
                        "-m",
                        "sglang_sentinel.cli",
                        "scan",
                        "--container",
                        "sglang",
                        "--docker-root",
                        str(work / "docker"),
                        "--journal-dir",
                        str(work / "empty-journal"),
                        "--state-dir",
                        str(state),
                        "--json",
                    ]
                )
            )
            if jq is not None:
                cmd = f"{jq} -r .log {log} | grep -E {json.dumps(pattern)} > {work / 'grep.out'}"
                times["jq_grep"].append(run(["bash", "-c", cmd]))
    result = {
        "lines": lines,
        "log_bytes": size,
        "scan_s": statistics.median(times["scan"]),
        "jq_grep_s": statistics.median(times["jq_grep"]) if times["jq_grep"] else None,
        "rounds": rounds,
    }
    if result["jq_grep_s"]:
        result["scan_over_jq_grep"] = round(result["scan_s"] / result["jq_grep_s"], 2)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / ("files-smoke.json" if opts.smoke else "files.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
