"""Sources: where log lines come from, handed on as `SourceItem`s (model.py) in journal order.

journal.py     JournalSource  the systemd journal (the system's, a directory or files): read, follow
containers.py                 Docker's journald log driver: container selection, starts, split lines
sigbus.py                     a journal file truncated under the reader: SIGBUS -> an error it handles
readers.py     reader_path    which libsystemd reader reads the units' lines: the optional C one
                              (_journalread.c) or python-systemd's
"""

from .journal import JournalSource
from .readers import reader_path

__all__ = ["JournalSource", "reader_path"]
