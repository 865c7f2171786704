"""Parse SGLang's `server_args=` line into a dict, with secrets redacted at parse time.

Up to 0.5.22 the line is the dataclass repr `ServerArgs(model_path='/m', tp_size=4, ...)`; 0.5.23
prints the dict repr `{'model_path': '/m', 'cuda_graph_config': {'prefill': {...}}, ...}`. Both
are read by a hand-written tokenizer and an iterative parser (an explicit stack, no recursion, no
eval): the line comes from a log anyone on the host may be able to write to, it may be cut in two
by journald's 48K line limit, and it must never hang or blow the stack.

Values become JSON-friendly Python: str, int, float, bool, None, list (for lists, tuples and
sets), dict, and `{"__type__": "LoRARef", ...fields}` for nested dataclass reprs. `<function ...>`,
`<Enum.X: 1>` and bare names such as `torch.bfloat16` stay strings.

Comparing two parses across SGLang versions lives in serverargs_diff.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from sglang_sentinel.redact import redact_value

# Nesting deeper than this is rejected: real reprs nest 3 levels, and a bound keeps every later
# recursive walk (redaction, comparison, JSON encoding) far from Python's recursion limit.
MAX_DEPTH: Final = 32

# Parser states of an open container.
_ITEM: Final = 0  # expecting an item, a keyword or the closing bracket
_COLON: Final = 1  # a brace saw a key, expecting ':' (or ',' / '}' for a set)
_VALUE: Final = 2  # expecting the value after ':' or '='
_SEP: Final = 3  # expecting ',' or the closing bracket

_CLOSERS: Final[Mapping[str, str]] = MappingProxyType({"(": ")", "[": "]", "{": "}"})
# `inf` and `nan` are names, not numbers, so that a field called `nan` still parses as a keyword.
_KEYWORDS: Final[Mapping[str, Any]] = MappingProxyType(
    {"True": True, "False": False, "None": None, "inf": math.inf, "nan": math.nan}
)
_STRING_PREFIXES: Final = frozenset({"r", "b", "u", "br", "rb"})

# One token after optional whitespace. Strings and `<...>` reprs only have their opening
# character matched here; their bodies are scanned separately so an escaped quote or a nested
# `<locals>` cannot end them early. The exponent's digits are optional so that `1e-` cut off by
# the end of the text is one (truncated) token rather than a number followed by garbage.
# Each loop's iterations are told apart by their first character and nothing follows the
# alternation, so the first path sre tries is the match: no backtracking (and no possessive
# quantifiers, which Python 3.10 lacks).
_TOKEN = re.compile(
    r"""\s*(?:
      (?P<number>-?\d+(?:\.\d*)?(?:[eE][+-]?\d*)?j?|-inf\b|-nan\b)
    | (?P<ident>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)
    | (?P<quote>['"])
    | (?P<angle><)
    | (?P<ellipsis>\.\.\.)
    | (?P<punct>[()\[\]{},:=])
    | (?P<end>\Z)
    )""",
    re.VERBOSE,
)
_STRING_BODY: Final[Mapping[str, re.Pattern[str]]] = MappingProxyType(
    {
        "'": re.compile(r"(?:[^'\\]+|\\.)*", re.DOTALL),
        '"': re.compile(r'(?:[^"\\]+|\\.)*', re.DOTALL),
    }
)
_ESCAPE = re.compile(
    r"\\(?:x(?P<x>[0-9a-fA-F]{2})|u(?P<u>[0-9a-fA-F]{4})|U(?P<U>[0-9a-fA-F]{8})"
    r"|(?P<oct>[0-7]{1,3})|(?P<ch>.))",
    re.DOTALL,
)
_SIMPLE_ESCAPES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "n": "\n",
        "t": "\t",
        "r": "\r",
        "\\": "\\",
        "'": "'",
        '"': '"',
        "a": "\a",
        "b": "\b",
        "f": "\f",
        "v": "\v",
        "\n": "",
    }
)
_ANGLE_STOP = re.compile(r"""[<>'"]""")
_SPACE = re.compile(r"\s*")
# What is left of a token cut off by the end of the text where `_TOKEN` cannot match yet.
_CUT_TOKENS: Final = frozenset({"-", "-i", "-in", "-n", "-na", ".", ".."})


@dataclass(frozen=True, slots=True)
class ServerArgsResult:
    """A parsed `server_args` repr: the fields (redacted), whether the repr was closed, why not."""

    args: dict[str, Any]
    complete: bool
    error: str | None = None


class _Truncated(Exception):
    """The text ended inside a token or an open container."""


class _Malformed(Exception):
    """The text is not a repr this parser understands."""


class _Frame:
    """One open container on the parser's stack."""

    __slots__ = ("closer", "fields", "items", "key", "kind", "name", "pending", "state")

    def __init__(self, kind: str, closer: str, name: str = "") -> None:
        self.kind = kind  # "call", "brace" (dict until shown to be a set), "set", "list", "tuple"
        self.closer = closer
        self.name = name
        self.items: list[Any] = []
        self.fields: dict[Any, Any] = {}
        self.key: Any = None
        # The root's last field waits here for its ',' or closing bracket: a text cut off right
        # after `tp_size=4` may have lost the `8` of 48, so only separated fields are returned.
        self.pending: tuple[str, Any] | None = None
        self.state = _ITEM

    def commit(self) -> None:
        if self.pending is not None:
            key, value = self.pending
            self.fields[key] = value
            self.pending = None


def _decode_escape(match: re.Match[str]) -> str:
    try:
        for group, base in (("x", 16), ("u", 16), ("U", 16), ("oct", 8)):
            digits = match.group(group)
            if digits is not None:
                return chr(int(digits, base))
    except (ValueError, OverflowError):
        return match.group(0)  # \U beyond the Unicode range: keep the text as written
    ch = match.group("ch")
    return _SIMPLE_ESCAPES.get(ch, match.group(0))


def _number(text: str) -> Any:
    if text.endswith("j") or not text.isascii():
        # A complex number has no JSON form; non-ASCII digits ("٤٨", which `\d` and int()
        # accept) are not a number SGLang printed. Keep the text as written.
        return text
    try:
        if "." in text or "e" in text or "E" in text or "n" in text:  # 'n': inf and nan
            return float(text)
        return int(text)
    except ValueError:
        return text  # an int longer than Python's 4300-digit conversion limit


def _sort_key(item: Any) -> tuple[str, str]:
    return (type(item).__name__, str(item))


class _Parser:
    """Iterative recursive-descent parser over `_TOKEN`; one instance per parse."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.stack: list[_Frame] = []
        self.root: _Frame | None = None

    # -- tokens --------------------------------------------------------------------------------

    def _string(self, quote_at: int, raw: bool) -> str:
        quote = self.text[quote_at]
        body = _STRING_BODY[quote].match(self.text, quote_at + 1)
        assert body is not None  # the pattern matches the empty string
        end = body.end()
        if end >= len(self.text) or self.text[end] != quote:
            raise _Truncated
        self.pos = end + 1
        value = body.group(0)
        if raw or "\\" not in value:
            return value
        return _ESCAPE.sub(_decode_escape, value)

    def _angle(self, start: int) -> str:
        depth = 0
        pos = start
        while True:
            stop = _ANGLE_STOP.search(self.text, pos)
            if stop is None:
                raise _Truncated
            ch = stop.group(0)
            if ch == "<":
                depth += 1
                pos = stop.end()
            elif ch == ">":
                depth -= 1
                pos = stop.end()
                if depth == 0:
                    self.pos = pos
                    return self.text[start:pos]
            else:
                self._string(stop.start(), raw=True)
                pos = self.pos

    def _next_char(self) -> str:
        ch = self.text[self.pos : self.pos + 1]
        if not ch.isspace():
            return ch  # the usual case: no whitespace to skip
        space = _SPACE.match(self.text, self.pos)
        assert space is not None
        self.pos = space.end()
        return self.text[self.pos : self.pos + 1]

    # -- parsing -------------------------------------------------------------------------------

    def parse(self) -> None:
        """Consume the whole text; raises _Truncated or _Malformed to stop early."""
        text = self.text
        end = len(text)
        stack = self.stack
        next_token = _TOKEN.match
        while True:
            match = next_token(text, self.pos)
            if match is None:
                self._next_char()
                if text[self.pos :] in _CUT_TOKENS:
                    raise _Truncated
                raise _Malformed(f"unexpected character {text[self.pos]!r} at offset {self.pos}")
            self.pos = match.end()
            kind = match.lastgroup
            if kind == "end":
                if self.root is not None and not stack:
                    return
                raise _Truncated
            if self.root is not None and not stack:
                raise _Malformed(f"unexpected text after the closing bracket at offset {self.pos}")
            if self.pos == end and (kind == "number" or kind == "ident"):
                # `1e` of `1e-05`, `Tr` of `True`: a token touching the end may be cut off.
                raise _Truncated
            if kind == "punct":
                self._punct(match.group("punct"))
                continue
            if not stack:
                self._root(kind, match)
                continue
            frame = stack[-1]
            if frame.state != _ITEM and frame.state != _VALUE:
                offset = match.start(match.lastindex or 0)
                raise _Malformed(f"expected ',' or a closing bracket at offset {offset}")
            if kind == "number":
                self._deliver(_number(match.group("number")))
            elif kind == "ident":
                self._ident(match.group("ident"), frame)
            elif kind == "quote":
                self._deliver(self._string(match.start("quote"), raw=False))
            elif kind == "angle":
                self._deliver(self._angle(match.start("angle")))
            else:
                self._deliver("...")  # a recursive repr: `[...]`

    def _root(self, kind: str | None, match: re.Match[str]) -> None:
        nxt = self._next_char() if kind == "ident" else None
        if nxt == "(":
            self.pos += 1
            self._push("call", ")", match.group("ident"))
            return
        if nxt == "":
            raise _Truncated
        raise _Malformed("expected ServerArgs(...) or {...}")

    def _ident(self, name: str, frame: _Frame) -> None:
        nxt = self._next_char()
        if nxt in ("'", '"') and name.lower() in _STRING_PREFIXES:
            self._deliver(self._string(self.pos, raw="r" in name.lower()))
        elif nxt == "(":
            self.pos += 1
            self._push("call", ")", name)
        elif nxt == "=" and frame.kind == "call" and frame.state == _ITEM:
            self.pos += 1
            frame.key = name
            frame.state = _VALUE
        elif name in _KEYWORDS:
            self._deliver(_KEYWORDS[name])
        else:
            self._deliver(name)  # an enum member or dotted name such as torch.bfloat16

    def _punct(self, ch: str) -> None:
        if not self.stack:
            if ch == "{" and self.root is None:
                self._push("brace", "}")
                return
            raise _Malformed("expected ServerArgs(...) or {...}")
        frame = self.stack[-1]
        state = frame.state
        if ch == frame.closer and state in (_ITEM, _SEP):
            frame.commit()
            self._close()
        elif ch == "," and state == _SEP:
            frame.commit()
            frame.state = _ITEM
        elif ch == ":" and state == _COLON:
            frame.state = _VALUE
        elif state == _COLON and ch in ",}" and not frame.fields:
            # `{1, 2}`: what looked like a dict key was the first element of a set.
            frame.kind = "set"
            frame.items.append(frame.key)
            frame.state = _SEP
            self._punct(ch)
        elif ch in _CLOSERS and state in (_ITEM, _VALUE):
            kind = {"(": "tuple", "[": "list", "{": "brace"}[ch]
            self._push(kind, _CLOSERS[ch])
        else:
            raise _Malformed(f"unexpected {ch!r} at offset {self.pos - 1}")

    def _push(self, kind: str, closer: str, name: str = "") -> None:
        if len(self.stack) >= MAX_DEPTH:
            raise _Malformed(f"nesting deeper than {MAX_DEPTH} at offset {self.pos}")
        frame = _Frame(kind, closer, name)
        if self.root is None:
            self.root = frame
        self.stack.append(frame)

    def _close(self) -> None:
        frame = self.stack.pop()
        if not self.stack:
            if frame.kind == "set":
                raise _Malformed("expected ServerArgs(...) or {...}, got a set")
            return  # the root's fields were committed (and redacted) one by one
        value: Any
        if frame.kind in ("list", "tuple"):
            value = frame.items
        elif frame.kind == "set":
            value = sorted(frame.items, key=_sort_key)
        elif frame.kind == "brace":
            value = frame.fields
        else:
            value = {"__type__": frame.name, **frame.fields}
            if frame.items:
                value["__args__"] = frame.items
        self._deliver(value)

    def _deliver(self, value: Any) -> None:
        frame = self.stack[-1]
        if frame.kind == "brace" and frame.state == _ITEM:
            if isinstance(value, (list, dict)):
                raise _Malformed(f"unsupported dict key before offset {self.pos}")
            frame.key = value
            frame.state = _COLON
            return
        if frame.state == _VALUE:
            key = frame.key
            if len(self.stack) == 1:
                # Only the root's fields are returned, so redacting here (recursively) is
                # enough to keep every secret out of the result; unfinished values never leave.
                key = key if isinstance(key, str) else str(key)
                frame.pending = (key, redact_value(key, value))
            else:
                frame.fields[key] = value
        else:
            frame.items.append(value)
        frame.state = _SEP


def parse_server_args(text: str, *, partial_ok: bool = False) -> ServerArgsResult:
    """Parse what follows `server_args=`; never raises, linear in the length of `text`.

    `args` holds every top-level field finished before the text ended or went wrong (a field
    counts once its `,` or the closing bracket is seen, so a value cut in half is dropped).
    `complete` is True when the outer repr was closed. A truncated text is an error unless
    `partial_ok` (the caller expects a continuation entry); malformed text always is.
    """
    body = text.lstrip()
    if body.startswith("server_args="):
        body = body[len("server_args=") :]
    parser = _Parser(body)
    complete = False
    error: str | None = None
    try:
        parser.parse()
        complete = True
    except _Truncated:
        if not partial_ok:
            error = "the repr ends before its closing bracket (line cut off?)"
    except _Malformed as exc:
        error = str(exc)
        complete = parser.root is not None and not parser.stack
    root = parser.root
    args = {} if root is None or root.kind == "set" else dict(root.fields)
    return ServerArgsResult(args=args, complete=complete, error=error)


def is_complete(text: str) -> bool:
    """False while appending a continuation entry could still complete the repr.

    That is while the text ends inside a string, a token or an open bracket. A closed repr is
    complete, and so is one that went wrong before its end: the parser reads left to right, so
    no continuation could repair it and waiting for one would only delay the error.
    """
    result = parse_server_args(text, partial_ok=True)
    return result.complete or result.error is not None


# The characters that can change a repr's balance, outside a string and inside each kind.
_BALANCE_OUTSIDE: Final = re.compile(r"""[()\[\]{}<>'"]""")
_BALANCE_INSIDE: Final[Mapping[str, re.Pattern[str]]] = MappingProxyType(
    {"'": re.compile(r"[\\']"), '"': re.compile(r'[\\"]')}
)


class BalanceScanner:
    """Bracket and quote balance of a repr fed in pieces: O(piece), so a line split by journald
    into many continuation entries is scanned once in total instead of re-parsed per piece.

    It only says when the repr *may* be complete (every bracket opened has closed, outside a
    string); the parser has the last word. A string's escapes and a `<...>` repr's nesting are
    followed the way `_Parser` follows them.
    """

    __slots__ = ("depth", "escape", "opened", "quote")

    def __init__(self) -> None:
        self.depth = 0
        self.opened = False
        self.quote = ""  # the quote of the string the text ends in, "" outside strings
        self.escape = False  # the text ends in a backslash inside a string

    def feed(self, text: str) -> None:
        pos, end = 0, len(text)
        if self.escape and end:
            pos, self.escape = 1, False
        while pos < end:
            if self.quote:
                m = _BALANCE_INSIDE[self.quote].search(text, pos)
                if m is None:
                    return
                if m.group() == "\\":
                    if m.end() == end:
                        self.escape = True
                        return
                    pos = m.end() + 1
                    continue
                self.quote = ""
                pos = m.end()
                continue
            m = _BALANCE_OUTSIDE.search(text, pos)
            if m is None:
                return
            ch = m.group()
            pos = m.end()
            if ch in "'\"":
                self.quote = ch
            elif ch in "([{<":
                self.depth += 1
                self.opened = True
            else:
                self.depth -= 1

    @property
    def maybe_complete(self) -> bool:
        return self.opened and not self.quote and self.depth <= 0


__all__ = [
    "MAX_DEPTH",
    "BalanceScanner",
    "ServerArgsResult",
    "is_complete",
    "parse_server_args",
]
