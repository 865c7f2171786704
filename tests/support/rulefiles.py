"""Rule-file text for tests: the SGLang line prefix and one valid rule to format."""

from __future__ import annotations

TS = "[2026-03-09 21:34:27 TP0] "

GOOD_RULE = """\
version: 1
rules:
  - id: {rid}
    description: test rule
    contains: "Load weight begin. "
    regex: '^Load weight begin\\. avail mem=(?P<load_avail_mem_gb>\\d+(?:\\.\\d+)?) GB'
    facts:
      load_avail_mem_gb: gb
    samples:
      match:
        - line: "{ts}Load weight begin. avail mem={value} GB"
          facts: {{load_avail_mem_gb: {value}}}
"""
