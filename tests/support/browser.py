"""Debian's chromium, headless, for the status page tests: render a URL, dump the DOM, screenshot,
and list the requests the page itself made (from Chromium's own net log).

Every run gets a new profile directory; the browser's own background traffic (updates, time,
accounts) is switched off where a flag exists and kept off the network by the resolver rules,
so only loopback is reachable.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
RUN_TIMEOUT_S = 60.0
ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "artifacts"  # git-ignored
WRITTEN: list[Path] = []  # artifacts written by this test run, named in the terminal summary


def require_chromium() -> Path:
    """The browser, else skip on a workstation; in CI a missing browser is a failure."""
    if CHROMIUM.exists() and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing in CI; apt-get install chromium (scripts/bootstrap.sh)")
    pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium; CI=1 makes this fail)")


@dataclass(frozen=True)
class Render:
    dom: str
    page_requests: list[str]  # URLs the page asked for (initiated by the page's origin)
    loopback_requests: list[str]  # every URL on 127.0.0.1, whoever asked


def _argv(profile: Path, *extra: str) -> list[str]:
    return [
        str(require_chromium()),
        "--headless",
        "--no-sandbox",  # tests run as root, where the sandbox refuses to start
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        f"--user-data-dir={profile}",
        *extra,
    ]


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    if result.returncode != 0:
        pytest.fail(f"chromium exited {result.returncode}: {result.stderr[-2000:]}")
    return result


def render(url: str) -> Render:
    """Load `url`, return the DOM after rendering and the requests seen in the net log."""
    with tempfile.TemporaryDirectory(prefix="sentinel-chromium-") as tmp:
        profile, netlog = Path(tmp) / "profile", Path(tmp) / "net.json"
        result = _run(_argv(profile, f"--log-net-log={netlog}", "--dump-dom", url))
        events = json.loads(netlog.read_text())
    types = {v: k for k, v in events["constants"]["logEventTypes"].items()}
    origin = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(url))
    page, loopback = [], []
    for event in events["events"]:
        if types.get(event["type"]) != "URL_REQUEST_START_JOB":
            continue
        params = event.get("params", {})
        if "url" not in params:  # the job's end event
            continue
        if params.get("initiator") == origin:
            page.append(params["url"])
        if urllib.parse.urlsplit(params["url"]).hostname == "127.0.0.1":
            loopback.append(params["url"])
    return Render(result.stdout, page, loopback)


def screenshot(url: str, name: str, size: str = "1280,900") -> Path:
    """Screenshot `url` into build/artifacts/NAME (kept by CI); returns the path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    out = ARTIFACTS / name
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="sentinel-chromium-") as tmp:
        _run(_argv(Path(tmp) / "profile", f"--screenshot={out}", f"--window-size={size}", url))
    if not out.is_file() or out.stat().st_size == 0:
        pytest.fail(f"chromium wrote no screenshot at {out}")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{out} is not a PNG"
    WRITTEN.append(out)
    return out
