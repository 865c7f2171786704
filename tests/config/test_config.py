"""Config loading: defaults, precedence, and every problem reported at once by its dotted path."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_sentinel.config import (
    AlertmanagerConfig,
    Config,
    ListenAddress,
    config_to_dict,
    load_config,
)
from sglang_sentinel.config import load as config_module
from sglang_sentinel.config.schema import JournalConfig, LogConfig, RulesConfig, describe_keys
from sglang_sentinel.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(path: Path, **kwargs: Any) -> list[str]:
    kwargs.setdefault("environ", {})
    with pytest.raises(ConfigError) as info:
        load_config(path, **kwargs)
    return info.value.problems


@pytest.fixture
def no_default_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the default path at a file that does not exist, whatever the host has in /etc."""
    absent = tmp_path / "etc" / "config.yaml"
    monkeypatch.setattr(config_module, "DEFAULT_CONFIG_PATH", absent)
    return absent


# -- defaults and files ------------------------------------------------------------------------


def test_missing_default_file_gives_defaults(no_default_file: Path) -> None:
    config = load_config(None, environ={})
    assert config == Config()
    assert config.units == ("sglang-qwen.service",)
    assert config.journal == JournalConfig(directory=None, files=())
    assert config.state_dir == Path("/var/lib/sglang-sentinel")
    assert config.listen == ListenAddress("127.0.0.1", 19110)
    assert config.rules == RulesConfig(dirs=(), policy=None)
    assert dict(config.policy) == {}
    assert config.log == LogConfig("auto", "info")
    assert config.alertmanager == AlertmanagerConfig()
    assert config.alertmanager.resend_interval_seconds == 60.0
    assert config.alertmanager.timeout_seconds == 5.0
    assert config.alertmanager.resolve_resend_seconds == 300.0
    assert config.checkpoint_interval_seconds == 5.0
    assert config.max_replay_age_seconds is None


def test_missing_default_file_is_an_error_when_required(no_default_file: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, required=True, environ={})
    assert info.value.problems == [f"config file {no_default_file} not found"]


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    assert problems_of(path) == [f"config file {path} not found"]


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n", "---\n"])
def test_empty_file_gives_defaults(tmp_path: Path, text: str) -> None:
    assert load_config(write(tmp_path, text), environ={}) == Config()


def test_empty_sections_give_defaults(tmp_path: Path) -> None:
    """A section whose keys are all commented out is YAML null, not a mistake."""
    path = write(tmp_path, "journal:\nrules:\nlog:\nalertmanager:\npolicy:\n")
    assert load_config(path, environ={}) == Config()


FULL = """\
units: [sglang-qwen.service, sglang-llama, "sglang@big"]
journal:
  directory: /var/log/journal/remote
state_dir: /srv/sentinel
listen: "[::1]:19111"
rules:
  dirs: [/etc/sglang-sentinel/rules.d, local-rules]
  policy: /etc/sglang-sentinel/policy.yaml
policy:
  checks:
    max_running_requests_drop: {warning_drop_percent: 3}
log: {format: json, level: debug}
alertmanager:
  urls: ["http://am-1:9093", "https://ops:hunter22@am-2.example.com/alertmanager"]
  resend_interval_seconds: 2m
  timeout_seconds: 10
  resolve_resend_seconds: 1h
  generator_url: https://grafana.example.com/d/sglang?var-host=gpu1
  external_labels: {cluster: gpu-a, host: gpu1}
  bearer_token_file: /etc/sglang-sentinel/am-token
checkpoint_interval_seconds: 2.5
max_replay_age_seconds: 1d
"""


def test_full_file_loads_every_key(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FULL), environ={})
    assert config == Config(
        units=("sglang-qwen.service", "sglang-llama.service", "sglang@big.service"),
        journal=JournalConfig(directory=Path("/var/log/journal/remote")),
        state_dir=Path("/srv/sentinel"),
        listen=ListenAddress("::1", 19111),
        rules=RulesConfig(
            dirs=(Path("/etc/sglang-sentinel/rules.d"), tmp_path / "local-rules"),
            policy=Path("/etc/sglang-sentinel/policy.yaml"),
        ),
        policy={"checks": {"max_running_requests_drop": {"warning_drop_percent": 3}}},
        log=LogConfig("json", "debug"),
        alertmanager=AlertmanagerConfig(
            urls=("http://am-1:9093", "https://ops:hunter22@am-2.example.com/alertmanager"),
            resend_interval_seconds=120.0,
            timeout_seconds=10.0,
            resolve_resend_seconds=3600.0,
            generator_url="https://grafana.example.com/d/sglang?var-host=gpu1",
            external_labels={"cluster": "gpu-a", "host": "gpu1"},
            bearer_token_file=Path("/etc/sglang-sentinel/am-token"),
        ),
        checkpoint_interval_seconds=2.5,
        max_replay_age_seconds=86400.0,
    )


def test_full_file_round_trips_through_config_to_dict(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FULL), environ={})
    dumped = yaml.safe_dump(config_to_dict(config, mask_secrets=False), sort_keys=False)
    again = tmp_path / "again"
    again.mkdir()
    assert load_config(write(again, dumped), environ={}) == config


def test_config_is_immutable(no_default_file: Path) -> None:
    config = load_config(None, environ={"SENTINEL_STATE_DIR": ""})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.units = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.policy["x"] = 1  # type: ignore[index]


def test_policy_is_copied_not_shared(tmp_path: Path) -> None:
    inline = {"checks": {"cuda_graph_disabled": {"severity": "warning"}}}
    config = load_config(write(tmp_path, ""), overrides={"policy": inline}, environ={})
    inline["checks"]["cuda_graph_disabled"]["severity"] = "info"
    assert config.policy["checks"]["cuda_graph_disabled"]["severity"] == "warning"


@pytest.mark.parametrize(
    ("written", "seconds"),
    [(7, 7.0), (2.5, 2.5), ("30s", 30.0), ("2m", 120.0), ("1h", 3600.0), ("1.5h", 5400.0),
     ("500ms", 0.5), ("45", 45.0), ("1d", 86400.0)],
)  # fmt: skip
def test_durations_accept_numbers_and_suffixed_strings(
    tmp_path: Path, written: object, seconds: float
) -> None:
    path = write(tmp_path, yaml.safe_dump({"max_replay_age_seconds": written}))
    assert load_config(path, environ={}).max_replay_age_seconds == seconds


@pytest.mark.parametrize(
    ("written", "unit"),
    [("sglang-qwen", "sglang-qwen.service"), ("sglang-qwen.service", "sglang-qwen.service"),
     ("sglang@qwen", "sglang@qwen.service"), ("sglang.socket", "sglang.socket"),
     ("run-u12.scope", "run-u12.scope"), ("sglang.v2", "sglang.v2.service")],
)  # fmt: skip
def test_unit_names_get_service_suffix_when_they_have_none(
    tmp_path: Path, written: str, unit: str
) -> None:
    path = write(tmp_path, yaml.safe_dump({"units": [written]}))
    assert load_config(path, environ={}).units == (unit,)


@pytest.mark.parametrize(
    ("written", "host", "port"),
    [("0.0.0.0:9000", "0.0.0.0", 9000), ("localhost:1", "localhost", 1),
     ("[::]:65535", "::", 65535), ("[fe80::1]:19110", "fe80::1", 19110)],
)  # fmt: skip
def test_listen_forms(tmp_path: Path, written: str, host: str, port: int) -> None:
    config = load_config(write(tmp_path, f"listen: '{written}'\n"), environ={})
    assert config.listen == ListenAddress(host, port)
    assert str(config.listen) == written


def test_resolve_resend_may_be_zero(tmp_path: Path) -> None:
    """0 = a resolved alert is pushed once, not repeated."""
    path = write(tmp_path, "alertmanager: {resolve_resend_seconds: 0}\n")
    assert load_config(path, environ={}).alertmanager.resolve_resend_seconds == 0.0


def test_relative_paths_in_the_file_are_relative_to_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "state_dir: state\njournal: {files: [j/a.journal]}\n")
    config = load_config(path, environ={})
    assert config.state_dir == tmp_path / "state"
    assert config.journal.files == (tmp_path / "j" / "a.journal",)


def test_relative_paths_from_the_command_line_stay_as_given(tmp_path: Path) -> None:
    path = write(tmp_path, "")
    config = load_config(path, overrides={"state_dir": "state"}, environ={})
    assert config.state_dir == Path("state")


# -- mistakes ----------------------------------------------------------------------------------

MISTAKES = [
    # unknown keys, with and without a suggestion
    ("unitz: [a]\n", "unknown key 'unitz' (did you mean 'units'?)"),
    ("journal: {dirctory: /x}\n", "journal: unknown key 'dirctory' (did you mean 'directory'?)"),
    ("alertmanager: {url: ['http://a']}\n",
     "alertmanager: unknown key 'url' (did you mean 'urls'?)"),
    ("colour: red\n", "unknown key 'colour'"),
    ("'a[b': 1\n", "unknown key 'a[b'"),
    ("log: {'x[.y': 1}\n", "log: unknown key 'x[.y'"),
    ("1: x\n", "unknown key 1"),
    # wrong types
    ("units: sglang-qwen.service\n", "units: expected a list, got 'sglang-qwen.service'"),
    ("units: [42]\n", "units[0]: expected a unit name, got 42"),
    ("journal: [/x]\n", "journal: expected a mapping, got a list"),
    ("policy: [a]\n", "policy: expected a mapping, got a list"),
    ("state_dir: 3\n", "state_dir: expected a path, got 3"),
    ("state_dir:\n",
     "state_dir: needs a value (remove the key for the default '/var/lib/sglang-sentinel')"),
    ("checkpoint_interval_seconds: true\n",
     "checkpoint_interval_seconds: expected seconds or a duration like '30s', '2m', '1h'; "
     "got true"),
    ("alertmanager: {external_labels: {env: yes}}\n",
     "alertmanager.external_labels.env: expected a string (quote it), got true"),
    # bad values
    ("units: []\n", "units: at least one unit, container or pod is needed, e.g. [sglang-qwen.service]"),
    ("containers: ['bad name']\n", "containers[0]: not a Docker container name: 'bad name' "
     "(letters, digits, '_', '.', '-'; e.g. sglang-qwen)"),
    ("units: ['sglang qwen']\n", "units[0]: not a systemd unit name: 'sglang qwen'"),
    ("units: ['sglang@']\n", "units[0]: 'sglang@' is a template; name an instance, "
     "e.g. 'sglang@NAME'"),
    ("units: [a, a.service]\n", "units[1]: duplicate of an earlier entry: 'a.service'"),
    ("log: {format: xml}\n", "log.format: must be one of auto, json, console; got 'xml'"),
    ("log: {level: verbose}\n",
     "log.level: must be one of debug, info, warning, error; got 'verbose'"),
    ("alertmanager: {resend_interval_seconds: 1s}\n",
     "alertmanager.resend_interval_seconds: must be between 5 and 600 seconds, got '1s'"),
    ("alertmanager: {timeout_seconds: 0}\n",
     "alertmanager.timeout_seconds: must be more than 0 seconds, got 0"),
    ("alertmanager: {timeout_seconds: 90}\n",
     "alertmanager.timeout_seconds: must not exceed resend_interval_seconds (60), got 90"),
    ("checkpoint_interval_seconds: 2h\n",
     "checkpoint_interval_seconds: must be between 0 and 3600 seconds, got '2h'"),
    ("max_replay_age_seconds: -5\n", "max_replay_age_seconds: must be more than 0 seconds, got -5"),
    ("alertmanager: {resolve_resend_seconds: -1}\n",
     "alertmanager.resolve_resend_seconds: must be between 0 and 86400 seconds, got -1"),
    ("alertmanager: {external_labels: {bad-name: x}}\n",
     "alertmanager.external_labels: not a label name: 'bad-name'"),
    ("alertmanager: {external_labels: {__name__: x}}\n",
     "alertmanager.external_labels: label names starting with '__' are reserved: '__name__'"),
    ("journal: {directory: /j, files: [/f.journal]}\n",
     "journal.directory: cannot be combined with journal.files; set one"),
    # listen
    ("listen: localhost\n", "listen: expected HOST:PORT, got 'localhost'"),
    ("listen: 19110\n",
     "listen: expected HOST:PORT (e.g. 127.0.0.1:19110 or [::1]:19110), got 19110"),
    ("listen: '[::1]'\n", "listen: expected HOST:PORT, got '[::1]'"),
    ("listen: '::1:80'\n", "listen: an IPv6 address needs brackets, e.g. '[::1]:80'"),
    ("listen: ':80'\n", "listen: no host in ':80'; use 0.0.0.0 (all IPv4) or [::] (all addresses)"),
    ("listen: 'h:0'\n", "listen: port must be 1..65535, got '0' in 'h:0'"),
    ("listen: 'h:65536'\n", "listen: port must be 1..65535, got '65536' in 'h:65536'"),
    ("listen: '[nothex]:80'\n", "listen: not an IPv6 address in brackets: '[nothex]:80'"),
    ("listen: 'my host:80'\n", "listen: not a host name or IP address: 'my host'"),
    # URLs (credentials never appear in a message)
    ("alertmanager: {urls: ['http://a:9093', 'ftp://x']}\n",
     "alertmanager.urls[1]: not an http(s) URL: 'ftp://x'"),
    ("alertmanager: {urls: ['am:9093']}\n", "alertmanager.urls[0]: not an http(s) URL: 'am:9093'"),
    ("alertmanager: {urls: ['https://u:s3cret@am:99999']}\n",
     "alertmanager.urls[0]: bad host or port in URL: 'https://u:<redacted>@am:99999'"),
    ("alertmanager: {urls: ['http://am:9093/?x=1']}\n",
     "alertmanager.urls[0]: expected http(s)://host[:port][/path] without ?query or #fragment: "
     "'http://am:9093/?x=1'"),
    ("alertmanager: {generator_url: 'grafana'}\n",
     "alertmanager.generator_url: not an http(s) URL: 'grafana'"),
    ("alertmanager: {generator_url: 'https://hooks.slack.com/services/T0SECRETAA/B0SECRETBB/"
     "slacksecretslacksecret24'}\n",
     "alertmanager.generator_url: looks like a secret (credentials, a token, key or webhook "
     "URL); it is sent with every alert: give a plain link"),
    ("alertmanager: {generator_url: 'https://admin:hunter22@grafana:3000/d/x'}\n",
     "alertmanager.generator_url: looks like a secret (credentials, a token, key or webhook "
     "URL); it is sent with every alert: give a plain link"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "problem"), MISTAKES, ids=[m[1][:50] for m in MISTAKES])
def test_each_mistake_is_named_by_its_dotted_path(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path, text)
    assert problems_of(path) == [f"{path}: {problem}"]


def test_yaml_syntax_error_reports_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "units: [a]\nlisten: x: y\n")
    assert problems_of(path) == [
        f"{path}: line 2, column 10: invalid YAML: mapping values are not allowed here"
    ]


def test_unclosed_flow_list_reports_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "units: [a\nlisten: '127.0.0.1:1'\n")
    assert problems_of(path) == [
        f"{path}: line 2, column 7: invalid YAML: expected ',' or ']', but got ':'"
    ]


@pytest.mark.parametrize(("text", "got"), [("- units\n", "a list"), ("hello\n", "'hello'")])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, got: str) -> None:
    path = write(tmp_path, text)
    assert problems_of(path) == [
        f"{path}: the top level must be a mapping of keys like 'units:', got {got}"
    ]


def test_duplicate_key_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path, "units: [a]\nlog: {level: info}\nunits: [b]\n")
    assert problems_of(path) == [
        f"{path}: line 3: duplicate key 'units' (first on line 1; the later value would "
        "silently win)"
    ]


def test_control_character_reports_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "units: [a]\nlisten: \x1f\n")
    assert problems_of(path) == [
        f"{path}: line 2, column 9: invalid YAML: character #x001f is not allowed"
    ]


def test_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"units: [\xff]\n")
    assert problems_of(path) == [f"{path}: not UTF-8 text (byte 8)"]


def test_five_mistakes_give_one_error_listing_all_five(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
unitz: [sglang-qwen]
units: ['sglang qwen']
listen: localhost
log: {format: xml}
alertmanager:
  urls: ['http://am:9093', 'ftp://x']
""",
    )
    assert problems_of(path) == [
        f"{path}: unknown key 'unitz' (did you mean 'units'?)",
        f"{path}: units[0]: not a systemd unit name: 'sglang qwen'",
        f"{path}: listen: expected HOST:PORT, got 'localhost'",
        f"{path}: log.format: must be one of auto, json, console; got 'xml'",
        f"{path}: alertmanager.urls[1]: not an http(s) URL: 'ftp://x'",
    ]


def test_config_error_message_joins_the_problems(tmp_path: Path) -> None:
    path = write(tmp_path, "listen: x\nlog: {level: loud}\n")
    with pytest.raises(ConfigError, match=re.escape("got 'x'; ")):
        load_config(path, environ={})


# -- precedence ----------------------------------------------------------------------------------


def test_overrides_beat_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "listen: '127.0.0.1:1'\nunits: [a]\njournal: {directory: /j}\n")
    config = load_config(
        path,
        overrides={"listen": "0.0.0.0:1234", "units": ["b.service"], "journal.directory": "/x"},
        environ={},
    )
    assert config.listen == ListenAddress("0.0.0.0", 1234)
    assert config.units == ("b.service",)
    assert config.journal.directory == Path("/x")


def test_environment_beats_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "state_dir: /from-file\n")
    config = load_config(path, environ={"SENTINEL_STATE_DIR": "/from-env"})
    assert config.state_dir == Path("/from-env")


def test_overrides_beat_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path, "state_dir: /from-file\n")
    config = load_config(
        path, overrides={"state_dir": "/from-cli"}, environ={"SENTINEL_STATE_DIR": "/from-env"}
    )
    assert config.state_dir == Path("/from-cli")


def test_empty_environment_variable_counts_as_unset(tmp_path: Path) -> None:
    path = write(tmp_path, "state_dir: /from-file\n")
    assert load_config(path, environ={"SENTINEL_STATE_DIR": ""}).state_dir == Path("/from-file")


def test_environ_defaults_to_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SENTINEL_STATE_DIR", "/from-os-env")
    assert load_config(write(tmp_path, "")).state_dir == Path("/from-os-env")


def test_override_problems_name_the_command_line(tmp_path: Path) -> None:
    path = write(tmp_path, "log: {format: xml}\n")
    assert problems_of(
        path,
        overrides={"listen": "nope", "journal.dirctory": "/x", "units": ["bad unit"]},
        environ={"SENTINEL_STATE_DIR": "relative/ok"},
    ) == [
        "command line: units[0]: not a systemd unit name: 'bad unit'",
        "command line: journal: unknown key 'dirctory' (did you mean 'directory'?)",
        "command line: listen: expected HOST:PORT, got 'nope'",
        f"{path}: log.format: must be one of auto, json, console; got 'xml'",
    ]


def test_journal_source_override_replaces_the_files_source(tmp_path: Path) -> None:
    """`--journal-file` over a file with `journal.directory` reads the files, not both."""
    path = write(tmp_path, "journal: {directory: /j}\n")
    config = load_config(path, overrides={"journal.files": ["/a.journal"]}, environ={})
    assert config.journal == JournalConfig(directory=None, files=(Path("/a.journal"),))
    config = load_config(path, overrides={"journal.directory": "/x"}, environ={})
    assert config.journal == JournalConfig(directory=Path("/x"), files=())


def test_both_journal_sources_as_overrides_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path, "")
    overrides = {"journal.directory": "/j", "journal.files": ["/a.journal"]}
    assert problems_of(path, overrides=overrides) == [
        "command line: journal.directory: cannot be combined with journal.files; set one"
    ]


# -- output ----------------------------------------------------------------------------------------


def test_config_to_dict_masks_url_credentials(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
alertmanager:
  urls: ['https://ops:hunter22@am.example.com/am', 'https://tok3n@am2:9093', 'http://am3:9093']
  generator_url: 'https://grafana/d/sentinel'
  external_labels: {host: gpu1}
  bearer_token_file: /etc/sglang-sentinel/token
""",
    )
    shown = config_to_dict(load_config(path, environ={}))["alertmanager"]
    assert shown["urls"] == [
        "https://ops:<redacted>@am.example.com/am",
        "https://<redacted>@am2:9093",
        "http://am3:9093",
    ]
    # (a generator_url with credentials is refused: it would go out with every alert)
    assert shown["generator_url"] == "https://grafana/d/sentinel"
    assert shown["external_labels"] == {"host": "gpu1"}
    assert shown["bearer_token_file"] == "/etc/sglang-sentinel/token"
    text = yaml.safe_dump(config_to_dict(load_config(path, environ={})))
    assert "hunter22" not in text and "tok3n" not in text


def test_config_to_dict_of_defaults(no_default_file: Path) -> None:
    assert config_to_dict(load_config(None, environ={})) == {
        "units": ["sglang-qwen.service"],
        "containers": [],
        "docker_units": ["docker.service", "snap.docker.dockerd.service"],
        "docker_root": "/var/lib/docker",
        "kubernetes": {
            "pod_logs": "/var/log/pods",
            "pods": [],
            "labels": [],
            "api_url": None,
            "node_name": None,
            "token_file": "/var/run/secrets/kubernetes.io/serviceaccount/token",
            "ca_file": "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
        },
        "gpu": None,
        "journal": {"directory": None, "files": []},
        "state_dir": "/var/lib/sglang-sentinel",
        "listen": "127.0.0.1:19110",
        "rules": {"dirs": [], "policy": None},
        "policy": {},
        "log": {"format": "auto", "level": "info"},
        "alertmanager": {
            "urls": [],
            "resend_interval_seconds": 60.0,
            "timeout_seconds": 5.0,
            "resolve_resend_seconds": 300.0,
            "generator_url": None,
            "instance": None,
            "job": "sglang-sentinel",
            "external_labels": {},
            "bearer_token_file": None,
        },
        "checkpoint_interval_seconds": 5.0,
        "max_replay_age_seconds": None,
        "startups_kept_per_unit": 1000,
    }


def _leaves(data: dict[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        free_form = dotted in ("policy", "alertmanager.external_labels")
        if isinstance(value, dict) and not free_form:
            keys.extend(_leaves(value, f"{dotted}."))
        else:
            keys.append(dotted)
    return keys


def test_describe_keys_covers_every_key_in_file_order() -> None:
    assert [key for key, _, _ in describe_keys()] == _leaves(config_to_dict(Config()))
    assert describe_keys()[0][:2] == ("units", "[sglang-qwen.service]")
    assert ("listen", "127.0.0.1:19110") in [row[:2] for row in describe_keys()]


def test_docs_reference_lists_every_key_with_its_default() -> None:
    text = (REPO / "docs" / "config.md").read_text(encoding="utf-8")
    for key, default, _ in describe_keys():
        assert f"| `{key}` | `{default}` |" in text, key


def test_example_config_is_valid_and_spells_out_the_defaults() -> None:
    config = load_config(REPO / "deploy" / "config.example.yaml", environ={})
    assert config == Config()


# -- robustness ------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_file_text_loads_or_raises_config_error(text: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            load_config(path, environ={})
        except ConfigError as exc:
            assert exc.problems and all(isinstance(p, str) for p in exc.problems)


_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from([k for k, _, _ in describe_keys()]), _values))
def test_any_override_values_load_or_raise_config_error(overrides: dict[str, Any]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text("", encoding="utf-8")
        try:
            load_config(path, overrides=overrides, environ={})
        except ConfigError as exc:
            assert exc.problems and all(p.startswith("command line: ") for p in exc.problems)
