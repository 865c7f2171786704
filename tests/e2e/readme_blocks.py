"""The README's install commands, extracted so the end-to-end runs exactly what the docs say.

A block is a fenced ```sh code block right after an HTML comment `<!-- e2e: NAME -->`; the
comment is invisible on GitHub. The end-to-end runs the blocks by name, so a block that is
renamed, removed or left unmarked fails it instead of drifting from what is tested.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
# The order the README gives them in, which is the order an operator runs them.
INSTALL_BLOCKS = ("package", "config", "config-check", "unit", "pin", "uninstall")

_BLOCK = re.compile(
    r"^(?P<indent>[ \t]*)<!-- e2e: (?P<name>[a-z][a-z0-9-]*) -->[ \t]*\n"
    r"(?P=indent)```sh[ \t]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


class ReadmeError(ValueError):
    """The README's marked blocks are missing, duplicated or out of order."""


def blocks(text: str | None = None) -> dict[str, str]:
    """Every marked block of the README: name -> shell text (dedented), in README order."""
    if text is None:
        text = README.read_text(encoding="utf-8")
    found: dict[str, str] = {}
    for match in _BLOCK.finditer(text):
        name = match.group("name")
        if name in found:
            raise ReadmeError(f"README.md: e2e block {name!r} appears twice")
        found[name] = textwrap.dedent(match.group("body")).strip() + "\n"
    markers = re.findall(r"<!-- e2e: ([a-z][a-z0-9-]*) -->", text)
    if len(markers) != len(found):
        unmatched = sorted(set(markers) - set(found))
        raise ReadmeError(f"README.md: e2e marker(s) {unmatched} not followed by a ```sh block")
    return found


def install_blocks(text: str | None = None) -> dict[str, str]:
    """The install section's blocks, all present and in order, or ReadmeError."""
    found = blocks(text)
    names = [name for name in found if name in INSTALL_BLOCKS]
    if names != list(INSTALL_BLOCKS):
        raise ReadmeError(
            f"README.md: e2e blocks {names}, expected {list(INSTALL_BLOCKS)} in this order"
        )
    return {name: found[name] for name in INSTALL_BLOCKS}
