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
other real ServerArgs field alone (tests check all fields of both fixture lines). A `*_key` whose
qualifier is not a known plain one (`x_key`) and a name one typo from a secret word (`api_kee`)
are secret too.

Values are also recognised by shape alone (`scrub_shapes`): provider tokens (GitHub, Slack, AWS,
JWT, Google, Hugging Face), webhook paths, and generic random keys (20+ letters and digits with
two of each class), wherever they appear. Hex digests, UUIDs, numbers and model names never
have that shape (tests/test_secrets_property.py checks both directions).
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
        # URL signatures: Azure SAS `sig=`, S3/GCS presigned `X-Amz-Signature=`.
        "sig",
        "signature",
    }
)
# `*_key` is a secret unless the word before it says what kind of non-secret key it is
# (`cache_key`, `sort_key`, `num_unique_running_routing_keys`); an unknown qualifier
# (`x_key`, `storage_key`) is treated as a secret.
_PLAIN_KEY_QUALIFIERS = frozenset(
    {
        "cache",
        "sort",
        "routing",
        "partition",
        "primary",
        "foreign",
        "lookup",
        "group",
        "hash",
        "shard",
        "index",
        "map",
        "dict",
        "row",
        "column",
        "metric",
        "label",
        "attribute",
        "attr",
        "match",
        "join",
        "unique",
        "public",
        "kv",
        "query",
        "rope",
        "lora",
        "prefix",
        "radix",
        "order",
        "bucket",
        "batch",
        "layer",
        "expert",
        "request",
        "field",
        "name",
        "config",
        "json",
        "dedup",
        "hotkey",
    }
)
# Words one typo away from these are treated as them (`--api-kee`, `passwrd`): a mistyped flag
# still carries the secret that was meant for it.
_FUZZY_SECRET_WORDS = ("password", "passwd", "secret", "token", "apikey", "credential")
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
# (loose on purpose: a typo such as `api_kee` or `secrte` must reach the word check).
_SECRET_HINT = re.compile(r"(?i)k[ey]|tok|to?k|pas|sec|cre|aut|cook|sig")
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
_NAME_SEP = re.compile(r"""(?<![\w-])(?P<name>[A-Za-z_][\w-]*)["']?[ \t]*[:=][ \t]*""")
# What comes before a name that counts: `#`, or `#` and one word (`#full token`, `#swa token`).
_COUNT_MARK = re.compile(r"#(?:[A-Za-z]+ )?$")
_VALUE_AT = re.compile(r"""'(?P<sq>[^'\n]*)'|"(?P<dq>[^"\n]*)"|(?P<bare>[^\s,;&?'"()\[\]{}]+)""")
_SECRET_NAME_IN_TEXT = re.compile(r"""(?<![\w-])(?P<name>[A-Za-z_][\w-]*)["']?\s*[:=]""")
_FLAG_VALUE = re.compile(
    r"""(?<![\w-])(?P<flag>--(?P<name>[A-Za-z][\w-]*))(?P<sep>=|[ \t]+)"""
    r"""(?P<value>'[^'\n]*'|"[^"\n]*"|(?!-)[^\s'"]+)"""
)
_BEARER = re.compile(r"(?i)(?<![\w-])(?P<scheme>bearer)[ \t]+(?P<value>[\w.~+/=-]+)")
# `token X` / `Basic X` / `key X` / `HF_TOKEN X` (any secret name) in prose: only a dot-free
# value of 8+ characters with letters and digits is taken for a credential ("the token is
# invalid", "missing key model.layers.10.mlp" keep theirs), or after a name that is itself a
# secret's (`HF_TOKEN`, `api_key`) one of 14+ characters, as a chosen password may be; it may be
# quoted and may end a sentence ("... token X.").
# Names are found on their own (as in _scrub_pairs): a word that is no secret's name never hides
# the one after it ("invalid HF_TOKEN X").
_SCHEME = re.compile(r"(?<![\w-])(?P<scheme>[A-Za-z_][\w-]*)[ \t]+")
_SCHEME_VALUE = re.compile(
    r"(?P<q>['\"]?)(?P<value>[\w~+/=-]{8,})(?P=q)(?![\w~+/=-])(?!\.[\w~+/=-])"
)
_HAS_DIGIT = re.compile(r"[0-9]")
_HAS_LETTER = re.compile(r"[A-Za-z]")
_SCHEME_WORDS = frozenset({"token", "basic", "key", "password", "secret"})
# Single-letter options that take a credential: `-k KEY`, `-p PASSWORD` (SGLang has no short
# options, so one in its command line or an `unrecognized arguments:` line is someone else's
# convention: key and password are the ones that carry secrets).
_SHORT_SECRET_OPTION = re.compile(
    r"(?<![\w-])(?P<flag>-[kp])(?P<sep>=|[ \t]+)(?P<value>'[^'\n]*'|\"[^\"\n]*\"|(?!-)[^\s'\"]+)"
)
_SHORT_SECRET_FLAGS = frozenset({"-k", "-p"})
_PROVIDER_TOKEN = re.compile(r"(?<![\w-])(?:sk-[A-Za-z0-9_-]{8,}|hf_[A-Za-z0-9]{30,})")
# Token shapes that are secrets wherever they appear, inside a path or a sentence included:
# GitHub (classic and fine-grained), Slack tokens, AWS access key ids, JWTs, Google API keys.
_KNOWN_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{22,}"
    r"|xox[abposre]-[A-Za-z0-9-]{10,}"
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}(?![0-9A-Z])"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|hf_[A-Za-z0-9]{30,}"
    # Mailchimp API keys (from detect-secrets' plugin set; README "Secrets").
    r"|[0-9a-f]{32}-us[0-9]{1,2}(?![0-9])"
    r")"
)
# A PEM private key, to its END line or, cut off, to the end of the text (detect-secrets' shape).
_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|.*)",
    re.S,
)
# Slack/Discord webhook URLs: the path is the credential.
_WEBHOOK_PATH = re.compile(
    r"(?i)(?P<head>hooks\.slack\.com/(?:services|workflows|triggers)/|"
    r"discord(?:app)?\.com/api/webhooks/)(?P<path>[\w/-]+)"
)
# A generic high-entropy token, by shape: a run of 20+ letters and digits with at least two
# upper-case letters, two lower-case letters and two digits. Hex digests (invocation ids, config
# hashes), UUIDs, numbers, and model names (short segments between `-`, `.`, `/`) never qualify.
_ALNUM_RUN = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]{20,}(?![A-Za-z0-9])")
# Cheap pre-check: text without any of these cannot contain a name-based secret.
_SCRUB_HINT = re.compile(r"(?i)k[ey]|tok|pas|sec|cre|aut|bearer|cook|sig|sk-|hf_|://")
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
    # `api_key_x`, `private_key_path`, `admin_api_key_2`: a qualified key anywhere in the name
    # (what comes after it names a variant or where the key lives, never a non-secret).
    if any(
        word in ("key", "keys") and words[i - 1] in _KEY_QUALIFIERS
        for i, word in enumerate(words[:-1])
        if i
    ):
        return True
    last = words[-1]
    if last in ("key", "keys"):
        return len(words) == 1 or words[-2] not in _PLAIN_KEY_QUALIFIERS
    if last == "token":
        return not any(word in _TOKEN_COUNT_WORDS for word in words)
    return _is_typo_of_secret(words)


def _is_typo_of_secret(words: list[str]) -> bool:
    """`api_kee`, `admin_api_ky`, `passwrd`, `secrte`: one edit from a secret word."""
    last = words[-1]
    if last == "tokens":
        return False  # a count (`chunked_prefill_tokens`), not a typo of `token`
    if len(words) >= 2 and words[-2] in _KEY_QUALIFIERS and _one_edit(last, "key"):
        return True
    return len(last) >= 5 and any(_one_edit(last, word) for word in _FUZZY_SECRET_WORDS)


def _one_edit(a: str, b: str) -> bool:
    """True when `a` and `b` differ by exactly one insertion, deletion, substitution or swap."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 1:
            return True
        i = diff[0]
        return len(diff) == 2 and diff[1] == i + 1 and a[i] == b[i + 1] and a[i + 1] == b[i]
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    i = 0
    while i < len(short) and short[i] == long_[i]:
        i += 1
    return short[i:] == long_[i + 1 :]


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


def _token_like(run: str) -> bool:
    upper = lower = digit = 0
    for ch in run:
        if ch.isdigit():
            digit += 1
        elif ch.isupper():
            upper += 1
        else:
            lower += 1
    return upper >= 2 and lower >= 2 and digit >= 2


def _replace_run(match: re.Match[str]) -> str:
    return REDACTED if _token_like(match.group(0)) else match.group(0)


def scrub_shapes(text: str) -> str:
    """Redact secrets recognised by their shape alone, wherever they are in `text`."""
    if "PRIVATE KEY" in text:
        text = _PRIVATE_KEY.sub(REDACTED, text)
    if "hooks." in text or "webhooks/" in text:
        text = _WEBHOOK_PATH.sub(lambda m: f"{m.group('head')}{REDACTED}", text)
    text = _KNOWN_TOKEN.sub(REDACTED, text)
    return _ALNUM_RUN.sub(_replace_run, text)


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
    # Inside a value, `sk-...` counts only as the whole value (`/models/sk-llama-8b` survives).
    return _scrub(text, provider_anywhere=False)


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
    out: list[str] = []
    for token in prefix:
        # `-k KEY` before the first long flag: the token after a secret short option.
        after_secret = bool(out) and out[-1] in _SHORT_SECRET_FLAGS
        out.append(REDACTED if after_secret else _redact_bare_token(token))
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
    return scrub_shapes(_scrub_urls(token))


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
    return _scrub(text, provider_anywhere=True)


def scrub_head(text: str, keep: int) -> str:
    """The first `keep` characters of `text`, redacted, at a cost bounded by `keep` however long
    the text: only its first 2 * keep characters are redacted and the last `keep` of those are
    dropped, so a secret the cut split in two (which might no longer look like one) is never kept
    (`keep` is longer than any secret the redactor knows: tokens, keys, a JWT). The whole text is
    redacted when redaction left too little before the dropped part."""
    if len(text) <= 2 * keep:
        return scrub_text(text)[:keep]
    head = scrub_text(text[: 2 * keep])
    if len(head) >= 2 * keep:
        return head[:keep]
    return scrub_text(text)[:keep]


def _scrub(text: str, *, provider_anywhere: bool) -> str:
    text = scrub_shapes(text)
    if "-k" in text or "-p" in text:
        text = _SHORT_SECRET_OPTION.sub(
            lambda m: f"{m.group('flag')}{m.group('sep')}{REDACTED}", text
        )
    if not _SCRUB_HINT.search(text):
        return text
    text = _scrub_urls(text)
    text = _FLAG_VALUE.sub(_replace_flag_value, text)
    text = _scrub_pairs(text)
    text = _BEARER.sub(lambda m: f"{m.group('scheme')} {REDACTED}", text)
    text = _scrub_scheme_values(text)
    if provider_anywhere:
        text = _PROVIDER_TOKEN.sub(REDACTED, text)
    return text


def _is_token_count(text: str, start: int, name: str) -> bool:
    """`#token: 90000`, `#new-token: 7`, `#full token: 519`: SGLang's batch lines count tokens
    after a `#` (the caller has checked that the value is digits)."""
    return _words(name)[-1:] == ["token"] and bool(
        _COUNT_MARK.search(text, max(0, start - 16), start)
    )


def _scrub_scheme_values(text: str) -> str:
    """`token X`, `HF_TOKEN X`: the value after a scheme word or a secret's name (see
    _SCHEME_VALUE for which values count)."""
    out: list[str] = []
    pos = 0
    for found in _SCHEME.finditer(text):
        scheme = found.group("scheme")
        if found.start() < pos:
            continue
        plain_scheme = scheme.lower() in _SCHEME_WORDS
        if not plain_scheme and not is_secret_key(scheme):
            continue
        m = _SCHEME_VALUE.match(text, found.end())
        if m is None or m.group("value") == REDACTED.strip("<>"):
            continue
        value = m.group("value")
        mixed = bool(_HAS_DIGIT.search(value) and _HAS_LETTER.search(value))
        if not (mixed or (not plain_scheme and len(value) >= 14)):
            continue
        q = m.group("q")
        out.append(text[pos : found.end()])
        out.append(f"{q}{REDACTED}{q}")
        pos = m.end()
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def _scrub_pairs(text: str) -> str:
    """`name=value` / `name: value` / `"name": "value"` with a secret name -> value redacted.

    Names are found on their own (a non-secret pair's value never hides the name after it:
    `exception: api-key=X`), then the value after each secret name is replaced.
    """
    out: list[str] = []
    pos = 0
    for found in _NAME_SEP.finditer(text):
        if found.start() < pos or not is_secret_key(found.group("name")):
            continue
        value = _VALUE_AT.match(text, found.end())
        if value is None:
            continue
        if value.group("bare") is not None:
            bare = value.group("bare").lower()
            if bare in _UNSET_TEXT or bare in _AUTH_SCHEMES or value.group("bare") == REDACTED:
                continue  # unset, or `Authorization: Bearer X` (the Bearer rule takes X)
            if bare.isdigit() and _is_token_count(text, found.start(), found.group("name")):
                continue
            replacement = REDACTED
        elif value.group("sq") is not None:
            replacement = f"'{REDACTED}'"
        else:
            replacement = f'"{REDACTED}"'
        out.append(text[pos : value.start()])
        out.append(replacement)
        pos = value.end()
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)
