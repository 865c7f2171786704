"""The README's install section: the marked command blocks the end-to-end runs (tests/e2e/).

`make e2e` runs these blocks literally in booted Debian roots; these checks are the cheap part
that runs with every `make test`: the blocks exist, in order, and the uninstall undoes the install.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

import readme_blocks

REPO = Path(__file__).resolve().parents[2]
UNIT = "sglang-sentinel"


def test_install_section_has_every_block_in_order() -> None:
    """package, config, config-check, unit, pin, uninstall; each a non-empty shell block."""
    blocks = readme_blocks.install_blocks()
    assert list(blocks) == list(readme_blocks.INSTALL_BLOCKS)
    assert all(text.strip() for text in blocks.values())


def test_sentinel_is_on_path_before_the_blocks_call_it_bare() -> None:
    """The package block links `sentinel` into /usr/local/bin; later blocks call it bare."""
    blocks = readme_blocks.install_blocks()
    assert (
        "ln -sf /opt/sglang-sentinel/.venv/bin/sentinel /usr/local/bin/sentinel"
        in blocks["package"].splitlines()
    )
    assert blocks["config-check"].startswith("sentinel config ")
    assert blocks["pin"].startswith("sentinel baseline --pin ")


def test_the_pin_block_names_the_example_unit_of_the_example_config() -> None:
    """The end-to-end replaces the example unit name; it must be the one the config ships."""
    example = (REPO / "deploy" / "config.example.yaml").read_text()
    assert "  - sglang-qwen.service\n" in example
    assert "--unit sglang-qwen.service" in readme_blocks.install_blocks()["pin"]


def test_uninstall_removes_everything_the_install_creates() -> None:
    """Unit, drop-ins, venv, symlink, config, state (DynamicUser's private dir and its symlink),
    in an order that leaves systemd with no trace: stop first, daemon-reload after the unit."""
    blocks = readme_blocks.install_blocks()
    install = "\n".join(blocks[name] for name in readme_blocks.INSTALL_BLOCKS[:-1])
    created = {
        "/opt/sglang-sentinel": "python3 -m venv /opt/sglang-sentinel/.venv",
        "/usr/local/bin/sentinel": " /usr/local/bin/sentinel",
        "/etc/sglang-sentinel": "/etc/sglang-sentinel/config.yaml",
        f"/etc/systemd/system/{UNIT}.service": "cp deploy/sglang-sentinel.service /etc/systemd/system/",
    }
    for marker in created.values():
        assert marker in install
    unit_text = (REPO / "deploy" / f"{UNIT}.service").read_text()
    assert "DynamicUser=yes" in unit_text and f"StateDirectory={UNIT}" in unit_text
    removed = set()
    lines = blocks["uninstall"].splitlines()
    for line in lines:
        if re.match(r"rm -r?f ", line):
            removed.update(line.split()[2:])
    expected = set(created) | {
        f"/etc/systemd/system/{UNIT}.service.d",
        f"/var/lib/{UNIT}",
        f"/var/lib/private/{UNIT}",
    }
    assert expected <= removed, f"not removed: {expected - removed}"
    assert lines[0] == f"systemctl disable --now {UNIT}"
    unit_removed = next(i for i, line in enumerate(lines) if f"{UNIT}.service " in line + " ")
    assert "systemctl daemon-reload" in lines[unit_removed + 1 :]


def test_a_marker_without_a_fenced_block_is_an_error() -> None:
    text = "<!-- e2e: package -->\nplain text\n\n<!-- e2e: unit -->\n```sh\ntrue\n```\n"
    with pytest.raises(readme_blocks.ReadmeError, match=r"\['package'\] not followed"):
        readme_blocks.blocks(text)


def test_indented_blocks_in_list_items_are_dedented() -> None:
    text = "1. **Step.**\n   <!-- e2e: unit -->\n   ```sh\n   a\n     b\n   ```\n"
    assert readme_blocks.blocks(text) == {"unit": "a\n  b\n"}
