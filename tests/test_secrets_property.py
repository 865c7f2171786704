"""Generated secrets, in every shape and every input position of a real journal, reach no surface.

Shapes: random high-entropy tokens, GitHub classic and fine-grained tokens, JWTs, AWS access key
ids, Slack tokens and webhook paths, Azure SAS signatures, and plain words that only their name
gives away. Positions: server_args fields (named, inside other strings, inside JSON config
strings, in URLs), the command line (`_CMDLINE`), failure lines and other log lines that become
facts or evidence. Surfaces: the state directory's bytes (database, WAL), `scan`, `startups`,
`diff`, `check` and `report` (JSON and text), the daemon's log, /metrics, its status page and its
Alertmanager push bodies.
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from journaltools import StartupScript, build_journal
from pushcapture import PushCapture
from sentinelproc import Sentinels, wait_until

from sglang_sentinel.cli import main
from sglang_sentinel.redact import redact_cmdline, redact_value, scrub_text

UNIT = "sglang-secret-test.service"
ALNUM = string.ascii_letters + string.digits


# -- secret shapes ----------------------------------------------------------------------------


def _mixed(draw: Any, size: int) -> str:
    """`size` letters and digits with at least two of each class (what a random key has)."""
    body = draw(st.text(ALNUM, min_size=size - 6, max_size=size - 6))
    fixed = draw(st.permutations(["Q", "Z", "k", "w", "7", "3"]))
    return str("".join(fixed[:3]) + body + "".join(fixed[3:]))


@st.composite
def random_token(draw: Any) -> str:
    return _mixed(draw, draw(st.integers(24, 48)))


@st.composite
def github_token(draw: Any) -> str:
    if draw(st.booleans()):
        return str(draw(st.sampled_from(["ghp_", "gho_", "ghs_"]))) + _mixed(draw, 36)
    return "github_pat_" + _mixed(draw, 22) + "_" + _mixed(draw, 59)


@st.composite
def jwt(draw: Any) -> str:
    part = st.text(ALNUM + "_-", min_size=10, max_size=40)
    return f"eyJ{draw(part)}.eyJ{draw(part)}.{draw(part)}"


@st.composite
def aws_key_id(draw: Any) -> str:
    upper = string.ascii_uppercase + string.digits
    return str(draw(st.sampled_from(["AKIA", "ASIA"]))) + str(
        draw(st.text(upper, min_size=16, max_size=16))
    )


@st.composite
def slack_token(draw: Any) -> str:
    digits = st.text(string.digits, min_size=10, max_size=13)
    return f"xoxb-{draw(digits)}-{draw(digits)}-{_mixed(draw, 24)}"


@st.composite
def plain_word(draw: Any) -> str:
    """A password a person chose: lower-case, no shape of its own; only its name gives it away."""
    word = draw(st.text(string.ascii_lowercase + string.digits, min_size=14, max_size=30))
    assume(len(set(word)) >= 6 and not set(word) <= set(string.hexdigits.lower()))
    return str(word)


SHAPED = st.one_of(random_token(), github_token(), jwt(), aws_key_id(), slack_token())
ANY_SECRET = st.one_of(SHAPED, plain_word())


# -- positions --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Secrets:
    """One secret per kind of position; `named` ones may be plain words."""

    field: str  # api_key=, x_key=, admin_api_key=
    in_string: str  # Bearer / --api-key inside a string field
    in_json: str  # a JSON config string
    url: str  # a URL password, a SAS sig, a webhook path
    cmdline: str  # --api-key, --header, --api-kee, env
    failure: str  # failure reasons
    shaped: str  # a shaped token with no name: anywhere in a path, a reason, a flag value
    bare_cmd: str  # a shaped token as the value of a flag with a harmless name

    def all(self) -> list[str]:
        return [
            self.field,
            self.in_string,
            self.in_json,
            self.url,
            self.cmdline,
            self.failure,
            self.shaped,
            self.bare_cmd,
        ]


secrets_strategy = st.builds(
    Secrets,
    field=ANY_SECRET,
    in_string=ANY_SECRET,
    in_json=ANY_SECRET,
    url=ANY_SECRET,
    cmdline=ANY_SECRET,
    failure=ANY_SECRET,
    shaped=SHAPED,
    bare_cmd=SHAPED,
)

EXAMPLE = Secrets(
    field="hunter2hunter2hunter2",
    in_string="Zq8xW2pLm4Nv7Rt1Yb6Kc3Hd9Fg5Js0A",
    in_json="eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    url="sv2022abcDEF123xyzSIGsig9988",
    cmdline="ghp_Zq8xW2pLm4Nv7Rt1Yb6Kc3Hd9Fg5Js0AbCd",
    failure="correcthorsebatterystaple42",
    shaped="AKIAIOSFODNN7EXAMPLE",
    bare_cmd="xoxb-1234567890-1234567890-Zq8xW2pLm4Nv7Rt1Yb6Kc3Hd",
)


def server_args(s: Secrets) -> str:
    headers = json.dumps(
        {
            "headers": {"Authorization": f"Bearer {s.in_json}", "X-Api-Key": s.in_json},
            "storage": {"client_secret": s.in_json, "bucket": "b", "k": s.shaped},
        }
    )
    return (
        "ServerArgs(model_path='/models/Qwen3.5-122B-A10B', tp_size=4, dp_size=1, "
        f"api_key='{s.field}', admin_api_key='{s.field}', x_key='{s.field}', "
        f"private_key_path='{s.field}', "
        f"tool_server='Bearer {s.in_string}', "
        f"sampling_defaults='--api-key {s.in_string} --api-key={s.in_string}', "
        f"json_model_override_args='{headers}', "
        f"otlp_traces_endpoint='https://user:{s.url}@otel.example:4318/v1', "
        f"model_loader_extra_config='https://acct.blob.core.windows.net/c?sv=1&sig={s.url}&se=2', "
        f"webhook_url='https://hooks.slack.com/services/T0/B0/{s.url}', "
        f"served_model_name='qwen-{s.shaped}', "
        "enable_piecewise_cuda_graph=True)"
    )


def cmdline(s: Secrets) -> str:
    return (
        f"HF_TOKEN={s.cmdline} /opt/sglang/.venv/bin/python3 -m sglang.launch_server "
        f"--model-path /models/Qwen3.5-122B-A10B --tp-size 4 --api-key {s.cmdline} "
        f"--admin-api-key={s.cmdline} --header 'Authorization: Bearer {s.cmdline}' "
        f"--api-kee {s.cmdline} --api-key-x {s.cmdline} -k {s.cmdline} "
        f"--tool-server {s.bare_cmd}"
    )


def failure_lines(s: Secrets) -> list[str]:
    return [
        f"Scheduler hit an exception: api-key={s.failure}",
        f"Scheduler hit an exception: ValueError: password: {s.failure}",
        f"Scheduler hit an exception: x-api-key: {s.failure}",
        f"Scheduler hit an exception: unrecognized arguments: --api-kee {s.failure}",
        # Issue 20's shapes: a secret's name before the value, a qualified key with a suffix,
        # a short option.
        f"Scheduler hit an exception: OSError: HF_TOKEN {s.failure} rejected; "
        f"private_key_path={s.failure}",
        f"Scheduler hit an exception: unrecognized arguments: --api-key-x {s.failure} "
        f"-k {s.failure}",
        f"Scheduler hit an exception: bad token {s.shaped}",
    ]


def startup(
    day: str, s: Secrets | None, *, fail: int | None = None, mrr: int = 48
) -> StartupScript:
    """A startup with the secrets of `s` everywhere; `fail` picks a failure line instead of ready."""
    script = StartupScript(
        unit=UNIT,
        start=f"{day} 10:00:00",
        boot_at="2026-01-01 00:00:00",
        cmdline=cmdline(s) if s else "/opt/sglang/.venv/bin/python3 -m sglang.launch_server",
    )
    script.started(f"{day} 10:00:00")
    plain = "ServerArgs(model_path='/models/Qwen3.5-122B-A10B', tp_size=4, dp_size=1)"
    script.line(f"[{day} 10:00:05] server_args={server_args(s) if s else plain}")
    if s is not None:
        script.line(f"[{day} 10:00:06] Disable piecewise CUDA graph because of {s.shaped} option")
        script.line(
            f"[{day} 10:00:07 TP0] Config file not found at /cfg/E=128,N=384,{s.shaped}.json"
        )
    script.line(
        f"[{day} 10:00:50 TP0] max_total_num_tokens=1000, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=4096, "
        "available_gpu_mem=10.00 GB"
    )
    if fail is not None and s is not None:
        script.line(f"[{day} 10:00:52 TP0] {failure_lines(s)[fail]}")
        script.process_exited(1)
        script.failed()
    else:
        script.line(f"[{day} 10:00:55] The server is fired up and ready to roll!")
    return script


def journal_with(s: Secrets, tmp: Path) -> Path:
    """Baseline (clean), a ready startup full of secrets (a regression: evidence), then failures."""
    scripts = [startup("2026-01-02", None), startup("2026-01-03", s, mrr=20)]
    scripts += [startup(f"2026-01-{4 + i:02d}", s, fail=i) for i in range(len(failure_lines(s)))]
    exports = [sc.write(tmp / f"{i}.export") for i, sc in enumerate(scripts)]
    return build_journal(exports, tmp / "journal")


def assert_clean(secrets: list[str], surface: str, text: str | bytes) -> None:
    data = text if isinstance(text, bytes) else text.encode()
    for secret in secrets:
        assert secret.encode() not in data, f"{secret!r} leaked into {surface}"


def state_bytes(state: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(state.rglob("*")) if p.is_file())


def cli_surfaces(state: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    base = ["--state-dir", str(state), "--unit", UNIT]
    for name, argv in {
        "startups": ["startups", *base],
        "diff": ["diff", *base],
        "check": ["check", *base],
        "report": ["report", *base],
        "report --html": ["report", *base, "--html", "-"],
        "baseline": ["baseline", *base],
    }.items():
        for extra in ([], ["--json"]) if "report" not in name else ([],):
            main([*argv, *extra])
            captured = capsys.readouterr()
            out[f"{name} {' '.join(extra)}"] = captured.out + captured.err
    return out


# -- unit level: fast, many examples ----------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(secret=ANY_SECRET, shaped=SHAPED)
def test_redaction_functions_remove_every_generated_secret(secret: str, shaped: str) -> None:
    s = Secrets(secret, secret, secret, secret, secret, secret, shaped, shaped)
    from sglang_sentinel.serverargs import parse_server_args

    args = parse_server_args(server_args(s)).args
    assert_clean([secret, shaped], "server_args", json.dumps(args))
    assert args["model_path"] == "/models/Qwen3.5-122B-A10B" and args["tp_size"] == 4
    assert_clean([secret, shaped], "cmdline", " ".join(redact_cmdline(cmdline(s))))
    for line in failure_lines(s):
        assert_clean([secret, shaped], "failure line", scrub_text(line))
    assert_clean([shaped], "shaped value", str(redact_value("served_model_name", shaped)))


@pytest.mark.parametrize(
    "harmless",
    [
        "/models/Qwen3.5-122B-A10B",
        "/models/Meta-Llama-3.1-70B-Instruct-AWQ-INT4",
        "6a1f0c2e9b7d4e3f8a5b1c0d2e4f6a8b",
        "c37e91d0-4a5b-4f6e-9d8c-7b6a5f4e3d2c",
        "E=128,N=384,device_name=NVIDIA_H100_80GB_HBM3.json",
        "E=257,N=256,device_name=NVIDIA_B200,dtype=fp8_w8a8,block_shape=[128, 128].json",
        "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "max_total_num_tokens=507050, max_running_requests=48, context_len=262144",
        "12345678901234567890123",
        "Scheduler hit an exception: KeyError: missing key model.layers.10.mlp.weight",
        "Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104]",
        "DeepSeek-V3-0324 Qwen3-235B-A22B-Instruct-2507 nvidia/Llama-3_3-Nemotron-Super-49B-v1_5",
    ],
)
def test_evidence_and_facts_survive(harmless: str) -> None:
    """Model paths, hashes, invocation ids, UUIDs and numbers are not secrets."""
    assert scrub_text(harmless) == harmless
    assert redact_value("model_path", harmless) == harmless


# -- every surface: scan, CLI, daemon -----------------------------------------------------------


@pytest.fixture
def sentinels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sentinels]:
    s = Sentinels(tmp_path_factory.mktemp("sentinels"))
    try:
        yield s
    finally:
        s.stop_all()


@pytest.fixture
def pushes() -> Iterator[PushCapture]:
    p = PushCapture()
    yield p
    p.close()


def run_every_surface(
    s: Secrets,
    tmp: Path,
    capsys: pytest.CaptureFixture[str],
    sentinels: Sentinels,
    pushes: PushCapture,
) -> None:
    secrets = s.all()
    journal = journal_with(s, tmp)
    state = tmp / "state"
    for flag in (["--json"], []):
        main(
            [
                "scan",
                "--journal-dir",
                str(journal),
                "--state-dir",
                str(state),
                "--unit",
                UNIT,
                *flag,
            ]
        )
        captured = capsys.readouterr()
        assert_clean(secrets, f"scan {flag}", captured.out + captured.err)
    doc_check = json.loads(_json_of(capsys, ["check", "--state-dir", str(state), "--unit", UNIT]))
    # Facts and evidence survive: the model, the failures, the regression and its flags.
    latest = doc_check["startups"][-1]
    assert latest["outcome"] == "failed" and latest["facts"]["model_path"] == (
        "/models/Qwen3.5-122B-A10B"
    )
    assert "bad token <redacted>" in latest["failure_reason"]
    for name, text in cli_surfaces(state, capsys).items():
        assert_clean(secrets, name, text)
    assert_clean(secrets, "state directory after scan", state_bytes(state))
    # The baseline file carries the startup's ledger (its redacted example lines) and decode
    # samples: nothing the state does not hold, so no secret either.
    base = ["--state-dir", str(state), "--unit", UNIT]
    listed = json.loads(_json_of(capsys, ["startups", *base]))["startups"]
    ready = [r["invocation_id"] for r in listed if r["outcome"] == "ready"]
    exported = tmp / "baseline.json"
    assert main(["baseline", *base, "--pin", ready[0]]) == 0
    assert main(["baseline", *base, "--export", str(exported)]) == 0
    captured = capsys.readouterr()
    assert_clean(secrets, "baseline --export", captured.out + captured.err)
    assert json.loads(exported.read_text())["observed"]["ledger"]["templates"]
    assert_clean(secrets, "the exported baseline file", exported.read_bytes())

    # The daemon, from a fresh state, with the Alertmanager push enabled.
    config = tmp / "config.yaml"
    config.write_text(
        f"units: [{UNIT}]\nalertmanager:\n  urls: ['{pushes.url}']\n  resend_interval_seconds: 5\n"
    )
    daemon_state = tmp / "daemon-state"
    d = sentinels.start("--config", str(config), "--journal-dir", str(journal), state=daemon_state)
    # startups_total{outcome="failed"} is there (at 0) from the first scrape and a
    # check="startup_failed" series from the first startup compared: wait for every startup
    # of the journal (the daemon publishes after each slice it reads).
    counted = [
        f'sglang_sentinel_startups_total{{outcome="failed",unit="{UNIT}"}} '
        f"{len(failure_lines(s))}.0",
        f'sglang_sentinel_startups_total{{outcome="ready",unit="{UNIT}"}} 2.0',
    ]
    body = wait_until(
        d.scrape_when(lambda b: all(c in b for c in counted)),
        30,
        "the failed startups on /metrics",
    )
    # The pushes follow the publishes on their own thread; the last startup's failure (its
    # reason "bad token <redacted>") is the last one to be pushed.
    wait_until(lambda: b"bad token" in b"".join(pushes.bodies), 30, "the last failure pushed")
    d.wait_event("finding_raised")
    _, _, page = d.get("/")
    assert_clean(secrets, "/metrics", body)
    assert_clean(secrets, "status page", page)
    assert_clean(secrets, "daemon log", d.stderr())
    assert_clean(secrets, "Alertmanager pushes", b"".join(pushes.bodies))
    assert b"startup failed" in b"".join(pushes.bodies)
    assert_clean(secrets, "daemon state directory", state_bytes(daemon_state))


def _json_of(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    main([*argv, "--json"])
    return capsys.readouterr().out


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(s=EXAMPLE)
@given(s=secrets_strategy)
def test_generated_secrets_reach_no_surface(
    s: Secrets,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    sentinels: Sentinels,
    pushes: PushCapture,
) -> None:
    """Scan, every CLI command (JSON and text), the state files, and a live daemon's log,
    /metrics, status page and Alertmanager pushes: no generated secret anywhere."""
    run_every_surface(s, tmp_path_factory.mktemp("secrets"), capsys, sentinels, pushes)
    sentinels.stop_all()
    sentinels.started.clear()


K = "Zq8xW2pLm4Nv7Rt1Yb6Kc3Hd9Fg5Js0A"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Scheduler hit an exception: api-key={K}", "Scheduler hit an exception: api-key=<redacted>"),
        ("Scheduler hit an exception: ValueError: password: hunter2", "Scheduler hit an exception: ValueError: password: <redacted>"),
        ("x-api-key: hunter2", "x-api-key: <redacted>"),
        ("error: unrecognized arguments: --api-kee hunter2", "error: unrecognized arguments: --api-kee <redacted>"),
        ("x_key=hunter2", "x_key=<redacted>"),
        ("cache_key=abc sort_key=def", "cache_key=abc sort_key=def"),
        (f"ghp_{K[:36]} and github_pat_{K[:22]}_{K}", "<redacted> and <redacted>"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "<redacted>"),
        ("https://a.blob.core.windows.net/c?sv=2022-11-02&sig=abc%2Bdef%3D&se=1", "https://a.blob.core.windows.net/c?sv=2022-11-02&sig=<redacted>&se=1"),
        ("https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX", "https://hooks.slack.com/services/<redacted>"),
        ("aws AKIAIOSFODNN7EXAMPLE key", "aws <redacted> key"),
        (f"bad token {K}", "bad token <redacted>"),
        (f"/opt/{K}/x", "/opt/<redacted>/x"),
        ("the token is invalid", "the token is invalid"),
    ],
)  # fmt: skip
def test_shapes_from_issue_9(text: str, expected: str) -> None:
    assert scrub_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Scheduler hit an exception: ValueError: invalid HF_TOKEN {K}", "Scheduler hit an exception: ValueError: invalid HF_TOKEN <redacted>"),
        ("Scheduler hit an exception: OSError: HF_TOKEN hunter2hunter2hunter2 rejected", "Scheduler hit an exception: OSError: HF_TOKEN <redacted> rejected"),
        ("Scheduler hit an exception: PermissionError: bad token hunter2hunter2hunter2.", "Scheduler hit an exception: PermissionError: bad token <redacted>."),
        ("Scheduler hit an exception: HF_TOKEN correcthorsebatterystaple", "Scheduler hit an exception: HF_TOKEN <redacted>"),
        ("Scheduler hit an exception: HF_TOKEN variable is required", "Scheduler hit an exception: HF_TOKEN variable is required"),
        ("Scheduler hit an exception: ValueError: token 'hunter2hunter2hunter2' expired", "Scheduler hit an exception: ValueError: token '<redacted>' expired"),
        ("error: unrecognized arguments: --api-key-x hunter2hunter2", "error: unrecognized arguments: --api-key-x <redacted>"),
        ("error: unrecognized arguments: --api-key-x=hunter2hunter2", "error: unrecognized arguments: --api-key-x=<redacted>"),
        ("error: unrecognized arguments: -k hunter2hunter2 --port 1", "error: unrecognized arguments: -k <redacted> --port 1"),
        ("error: unrecognized arguments: -p 'hunter2 hunter2'", "error: unrecognized arguments: -p <redacted>"),
        ("Scheduler hit an exception: private_key_path=/keys/hunter2.pem", "Scheduler hit an exception: private_key_path=<redacted>"),
        # Two shapes of detect-secrets 1.5's plugin set the hand-written ones lacked.
        ("key 0123456789abcdef0123456789abcdef-us12 rejected", "key <redacted> rejected"),
        ("ValueError: -----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY----- bad", "ValueError: <redacted> bad"),
        ("ValueError: -----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1r", "ValueError: <redacted>"),
        # Prose and facts keep theirs: a name that is no secret, a key path with dots, a count.
        ("Scheduler hit an exception: KeyError: missing key model.layers.10.mlp.", "Scheduler hit an exception: KeyError: missing key model.layers.10.mlp."),
        ("max_total_num_tokens 507050 and the token is invalid", "max_total_num_tokens 507050 and the token is invalid"),
        ("Capture cuda graph bs [1, 2, 4] -pp 2 -kv fp8", "Capture cuda graph bs [1, 2, 4] -pp 2 -kv fp8"),
    ],
)  # fmt: skip
def test_shapes_from_issue_20(text: str, expected: str) -> None:
    """The secret shapes issue 20 found reaching state and JSON, and their look-alikes."""
    assert scrub_text(text) == expected


def test_a_slack_webhook_in_a_label_field_of_the_config_is_refused(tmp_path: Path) -> None:
    """A Slack webhook URL pasted into a label-valued config field (gpu, instance, job,
    external_labels) is a config error naming the field, never published as a label."""
    from sglang_sentinel.config import load_config
    from sglang_sentinel.errors import ConfigError

    hook = "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
    path = tmp_path / "c.yaml"
    path.write_text(
        f"gpu: '{hook}'\nalertmanager:\n  job: '{hook}'\n  external_labels: {{hook: '{hook}'}}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={})
    assert [p.split(": ")[1] for p in err.value.problems] == [
        "gpu",
        "alertmanager.job",
        "alertmanager.external_labels.hook",
    ]
    assert "XXXXXXXX" not in str(err.value.problems)


def test_issue_20_short_options_and_qualified_keys_in_the_command_line() -> None:
    argv = redact_cmdline(
        "env -k hunter2hunter2 python3 -m sglang.launch_server --tp-size 4 -p hunter2hunter2"
        " --api-key-x hunter2hunter2 --private-key-path /k/hunter2hunter2.pem --port 30000"
    )
    assert "hunter2" not in " ".join(argv)
    assert argv == (
        "env", "-k", "<redacted>", "python3", "-m", "sglang.launch_server", "--tp-size", "4",
        "-p", "<redacted>", "--api-key-x", "<redacted>", "--private-key-path", "<redacted>",
        "--port", "30000",
    )  # fmt: skip


def test_bearer_and_flags_inside_a_server_args_string_and_json_value() -> None:
    assert redact_value("tool_server", f"Bearer {K}x") == "Bearer <redacted>"
    assert redact_value("x", "--api-key hunter2 --api-key=hunter2 --port 1") == (
        "--api-key <redacted> --api-key=<redacted> --port 1"
    )
    value = redact_value("cfg", '{"h": {"Authorization": "Bearer hunter2"}, "n": 1}')
    assert json.loads(value) == {"h": {"Authorization": "<redacted>"}, "n": 1}
    argv = redact_cmdline("python -m x --header 'Authorization: Bearer hunter2' --port 1")
    assert "hunter2" not in " ".join(argv) and argv[-2:] == ("--port", "1")
