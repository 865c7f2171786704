"""The one place that knows what a secret looks like.

SGLang prints `api_key`, `admin_api_key` and `ssl_keyfile_password` in clear text in its
`server_args` line, systemd records the full command line in `_CMDLINE`, and several JSON-string
fields can carry tokens or URL credentials. Everything the sentinel stores, exports or prints
passes through one of these functions first, so the rule for "secret" lives here only.

The key rule (`is_secret_key`) works on the words of a name (split at `_`, `-`, `.`, spaces and
camelCase): a name is secret when a word is one of `password`, `secret`, `credential(s)`,
`passphrase`, `apikey`, `authorization`, ..., when it ends in `key`/`keys` right after a qualifier
such as `api`/`access`/`private`, or when it ends in `token` and none of its words marks a count
or position (`per`, `first`, `num`, `max`, ...). That keeps `hf_token`, `*_api_key`,
`*_password`, `*_secret`, `*_token` and `ssl_keyfile_password` secret while leaving
`max_total_num_tokens`, `tokenizer_path`, `ssl_keyfile`, `bucket_time_to_first_token` and every
other real ServerArgs field alone (tests check all fields of both fixture lines).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

REDACTED = "<redacted>"

# A word anywhere in the name makes it secret.
_SECRET_WORDS = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "secret",
        "secrets",
        "credential",
        "credentials",
        "apikey",
        "apikeys",
        "privatekey",
        "authorization",
        "cookie",
    }
)
# `key` alone says nothing (`cache_key`, `sort_key`); with one of these before it, it is a secret.
_KEY_QUALIFIERS = frozenset(
    {
        "api",
        "access",
        "secret",
        "private",
        "auth",
        "admin",
        "client",
        "signing",
        "encryption",
        "master",
        "service",
        "account",
        "subscription",
        "license",
        "session",
        "hmac",
        "bearer",
    }
)
# A trailing `token` is a credential unless the name counts or positions tokens
# (`bucket_time_to_first_token`, `kt_max_deferred_experts_per_token`, `eos_token`).
_TOKEN_COUNT_WORDS = frozenset(
    {
        "per",
        "first",
        "last",
        "next",
        "num",
        "max",
        "min",
        "each",
        "eos",
        "bos",
        "pad",
        "unk",
        "sep",
        "cls",
        "mask",
        "start",
        "end",
        "stop",
        "special",
    }
)
# Values that mean "not set"; replacing them would claim a secret exists where none does.
_UNSET_TEXT = frozenset({"", "none", "null", "nil"})
# HTTP auth scheme words that precede the credential; the Bearer rule redacts what follows.
_AUTH_SCHEMES = frozenset({"bearer", "basic", "token"})
# Nested data deeper than this is redacted whole instead of walked (bounds the recursion).
_MAX_DEPTH = 64

# Every secret name contains one of these; a name without any is not split into words.
_SECRET_HINT = re.compile(r"(?i)key|token|pass|secret|cred|auth|cookie")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD_SEPARATORS = re.compile(r"[^a-z0-9]+")
# Every pattern below starts with a look-behind so that a long run of word characters is scanned
# once, not once per start position: the scrubbers stay linear on hostile input.
_URL_CREDENTIALS = re.compile(
    r"(?<![\w+.-])(?P<head>[A-Za-z][\w+.-]*://[^\s:/@]*:)(?P<password>[^\s/@]+)@"
)
_NAME_VALUE = re.compile(
    r"""(?<![\w-])(?P<name>[A-Za-z_][\w-]*)(?P<sep>["']?[ \t]*[:=][ \t]*)"""
    r"""(?:'(?P<sq>[^'\n]*)'|"(?P<dq>[^"\n]*)"|(?P<bare>[^\s,;&?='"()\[\]{}<>]+))"""
)
_SECRET_NAME_IN_TEXT = re.compile(r"""(?<![\w-])(?P<name>[A-Za-z_][\w-]*)["']?\s*[:=]""")
_FLAG_VALUE = re.compile(
    r"""(?<![\w-])(?P<flag>--(?P<name>[A-Za-z][\w-]*))(?P<sep>=|[ \t]+)"""
    r"""(?P<value>'[^'\n]*'|"[^"\n]*"|(?!-)[^\s'"]+)"""
)
_BEARER = re.compile(r"(?i)(?<![\w-])(?P<scheme>bearer)[ \t]+(?P<value>[\w.~+/=-]+)")
_PROVIDER_TOKEN = re.compile(r"(?<![\w-])(?:sk-[A-Za-z0-9_-]{8,}|hf_[A-Za-z0-9]{30,})")
# Cheap pre-check: text without any of these cannot contain anything scrub_text replaces.
_SCRUB_HINT = re.compile(r"(?i)key|token|pass|secret|cred|auth|bearer|cookie|sk-|hf_|://")
_ENV_ASSIGNMENT = re.compile(r"(?P<name>[A-Za-z_]\w*)=")


class _TooDeep(Exception):
    """Raised inside the tree walk when data nests deeper than `_MAX_DEPTH`."""


def _words(name: str) -> list[str]:
    spaced = _CAMEL_BOUNDARY.sub("_", name).lower()
    return [word for word in _WORD_SEPARATORS.split(spaced) if word]


def is_secret_key(name: str) -> bool:
    """True when a field, flag, JSON key or variable of this name holds a secret."""
    if not _SECRET_HINT.search(name):
        return False  # most names: skip the word split
    words = _words(name)
    if not words:
        return False
    if any(word in _SECRET_WORDS for word in words):
        return True
    last = words[-1]
    if last in ("key", "keys"):
        return len(words) == 1 or words[-2] in _KEY_QUALIFIERS
    if last == "token":
        return not any(word in _TOKEN_COUNT_WORDS for word in words)
    return False


def redact_value(key: str, value: Any) -> Any:
    """Return `value` with secrets replaced: all of it if `key` is secret, else what is inside.

    None stays None (an unset secret is useful to see). Strings lose URL passwords and the values
    of secret `name=value` / `"name": value` pairs; a string that is nothing but an `sk-...` or
    `hf_...` token is replaced; a string that looks like JSON is parsed and its secret keys
    redacted recursively, or, if it does not parse but names a secret, replaced whole.
    Dicts, lists and tuples are walked; their containers are rebuilt, never mutated.
    """
    try:
        return _redact(key, value, 0)
    except _TooDeep:
        return REDACTED


def _redact(key: str, value: Any, depth: int) -> Any:
    if value is None:
        return None
    if is_secret_key(key):
        return REDACTED
    return _clean(value, depth)


def _clean(value: Any, depth: int) -> Any:
    """Redact what is inside a value whose own name is not secret."""
    if depth > _MAX_DEPTH:
        raise _TooDeep
    if isinstance(value, str):
        return _redact_string(value)
    if isinstance(value, dict):
        # A key that is not a string (an int in a dict repr) cannot name a secret.
        return {
            k: _redact(k, v, depth + 1) if isinstance(k, str) else _clean(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_clean(item, depth + 1) for item in value]
    if isinstance(value, tuple):
        return tuple(_clean(item, depth + 1) for item in value)
    return value


def _redact_string(text: str) -> str:
    stripped = text.strip()
    if _PROVIDER_TOKEN.fullmatch(stripped):
        # A value that is nothing but an API token is a secret whatever its field is called
        # (only the whole value: `/models/sk-llama-...` must survive).
        return REDACTED
    if stripped[:1] in ("{", "["):
        try:
            tree = json.loads(stripped)
        except (ValueError, RecursionError):
            # Not JSON (a Python dict repr, or cut off): we cannot tell secret from harmless, so a
            # secret-looking key anywhere costs the whole value.
            if _names_secret(text):
                return REDACTED
            return _scrub_urls(text)
        try:
            redacted = _clean(tree, 1)
        except _TooDeep:
            return REDACTED
        if redacted == tree:
            return text  # keep the original spelling when nothing was secret
        return json.dumps(redacted, ensure_ascii=False)
    return _NAME_VALUE.sub(_replace_name_value, _scrub_urls(text))


def _names_secret(text: str) -> bool:
    return any(is_secret_key(m.group("name")) for m in _SECRET_NAME_IN_TEXT.finditer(text))


def _scrub_urls(text: str) -> str:
    if "://" not in text:
        return text
    return _URL_CREDENTIALS.sub(lambda m: f"{m.group('head')}{REDACTED}@", text)


def _replace_name_value(match: re.Match[str]) -> str:
    if not is_secret_key(match.group("name")):
        return match.group(0)
    head = match.group("name") + match.group("sep")
    if match.group("sq") is not None:
        return f"{head}'{REDACTED}'"
    if match.group("dq") is not None:
        return f'{head}"{REDACTED}"'
    bare = match.group("bare")
    if bare.lower() in _UNSET_TEXT or bare.lower() in _AUTH_SCHEMES:
        return match.group(0)
    return head + REDACTED


def _replace_flag_value(match: re.Match[str]) -> str:
    if not is_secret_key(match.group("name")):
        return match.group(0)
    return f"{match.group('flag')}{match.group('sep')}{REDACTED}"


def _flag_groups(argv: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """Split argv into the tokens before the first `--flag` and one group per flag."""
    prefix: list[str] = []
    groups: list[list[str]] = []
    for token in argv:
        if token.startswith("--"):
            groups.append([token])
        elif groups:
            groups[-1].append(token)
        else:
            prefix.append(token)
    return prefix, groups


def _flag_name(flag: str) -> str:
    return flag[2:].replace("-", "_")


def redact_cmdline(cmdline: str) -> tuple[str, ...]:
    """Split a space-separated `_CMDLINE` into argv tokens with secret values redacted."""
    prefix, groups = _flag_groups(cmdline.split())
    out: list[str] = [_redact_bare_token(token) for token in prefix]
    for group in groups:
        flag, eq, first = group[0].partition("=")
        values = ([first] if eq else []) + group[1:]
        if not values:
            out.append(flag)
            continue
        if is_secret_key(_flag_name(flag)):
            redacted = [REDACTED]
        else:
            # journald joins argv with single spaces, so a JSON value arrives split at its
            # spaces; it is re-joined to be judged as one value.
            joined = " ".join(values)
            cleaned = redact_value(_flag_name(flag), joined)
            redacted = values if cleaned == joined else str(cleaned).split()
            if not redacted:
                redacted = [REDACTED]
        if eq:
            out.append(f"{flag}={redacted[0]}")
            out.extend(redacted[1:])
        else:
            out.append(flag)
            out.extend(redacted)
    return tuple(out)


def _redact_bare_token(token: str) -> str:
    # `env HF_TOKEN=... python -m ...` puts the secret before the first flag.
    assignment = _ENV_ASSIGNMENT.match(token)
    if assignment and is_secret_key(assignment.group("name")):
        return f"{assignment.group(0)}{REDACTED}"
    return _scrub_urls(token)


def launch_flags(argv: Sequence[str]) -> tuple[str, ...]:
    """Normalize a redacted argv to flag items such as `--tp-size 4` for diffing, in order."""
    _, groups = _flag_groups(argv)
    items: list[str] = []
    for group in groups:
        flag, eq, first = group[0].partition("=")
        values = ([first] if eq else []) + group[1:]
        if values and is_secret_key(_flag_name(flag)):
            values = [REDACTED]  # defence in depth: argv may not have been redacted
        items.append(" ".join([flag, *values]))
    return tuple(items)


def scrub_text(text: str) -> str:
    """Redact secrets in free text (failure reasons, log messages); the last line of defence."""
    if not _SCRUB_HINT.search(text):
        return text
    text = _scrub_urls(text)
    text = _FLAG_VALUE.sub(_replace_flag_value, text)
    text = _NAME_VALUE.sub(_replace_name_value, text)
    text = _BEARER.sub(lambda m: f"{m.group('scheme')} {REDACTED}", text)
    return _PROVIDER_TOKEN.sub(REDACTED, text)
