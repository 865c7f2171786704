"""server_args: SGLang's logged ServerArgs -> a dict, and a version-aware diff of two of them.

parse.py   parse_server_args   "ServerArgs(...)" / "{...}" -> dict, secrets redacted at parse time
diff.py    diff_server_args    version-independent settings, a rename-aware field diff, the
                               CUDA-graph switches across versions
"""

from .diff import diff_server_args
from .parse import parse_server_args

__all__ = ["diff_server_args", "parse_server_args"]
