"""The daemon, `sentinel run`: the pipeline followed, metrics served, alerts pushed.

loop.py            Daemon, run_daemon  the poll loop, signals, commit retry, watchdog, reload
http.py                                the bounded HTTP server behind /metrics and the page
families.py        FAMILIES            every metric family declared once (the docs tables' source)
metrics.py         SentinelCollector   every metric, built at scrape time
decode_metrics.py                      the decode-throughput families
alerts.py          AlertPusher         findings -> Alertmanager
"""

from .families import PREFIX
from .loop import Daemon, run_daemon
from .metrics import SentinelCollector

__all__ = ["PREFIX", "Daemon", "SentinelCollector", "run_daemon"]
