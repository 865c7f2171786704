"""server_args: SGLang's logged ServerArgs -> a dict, and a version-aware diff of two of them.

parse.py   parse_server_args   "ServerArgs(...)" / "{...}" -> dict, secrets redacted at parse time
diff.py    diff_server_args    version-independent settings, a rename-aware field diff, the
                               CUDA-graph switches across versions
"""

from .diff import (
    SWITCHES,
    diff_server_args,
    normalized_settings,
    setting_flags,
    switch_flags,
    switched_off_by,
)
from .parse import BalanceScanner, parse_server_args

__all__ = [
    "SWITCHES",
    "BalanceScanner",
    "diff_server_args",
    "normalized_settings",
    "parse_server_args",
    "setting_flags",
    "switch_flags",
    "switched_off_by",
]
