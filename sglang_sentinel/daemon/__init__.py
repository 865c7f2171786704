"""The daemon, `sentinel run`: the pipeline followed, metrics served, alerts pushed.

loop.py            Daemon, run_daemon  the poll loop, signals, commit retry, watchdog, reload
http.py                                the bounded HTTP server behind /metrics and the page
metrics.py         SentinelCollector   every metric, built at scrape time
decode_metrics.py                      the decode-throughput families
alerts.py          AlertPusher         findings -> Alertmanager
"""

from .loop import Daemon, run_daemon
from .metrics import PREFIX, SentinelCollector

__all__ = ["PREFIX", "Daemon", "SentinelCollector", "run_daemon"]
