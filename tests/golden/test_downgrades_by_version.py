"""The golden case `downgrades-by-version`, read for what it must show: per SGLang release (0.5.9,
0.5.10, 0.5.23) a clean startup, then one that prints the fifteen silent downgrades of most user
impact in that release's wording (make_cases.FIFTEEN). Each of those has exactly the fifteen as
its new_downgrade_message templates, beside the findings of the rules that judge them; the clean
startup after it has them gone (information), says the version changed and has no ledger
finding. test_golden.py checks the outputs byte for byte; this checks that they say this."""

from __future__ import annotations

import json
from pathlib import Path

from make_cases import FIFTEEN

from sglang_sentinel.logtemplates import template_of

CASE = Path(__file__).resolve().parent / "downgrades-by-version"
# The rule findings beside the ledger's, per downgraded startup (0.5.23's overlap-off is read
# from the resolved server_args; its "Full prefill CUDA graph is incompatible" is the PCG check).
RULE_FINDINGS = {
    "0.5.9": ["overlap_schedule_disabled", "block_gemm_config_missing"],
    "0.5.10": ["overlap_schedule_disabled", "block_gemm_config_missing"],
    "0.5.23": [
        "piecewise_cuda_graph_disabled",
        "overlap_schedule_disabled",
        "block_gemm_config_missing",
    ],
}


def test_each_release_s_fifteen_are_its_new_downgrade_messages() -> None:
    startups = json.loads((CASE / "expected-scan.json").read_text(encoding="utf-8"))["startups"]
    assert len(startups) == 6
    assert startups[0]["log_diff"] is None  # the first: nothing to compare
    for i, version in enumerate(FIFTEEN):
        clean, downgraded = startups[2 * i], startups[2 * i + 1]
        diff = downgraded["log_diff"]
        fifteen = [template_of(body) for body in FIFTEEN[version]]
        assert len(set(fifteen)) == 15
        assert [line["template"] for line in diff["new"] if line["kind"] == "downgrade"] == fifteen
        assert all(line["ranks"] == 2 for line in diff["new"])
        assert diff["gone"] == [] and diff["version_changed"] is None and diff["dropped"] == 0
        checks = [f["check"] for f in downgraded["findings"]]
        assert checks == [*RULE_FINDINGS[version], "new_downgrade_message"], version
        (ledger,) = [f for f in downgraded["findings"] if f["check"] == "new_downgrade_message"]
        assert ledger["severity"] == "warning"
        assert ledger["current"] == fifteen
        if i:  # the clean startup of this release after the previous one's downgrades
            back = clean["log_diff"]
            assert back["new"] == [] and back["version_changed"] is not None
            assert [line["template"] for line in back["gone"]] == [
                template_of(body) for body in FIFTEEN[tuple(FIFTEEN)[i - 1]]
            ]
            assert "new_downgrade_message" not in [f["check"] for f in clean["findings"]]
