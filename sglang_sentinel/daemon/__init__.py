"""The daemon, `sentinel run`: the pipeline followed, metrics served, alerts pushed.

loop.py            Daemon, run_daemon  the poll loop, signals, commit retry, watchdog, reload
announce.py        Announcer           sd_notify (READY, STATUS, WATCHDOG, STOPPING) and the log of
                                       startups, findings and pins, each said once
wiring.py          build_pipeline      the parts built from a Config: pipeline, alert sink
http.py            routes              the bounded HTTP server and its routes: /metrics, the page
families.py        FAMILIES            every metric family declared once (the docs tables' source)
metrics.py         SentinelCollector   every metric, built at scrape time
decode_metrics.py                      the decode-throughput families
alerts.py          AlertPusher         findings -> Alertmanager
kubeapi.py         PodLabels           pod labels from the Kubernetes API (kubernetes.labels)
"""

from .families import PREFIX
from .loop import Daemon, run_daemon
from .metrics import SentinelCollector

__all__ = ["PREFIX", "Daemon", "SentinelCollector", "run_daemon"]
