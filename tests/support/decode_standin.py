"""A stand-in SGLang server for the decode tests: prints the lines of a file to stdout.

    python tests/support/decode_standin.py LINES_FILE [--hold]

Run inside a unit's cgroup (`LiveJournald.run_in_unit`), each line becomes one journal entry of
the unit. `--hold` keeps the process alive until stdin reaches EOF, so that journald can still
read the writer's unit and invocation id from /proc when it processes the last lines.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    path = Path(argv[0])
    out = sys.stdout.buffer
    for line in path.read_bytes().splitlines():
        out.write(line + b"\n")
        out.flush()
    if "--hold" in argv[1:]:
        sys.stdin.buffer.read()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
