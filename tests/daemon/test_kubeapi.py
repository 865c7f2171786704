"""Pod labels from the Kubernetes API on sglang_sentinel_pod_info, against a stand-in API server
over TLS (tests/support/kubeapi_standin.py): list then watch this node's pods, the token read at
every connection and never logged, TLS verified with the configured CA."""

from __future__ import annotations

import re
import shutil
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubeapi_standin import StandIn, make_ca, pod, serve
from logfiles import Clock, PodDir, sglang_start
from prometheus_client import generate_latest
from sentinelproc import wait_until

from sglang_sentinel.config import load_config
from sglang_sentinel.config.schema import KubernetesConfig
from sglang_sentinel.daemon import Daemon, kubeapi
from sglang_sentinel.daemon.kubeapi import ApiEndpoint, PodLabels, pod_labels_of
from sglang_sentinel.errors import ConfigError
from sglang_sentinel.model import workload_of

UNIT = "k8s:llm/sglang/server"
POD = "sglang-7d9f8b6c4d-x2kqz"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.k8s2-test-token-never-logged"
KEYS = ["app", "model", "leaderworkerset.sigs.k8s.io/worker-index"]


def no_jitter() -> float:
    """The backoff's random part fixed at 0, for the exact schedules below (the random part
    has its own test, test_the_waits_are_jittered)."""
    return 0.0


def daemon_of(
    tmp_path: Path,
    port: int,
    ca: Path,
    *,
    name: str = POD,
    uid: str = f"uid-llm-{POD}",
    clock: Clock | None = None,
    **extra: object,
) -> Daemon:
    """A daemon following the pod `name` (its target: `llm/WORKLOAD/server`) whose one startup
    is read, and the API's labels configured."""
    pods = tmp_path / "pods"
    d = PodDir(pods, "llm", name, uid, clock)
    sglang_start(lambda t: d.line("server", 0, t), "2026-01-01", 48)
    (tmp_path / "token").write_text(TOKEN + "\n")
    config = load_config(
        overrides={
            "units": [],
            "kubernetes.pods": [f"llm/{workload_of(name)}/server"],
            "kubernetes.pod_logs": str(pods),
            "kubernetes.labels": KEYS,
            "kubernetes.api_url": f"https://127.0.0.1:{port}",
            "kubernetes.node_name": "node-a",
            "kubernetes.token_file": str(tmp_path / "token"),
            "kubernetes.ca_file": str(ca),
            "state_dir": str(tmp_path / "state"),
            **extra,
        },
        environ={},
    )
    daemon = Daemon.from_config(config)
    daemon.source.open(follow=False)
    daemon.pipeline.resume(from_boot_start=False)
    daemon._drain()
    return daemon


def pod_info(daemon: Daemon) -> list[str]:
    page = generate_latest(daemon.registry).decode()
    return [line for line in page.splitlines() if line.startswith("sglang_sentinel_pod_info{")]


def _emitted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The events kubeapi has logged, each added once its line is written. The thread counts a
    failure (`failures`) before it logs it, and a stop() in between ends it without the line:
    a test that reads the log waits for the line, not for the count."""
    events: list[str] = []
    emit = kubeapi.log._emit

    def recorded(method: str, event: str, kw: dict[str, Any]) -> None:
        emit(method, event, kw)
        events.append(event)

    monkeypatch.setattr(kubeapi.log, "_emit", recorded)
    return events


def series(app: str, model: str, worker: str = "", name: str = POD, unit: str = UNIT) -> str:
    return (
        f'sglang_sentinel_pod_info{{k8s_pod="{name}",label_app="{app}",'
        f'label_leaderworkerset_sigs_k8s_io_worker_index="{worker}",label_model="{model}",'
        f'unit="{unit}"}} 1.0'
    )


def test_labels_are_listed_then_watched_with_the_token_over_verified_tls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve(tmp_path) as (api, ca):
        api.pods = [
            pod("llm", POD, {"app": "sglang", "model": "qwen", "pod-template-hash": "7d9f8b6c4d"}),
            pod("other", "db-0", {"app": "postgres"}),
        ]
        daemon = daemon_of(tmp_path, api.port, ca)
        labels = daemon.pod_labels
        assert labels is not None
        try:
            # Nothing from the API yet: every configured label there, empty.
            assert pod_info(daemon) == [series("", "")]
            labels.start()
            wait_until(lambda: labels.lists >= 1, 15, "the pod list")
            assert pod_info(daemon) == [series("sglang", "qwen")]
            # A change comes through the watch, from the list's resourceVersion on.
            changed = pod("llm", POD, {"app": "sglang", "model": "qwen3", "worker": "x"}, "101")
            changed["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] = "0"
            api.push("MODIFIED", changed)
            wait_until(
                lambda: pod_info(daemon) == [series("sglang", "qwen3", "0")], 15, "the change"
            )
            # The version expired (410): listed again, with the token as the file has it now.
            (tmp_path / "token").write_text("rotated-token\n")
            api.pods = [pod("llm", POD, {"app": "sglang", "model": "qwen4"}, "200")]
            api.push("ERROR", {"kind": "Status", "code": 410})
            wait_until(lambda: labels.lists >= 2, 15, "the list after 410 Gone")
            assert pod_info(daemon) == [series("sglang", "qwen4")]
        finally:
            labels.stop()
            daemon.source.close()
            daemon.store.close()
        assert labels._thread is not None
        assert not labels._thread.is_alive(), _stack_of(labels._thread)
        seen = api.seen()
    node = {"fieldSelector": "spec.nodeName=node-a"}
    watch = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": "300"}
    assert [(r.path, r.query) for r in seen[:3]] == [
        ("/api/v1/pods", node),
        ("/api/v1/pods", {**node, **watch, "resourceVersion": "100"}),
        ("/api/v1/pods", node),
    ]
    assert [r.authorization for r in seen[:3]] == [
        f"Bearer {TOKEN}",
        f"Bearer {TOKEN}",
        "Bearer rotated-token",
    ]
    out = capsys.readouterr()
    assert "kubernetes_pods_listed" in out.out + out.err
    assert TOKEN not in out.out + out.err and "rotated-token" not in out.out + out.err


def test_a_forbidden_list_is_logged_with_the_hint_and_without_the_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    logged = _emitted(monkeypatch)
    with serve(tmp_path) as (api, ca):
        api.status = 403
        daemon = daemon_of(tmp_path, api.port, ca)
        labels = daemon.pod_labels
        assert labels is not None
        try:
            labels.start()
            wait_until(lambda: "kubernetes_api_failed" in logged, 15, "the refused list logged")
            assert pod_info(daemon) == [series("", "")]
        finally:
            labels.stop()
            daemon.source.close()
            daemon.store.close()
    text = capsys.readouterr()
    (line,) = [ln for ln in (text.out + text.err).splitlines() if "kubernetes_api_failed" in ln]
    assert "HTTP 403 Forbidden (the ClusterRole needs get, list, watch on pods)" in line
    assert TOKEN not in text.out + text.err


def test_an_api_server_the_ca_does_not_vouch_for_gets_no_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubeapi_standin import make_ca

    (tmp_path / "other").mkdir()
    other_ca, _key = make_ca(tmp_path / "other", "other-ca")
    logged = _emitted(monkeypatch)
    with serve(tmp_path) as (api, _ca):
        daemon = daemon_of(tmp_path, api.port, other_ca)
        labels = daemon.pod_labels
        assert labels is not None
        try:
            labels.start()
            wait_until(
                lambda: "kubernetes_api_failed" in logged, 15, "the refused handshake logged"
            )
        finally:
            labels.stop()
            daemon.source.close()
            daemon.store.close()
        assert api.seen() == []  # no request, so no token, ever reached it
    text = capsys.readouterr()
    assert "certificate verification failed" in text.out + text.err


STS_POD = "sglang-0"  # a StatefulSet's pod: recreated under the same name
STS_UNIT = "k8s:llm/sglang-0/server"


@pytest.mark.parametrize("late_delete", [False, True], ids=["deleted-added", "added-deleted"])
def test_a_statefulset_pod_recreated_under_its_name_shows_each_pods_own_labels(
    tmp_path: Path, late_delete: bool
) -> None:
    """A StatefulSet pod deleted and recreated under its name is another pod (another uid, the
    log directory `NS_NAME_UID` says which): the old pod's startup, its files still there, keeps
    the old pod's labels until the new pod's startup is the target's latest, which has the new
    pod's, whatever the order of the DELETED and the ADDED. Keyed by name, the DELETED emptied
    the labels, and an ADDED before it put the new pod's labels on the old pod's startup (then
    the DELETED dropped them)."""
    clock = Clock()
    old = pod("llm", STS_POD, {"app": "sglang", "model": "qwen3"}, "100", uid="uid-a")
    deleted = pod("llm", STS_POD, {"app": "sglang", "model": "qwen3"}, "101", uid="uid-a")
    new = pod("llm", STS_POD, {"app": "sglang", "model": "qwen4"}, "102", uid="uid-b")
    events = [("DELETED", deleted), ("ADDED", new)]
    with serve(tmp_path) as (api, ca):
        api.pods = [old]
        daemon = daemon_of(tmp_path, api.port, ca, name=STS_POD, uid="uid-a", clock=clock)
        labels = daemon.pod_labels
        assert labels is not None
        try:
            labels.start()
            wait_until(lambda: labels.lists >= 1, 15, "the pod list")
            assert pod_info(daemon) == [sts_series("qwen3")]
            for n, (kind, obj) in enumerate(events[::-1] if late_delete else events, 1):
                api.push(kind, obj)
                wait_until(partial(_events_are, labels, n), 15, f"the {kind}")
                assert pod_info(daemon) == [sts_series("qwen3")], kind
            recreated = PodDir(tmp_path / "pods", "llm", STS_POD, "uid-b", clock)
            recreated.line("server", 0, "[2026-01-01 11:00:01] server_args=ServerArgs(tp_size=2)")
            daemon._drain()  # the new pod's startup under way: the target's latest
            assert pod_info(daemon) == [sts_series("qwen4")]
            shutil.rmtree(tmp_path / "pods" / f"llm_{STS_POD}_uid-a")  # the kubelet's cleanup
            sglang_start(lambda t: recreated.line("server", 0, t), "2026-01-01", 26)
            daemon._drain()
            assert pod_info(daemon) == [sts_series("qwen4")]
            assert labels.labels() == {
                "uid-a": {"label_app": "sglang", "label_model": "qwen3",
                          "label_leaderworkerset_sigs_k8s_io_worker_index": ""},
                "uid-b": {"label_app": "sglang", "label_model": "qwen4",
                          "label_leaderworkerset_sigs_k8s_io_worker_index": ""},
            }  # fmt: skip
        finally:
            labels.stop()
            daemon.source.close()
            daemon.store.close()


def sts_series(model: str) -> str:
    return series("sglang", model, name=STS_POD, unit=STS_UNIT)


def _events_are(labels: PodLabels, n: int) -> bool:
    return labels.events == n


def test_deleted_pods_keep_their_labels_the_last_gone_kept_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deleted pod's labels are kept, for the last GONE_KEPT deleted pods: so are those of a
    pod that a list no longer has (deleted while no watch saw it); a pod listed again is live."""
    monkeypatch.setattr(kubeapi, "GONE_KEPT", 2)
    monkeypatch.setattr(kubeapi, "RETRY_FIRST_S", 0.02)
    (tmp_path / "token").write_text(TOKEN + "\n")
    with serve(tmp_path) as (api, ca):
        api.pods = [pod("llm", f"p-{i}", {"app": str(i)}) for i in range(4)]
        endpoint = ApiEndpoint("127.0.0.1", api.port, tmp_path / "token", ca, "node-a")
        labels = PodLabels(endpoint, ("app",), jitter=no_jitter)
        labels.start()
        try:
            wait_until(lambda: labels.lists == 1, 5, "the pod list")
            for n, i in enumerate((0, 1, 2), 1):
                api.push("DELETED", pod("llm", f"p-{i}", {"app": str(i)}, str(100 + n)))
                wait_until(partial(_events_are, labels, n), 5, f"the deletion of p-{i}")
            assert labels.labels() == {f"uid-llm-p-{i}": {"label_app": str(i)} for i in (1, 2, 3)}
            # p-3 deleted while no watch saw it, p-2 back (its delete was not the last word).
            api.pods = [pod("llm", "p-2", {"app": "2b"})]
            api.push("ERROR", EXPIRED_STATUS)
            wait_until(lambda: labels.lists == 2, 5, "the list after 410 Gone")
            assert labels.labels() == {
                "uid-llm-p-1": {"label_app": "1"},
                "uid-llm-p-3": {"label_app": "3"},
                "uid-llm-p-2": {"label_app": "2b"},
            }
        finally:
            labels.stop()


GONE = {"type": "ERROR", "object": {"kind": "Status", "code": 410}}
EXPIRED_STATUS: dict[str, object] = {
    "kind": "Status",
    "code": 410,
    "reason": "Expired",
    "message": "too old resource version: 100 (101)",
}
EXPIRED = {"type": "ERROR", "object": EXPIRED_STATUS}
AN_EVENT = {"type": "MODIFIED", "object": pod("llm", POD, {"app": "sglang"}, "101")}


@pytest.mark.parametrize(
    "watch",
    [
        pytest.param({"watch_status": 403}, id="watch-forbidden"),
        pytest.param({"watch_reply": []}, id="watch-ends-at-once"),
        pytest.param({"watch_reply": [GONE]}, id="gone-right-after-the-list"),
        pytest.param({"watch_reply": [AN_EVENT, EXPIRED]}, id="an-event-then-expired"),
        pytest.param({"watch_status": 410}, id="watch-answered-410-gone"),
    ],
)
def test_a_watch_that_fails_at_once_after_every_list_backs_off(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    watch: dict[str, object],
) -> None:
    """Every list succeeds and every watch fails at once (refused, closed without an event,
    410 Gone from the version just listed, also after one event): each retry waits twice as
    long, up to the maximum. The list's success reset the wait (a list a second, forever), a
    stream closed at once was resumed every 0.1 s and a 410 listed again at once, in a loop
    (after an event: 501 lists in 10 s against the stand-in, one per TLS handshake)."""
    monkeypatch.setattr(kubeapi, "RETRY_FIRST_S", 0.02)
    monkeypatch.setattr(kubeapi, "RETRY_MAX_S", 0.16)
    monkeypatch.setattr(kubeapi, "MIN_WATCH_S", 60.0)  # "at once" also on a slow machine
    waits, seen = _failing_watches(tmp_path, capsys, watch, no_jitter, 6)
    assert waits == [0.02, 0.04, 0.08, 0.16, 0.16, 0.16]
    assert [r.query.get("watch") for r in seen[:6]] == [None, "true"] * 3


def _failing_watches(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    watch: dict[str, object],
    jitter: Callable[[], float],
    count: int,
) -> tuple[list[float], list[Any]]:
    """The first `count` waits logged while every watch fails as `watch` sets the stand-in up,
    and the requests the stand-in saw."""
    (tmp_path / "token").write_text(TOKEN + "\n")
    with serve(tmp_path) as (api, ca):
        for name, value in watch.items():
            setattr(api, name, value)
        endpoint = ApiEndpoint("127.0.0.1", api.port, tmp_path / "token", ca, "node-a")
        labels = PodLabels(endpoint, ("app",), jitter=jitter)
        labels.start()
        try:
            # The count-th failure's wait is logged after that failure is counted (and not at
            # all once stopped): one more failure means it was.
            wait_until(lambda: labels.failures >= count + 1, 5, f"{count + 1} failed watches")
        finally:
            labels.stop()
        seen = api.seen()
    text = capsys.readouterr()
    waits = re.findall(r"retry_in_seconds\W+([0-9.]+)", text.out + text.err)
    return [float(w) for w in waits[:count]], seen


def test_the_waits_are_jittered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each wait is stretched by a random part of itself (client-go's reflector does the same):
    DaemonSet pods that lost the API server together retried it in step, every node at the
    same moments. With r = 0.5, 0.25, 0.0, 0.99: 1.5, 1.25, 1 and 1.99 times the doubling wait."""
    monkeypatch.setattr(kubeapi, "RETRY_FIRST_S", 0.02)
    monkeypatch.setattr(kubeapi, "RETRY_MAX_S", 0.16)
    monkeypatch.setattr(kubeapi, "MIN_WATCH_S", 60.0)
    draws = iter([0.5, 0.25, 0.0, 0.99] + [0.0] * 100)
    waits, _seen = _failing_watches(tmp_path, capsys, {"watch_status": 410}, lambda: next(draws), 4)
    assert waits == [0.03, 0.05, 0.08, 0.318]
    assert kubeapi.JITTER == 1.0
    endpoint = ApiEndpoint("127.0.0.1", 1, tmp_path / "token", tmp_path / "ca", "node-a")
    default = PodLabels(endpoint, ("app",))._jitter
    assert 0.0 <= default() < 1.0 and len({default() for _ in range(8)}) > 1


def test_a_watch_that_worked_and_then_ends_at_once_every_time_backs_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watch that had an event ends; from then on every watch ends at once without one:
    retried after a wait that grows (each was resumed 0.1 s later, forever: a watch since the
    list had worked, so none of them counted as a failure)."""
    monkeypatch.setattr(kubeapi, "RETRY_FIRST_S", 0.02)
    monkeypatch.setattr(kubeapi, "RETRY_MAX_S", 0.16)
    monkeypatch.setattr(kubeapi, "MIN_WATCH_S", 60.0)  # "at once" also on a slow machine
    (tmp_path / "token").write_text(TOKEN + "\n")
    with serve(tmp_path) as (api, ca):
        api.pods = [pod("llm", POD, {"app": "sglang"})]
        endpoint = ApiEndpoint("127.0.0.1", api.port, tmp_path / "token", ca, "node-a")
        labels = PodLabels(endpoint, ("app",), jitter=no_jitter)
        labels.start()
        try:
            wait_until(lambda: labels.lists >= 1, 5, "the pod list")
            api.push("MODIFIED", pod("llm", POD, {"app": "sglang2"}, "101"))
            wait_until(
                lambda: labels.labels()[f"uid-llm-{POD}"] == {"label_app": "sglang2"}, 5, "it"
            )
            api.watch_reply = []
            api.end_watch()
            wait_until(lambda: labels.failures >= 3, 5, "three watches ended at once")
        finally:
            labels.stop()
    text = capsys.readouterr()
    (first, *_rest) = [ln for ln in (text.out + text.err).splitlines() if "api_failed" in ln]
    assert "watch ended at once without an event" in first
    waits = re.findall(r"retry_in_seconds\W+([0-9.]+)", text.out + text.err)
    assert [float(w) for w in waits[:3]] == [0.02, 0.04, 0.08]


def test_a_watch_that_ends_soon_after_its_event_every_time_is_resumed_ever_more_slowly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every watch streams one event and ends: each is resumed from the version it reached
    (no list), after a wait that doubles up to the maximum (each was resumed 0.1 s later,
    forever: 88 watches in 10 s against the stand-in)."""
    monkeypatch.setattr(kubeapi, "RETRY_FIRST_S", 0.02)
    monkeypatch.setattr(kubeapi, "RETRY_MAX_S", 0.16)
    (tmp_path / "token").write_text(TOKEN + "\n")
    with serve(tmp_path) as (api, ca):
        api.watch_reply = [AN_EVENT]
        endpoint = ApiEndpoint("127.0.0.1", api.port, tmp_path / "token", ca, "node-a")
        # every watch: at once
        labels = PodLabels(endpoint, ("app",), clock=lambda: 0.0, jitter=no_jitter)
        labels.start()
        try:
            wait_until(lambda: len(api.seen()) >= 7, 5, "six watches")
        finally:
            labels.stop()
        seen = api.seen()
    text = capsys.readouterr()
    ended = [ln for ln in (text.out + text.err).splitlines() if "watch_ended_early" in ln]
    waits = [float(w) for ln in ended for w in re.findall(r"retry_in_seconds\W+([0-9.]+)", ln)]
    assert waits[:5] == [0.02, 0.04, 0.08, 0.16, 0.16]
    assert [r.query.get("watch") for r in seen[:7]] == [None] + ["true"] * 6
    assert [r.query.get("resourceVersion") for r in seen[1:7]] == ["100"] + ["101"] * 5
    assert labels.failures == 0


def test_a_watch_that_streamed_long_enough_resets_the_wait(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two watches fail at once (the wait grows); one streams for STEADY_WATCH_S and then
    its version expires: listed again at once, and the next failure waits the first wait."""
    monkeypatch.setattr(kubeapi, "RETRY_FIRST_S", 0.02)
    monkeypatch.setattr(kubeapi, "RETRY_MAX_S", 0.16)
    now = [0.0]
    (tmp_path / "token").write_text(TOKEN + "\n")
    with serve(tmp_path) as (api, ca):
        endpoint = ApiEndpoint("127.0.0.1", api.port, tmp_path / "token", ca, "node-a")
        labels = PodLabels(endpoint, ("app",), clock=lambda: now[0], jitter=no_jitter)
        labels.start()
        try:
            for watch in (1, 2, 3, 4):
                wait_until(partial(_watches_are, api, watch), 5, f"watch {watch}")
                if watch == 3:
                    now[0] += kubeapi.STEADY_WATCH_S
                api.push("ERROR", EXPIRED_STATUS)
                wait_until(partial(_failures_are, labels, watch), 5, f"failure {watch}")
            # Failure 4's wait is logged after it is counted (and not at all once stopped), and
            # the list after that wait is the fifth (one at the start, one after each failure).
            wait_until(lambda: labels.lists >= 5, 5, "the list after failure 4")
        finally:
            labels.stop()
        seen = api.seen()
    text = capsys.readouterr()
    waits = re.findall(r"retry_in_seconds\W+([0-9.]+)", text.out + text.err)
    assert [float(w) for w in waits] == [0.02, 0.04, 0.02]
    assert [r.query.get("watch") for r in seen[:8]] == [None, "true"] * 4


def _watches_are(api: StandIn, n: int) -> bool:
    return sum(1 for r in api.seen() if r.query.get("watch") == "true") == n


def _failures_are(labels: PodLabels, n: int) -> bool:
    return labels.failures == n


def test_without_labels_the_api_is_not_read_and_in_a_pod_the_environment_says_where() -> None:
    assert pod_labels_of(KubernetesConfig(), {}) is None
    config = KubernetesConfig(labels=("app",))
    with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_HOST"):
        pod_labels_of(config, {"NODE_NAME": "node-a"})
    with pytest.raises(ConfigError, match="NODE_NAME"):
        pod_labels_of(config, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"})
    watcher = pod_labels_of(
        config, {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
                 "NODE_NAME": "node-a"}
    )  # fmt: skip
    assert watcher is not None
    e = watcher.endpoint
    assert (e.host, e.port, e.node, str(e.token_file)) == (
        "10.96.0.1",
        443,
        "node-a",
        "/var/run/secrets/kubernetes.io/serviceaccount/token",
    )
    assert watcher.names == ("label_app",)


def test_the_config_checks_label_keys_the_api_url_and_the_node() -> None:
    overrides = {
        "kubernetes.labels": ["a.b", "-x", "a_b"],
        "kubernetes.api_url": "http://10.0.0.1",
        "kubernetes.node_name": "Node_A",
    }
    with pytest.raises(ConfigError) as caught:
        load_config(overrides=overrides, environ={})
    assert caught.value.problems == [
        "command line: kubernetes.labels[1]: not a Kubernetes label key: '-x' (e.g. app, "
        "leaderworkerset.sigs.k8s.io/worker-index)",
        "command line: kubernetes.labels: 'a.b' and 'a_b' both make the label label_a_b",
        "command line: kubernetes.api_url: expected https://HOST[:PORT], got 'http://10.0.0.1'",
        "command line: kubernetes.node_name: not a node name: 'Node_A'",
    ]


def test_stop_ends_a_thread_blocked_in_the_tls_handshake(tmp_path: Path) -> None:
    """An API server that accepts the connection and never answers the TLS handshake: stop()
    ends the thread at once, not after the connection's timeout (the socket being wrapped for
    TLS was not the one stop() shut down)."""
    ca, _key = make_ca(tmp_path)
    (tmp_path / "token").write_text(TOKEN + "\n")
    with socket.create_server(("127.0.0.1", 0)) as mute:  # never accept()ed: no ServerHello
        endpoint = ApiEndpoint("127.0.0.1", mute.getsockname()[1], tmp_path / "token", ca, "n")
        labels = PodLabels(endpoint, ("app",), timeout=20.0)
        labels.start()
        wait_until(lambda: _handshaking(labels), 15, "the client's TLS handshake")
        _stops_at_once(labels)


def test_stop_ends_a_thread_whose_connection_is_not_answered(tmp_path: Path) -> None:
    """An API server whose SYNs go unanswered (unreachable, or here a listener whose queue is
    full): stop() ends the thread at once, not after the connection's timeout (no socket was
    there to shut down until the TCP connection was made)."""
    ca, _key = make_ca(tmp_path)
    (tmp_path / "token").write_text(TOKEN + "\n")
    with socket.create_server(("127.0.0.1", 0), backlog=0) as full:
        address = full.getsockname()
        with socket.create_connection(address, timeout=5):  # fills the accept queue
            with pytest.raises(TimeoutError):  # so a SYN now goes unanswered
                socket.create_connection(address, timeout=0.3).close()
            endpoint = ApiEndpoint("127.0.0.1", address[1], tmp_path / "token", ca, "n")
            labels = PodLabels(endpoint, ("app",), timeout=20.0)
            labels.start()
            wait_until(lambda: labels._conn is not None, 5, "the client's connection")
            _stops_at_once(labels)


def test_stop_ends_a_thread_reading_a_watch_the_server_will_close(tmp_path: Path) -> None:
    """The stand-in answers the watch in HTTP/1.0 (so would any server saying Connection:
    close): http.client hands the socket to the response and forgets it, so stop() found none
    to shut down and waited its timeout with the thread still reading."""
    (tmp_path / "token").write_text(TOKEN + "\n")
    with serve(tmp_path) as (api, ca):
        api.pods = [pod("llm", POD, {"app": "sglang"})]
        endpoint = ApiEndpoint("127.0.0.1", api.port, tmp_path / "token", ca, "node-a")
        labels = PodLabels(endpoint, ("app",), timeout=20.0)
        labels.start()
        try:
            wait_until(lambda: labels.lists >= 1, 5, "the pod list")
            api.push("MODIFIED", pod("llm", POD, {"app": "sglang2"}, "101"))
            wait_until(
                lambda: labels.labels()[f"uid-llm-{POD}"] == {"label_app": "sglang2"}, 5, "it"
            )
        except BaseException:
            labels.stop()
            raise
        _stops_at_once(labels)  # the watch is open, its thread blocked reading the next event


def _stops_at_once(labels: PodLabels) -> None:
    """stop() ends the thread well inside the connection's 20 s timeout (the tests' PodLabels)."""
    began = time.monotonic()
    labels.stop()
    took = time.monotonic() - began
    assert labels._thread is not None
    assert not labels._thread.is_alive(), _stack_of(labels._thread)
    assert took < 10.0, f"stop() took {took:.1f} s (the connection's timeout is 20 s)"


def _handshaking(labels: PodLabels) -> bool:
    conn = labels._conn
    return conn is not None and conn.sock is not None


def _stack_of(thread: threading.Thread) -> str:
    """Where a thread that should have ended is (for the failure message)."""
    frame = sys._current_frames().get(thread.ident or -1)
    return "".join(traceback.format_stack(frame)) if frame is not None else "(no frame)"
