"""Sources: where log lines come from, handed on as `SourceItem`s (model.py) in journal order.

journal.py     JournalSource   the systemd journal (the system's, a directory or files): read, follow
containers.py                  Docker's journald log driver: container selection, starts, split lines
sigbus.py                      a journal file truncated under the reader: SIGBUS -> an error it handles
base.py        Source          what the pipeline and the daemon need of any source
files.py       FileSource      log files of a layout, followed with inotify (inotify.py)
dockerfiles.py DockerLayout    Docker's json-file logs
podlogs.py     PodLayout       the kubelet's pod logs (CRI format)
combined.py    CombinedSource  the journal and log files at once
readers.py     reader_path     which libsystemd reader reads the units' journal lines: the optional
                               C one (_journalread.c) or python-systemd's
               file_reader_path  which cuts log files' lines apart: _fileread.c or Python
"""

from .base import Source, journal_cursor_time
from .combined import CombinedSource
from .dockerfiles import DockerLayout
from .files import FileSource, Layout, Stream, parse_time_us
from .journal import JournalSource
from .podlogs import PodLayout
from .readers import file_reader_path, reader_path

__all__ = [
    "CombinedSource",
    "DockerLayout",
    "FileSource",
    "JournalSource",
    "Layout",
    "PodLayout",
    "Source",
    "Stream",
    "file_reader_path",
    "journal_cursor_time",
    "parse_time_us",
    "reader_path",
]
