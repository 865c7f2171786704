"""A bearer token read from its file: the Alertmanager push's and the Kubernetes API's."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

# A bearer token is a line; a file larger than this is not one (and is not read further).
MAX_TOKEN_BYTES: Final = 16 * 1024


def read_token(path: Path) -> str:
    """The bearer token in `path`, trimmed; OSError or ValueError with the reason.

    Opened without blocking (a FIFO would wait for a writer for ever) and read only when it is
    a regular file of at most MAX_TOKEN_BYTES (a device such as /dev/zero never ends); a file
    holding only whitespace is ValueError("empty").
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        data = os.read(fd, MAX_TOKEN_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_TOKEN_BYTES:
        raise ValueError(f"larger than {MAX_TOKEN_BYTES // 1024} KiB")
    token = data.decode("utf-8").strip()
    if not token:
        raise ValueError("empty")
    return token
