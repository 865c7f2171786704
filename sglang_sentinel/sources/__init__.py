"""Sources: where log lines come from, handed on as `SourceItem`s (model.py) in journal order.

journal.py     JournalSource  the systemd journal (the system's, a directory or files): read, follow
containers.py                 Docker's journald log driver: container selection, starts, split lines
sigbus.py                     a journal file truncated under the reader: SIGBUS -> an error it handles
"""

from .journal import JournalSource

__all__ = ["JournalSource"]
