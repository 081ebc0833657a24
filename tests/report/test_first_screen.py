"""The report's first screen and ``privaudit verdict`` per defender: the strongest gated ε̂ against the claim in
the why, could-have-seen for every gated bound (the white-box one included), and a PASS without a DP claim shown
differently from a certified PASS."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from privaudit.cli import main, print_verdict
from privaudit.report import build_report
from privaudit.report.first_screen import could_have_seen, strongest_bound, strongest_line, whitebox_resolution
from tests.report import synthetic

WHITEBOX = {"eps_lower_bound": 0.958, "eps_point": 0.995, "delta": 1e-5, "neighbourhood": "add_remove",
            "level": 0.0083, "threat_model": "white-box: every intermediate update visible",
            "assumption": "each step is a Poisson-subsampled Gaussian mechanism"}
BUDGET = {"beta": 0.05, "gated": ["whitebox", "blackbox", "lidp", "game3", "theory"], "diagnostic": ["lidp_k1"],
          "levels": {}}


def certified_and_no_claim() -> dict[str, Any]:
    """dp_sgd claims (1, 1e-5) with a tight white-box audit (0.958) and a black-box block; logreg claims nothing.
    Both pass (min_privacy 0)."""
    m = synthetic.with_blackbox(synthetic.metrics(), bare=False)
    m["audit"]["dp_sgd"].update(whitebox=dict(WHITEBOX), budget=dict(BUDGET))
    m["audit"]["dp_sgd"]["blackbox"]["detectable_epsilon"] = 1.87
    m["audit"]["dp_sgd"]["lidp"]["delta"] = 1e-5
    m["audit"]["dp_sgd"]["game3"]["detectable_epsilon"] = 3.07
    return m


def no_claim_only() -> dict[str, Any]:
    m = synthetic.metrics()
    for kind in ("ltu", "audit", "bounds"):
        del m[kind]["dp_sgd"]
    return m


def inputs_of(m: dict[str, Any], **gate: Any) -> Any:
    return synthetic.report_inputs(metrics=synthetic.typed(m), gate=synthetic.gate_of(m, **gate), roc=None)


def test_strongest_bound_is_the_white_box_one_against_the_claim() -> None:
    entry = synthetic.typed(certified_and_no_claim()).audit["dp_sgd"]
    s = strongest_bound(entry)
    assert s is not None and s.kind == "whitebox" and s.epsilon == pytest.approx(0.958) and s.claim_epsilon == 1.0
    assert strongest_line(entry) == "strongest ε̂ 0.958 (white-box DP-SGD audit) ≤ claimed ε 1 (96% of the claim)"
    assert strongest_line(synthetic.typed(certified_and_no_claim()).audit["logreg"]) is None


def test_could_have_seen_covers_the_white_box_bound() -> None:
    entry = synthetic.typed(certified_and_no_claim()).audit["dp_sgd"]
    assert whitebox_resolution(entry) == pytest.approx(0.995 / 0.958)
    text = could_have_seen(entry)
    # the tight white-box audit is the most sensitive: the first screen no longer reads "blind below 1.87"
    assert text.startswith("a true ε ≥ 1.04 is caught by the white-box audit's interval")
    assert "white-box: ε ≥ 1.04" in text and "black-box: ε ≥ 1.87" in text and "Game 3: ε ≥ 3.07" in text
    assert "LiDP: no power figure" in text
    m = certified_and_no_claim()
    m["audit"]["dp_sgd"]["budget"]["gated"] = ["blackbox"]  # an ungated bound is left out
    text = could_have_seen(synthetic.typed(m).audit["dp_sgd"])
    assert "white-box" not in text and "Game 3" not in text and "black-box: ε ≥ 1.87" in text


def test_first_screen_shows_strongest_eps_and_could_have_seen(tmp_path: Path) -> None:
    paths = build_report(inputs_of(certified_and_no_claim(), min_privacy=0.0), tmp_path)
    html = paths["html"].read_text(encoding="utf-8")
    banner = html[html.index('id="verdict"'):html.index("</div>", html.index('id="verdict"'))]
    assert 'class="verdict verdict-pass"' in html
    assert ('<span class="chip chip-pass">PASS</span> <b>dp_sgd</b>: strongest ε̂ 0.958 (white-box DP-SGD audit) '
            "≤ claimed ε 1 (96% of the claim); could have seen: a true ε ≥ 1.04") in banner
    assert '<span class="chip chip-pass-noclaim">PASS (no DP claim)</span> <b>logreg</b>: no DP claim' in banner
    table = html[html.index("Release gate per defender"):html.index('id="dp-claims-against-audited-lower-bounds"')]
    assert '<td class="pass-noclaim">PASS (no DP claim)</td>' in table and '<td class="pass">PASS</td>' in table
    assert "strongest ε̂ 0.958 (white-box DP-SGD audit) ≤ claimed ε 1 (96% of the claim)<br>all checks passed" in table
    assert "white-box: ε ≥ 1.04" in table
    md = paths["md"].read_text(encoding="utf-8")
    assert "- **PASS (no DP claim)** logreg: no DP claim" in md and "- **PASS** dp\\_sgd: strongest ε̂ 0.958" in md


def risk_frame(flagged: int) -> pd.DataFrame:
    """30 Defender + 30 Reserved samples with per-sample risk, ``flagged`` Defender samples flagged."""
    n = 60
    frame = pd.DataFrame({
        "id": [f"x{i}" for i in range(n)], "role": ["defender"] * 30 + ["reserved"] * 30, "score": 0.5,
        "risk": 0.0, "risk_low": -1.0, "risk_high": 1.0, "z": 0.0, "p_value": 0.5, "q_value": 1.0, "flagged": False,
        "control_hit": False, "risk_level": 0.05, "risk_correction": "bh", "risk_interval": 0.9})
    frame.loc[: flagged - 1, ["flagged", "p_value", "risk"]] = [True, 1e-6, 5.0]
    return frame


def test_a_pass_without_any_claim_is_not_the_certified_banner(tmp_path: Path) -> None:
    inputs = synthetic.report_inputs(metrics=synthetic.typed(no_claim_only()),
                                     gate=synthetic.gate_of(no_claim_only(), min_privacy=0.0), roc=None,
                                     privacy_scores={"logreg": risk_frame(8)})
    paths = build_report(inputs, tmp_path)
    html = paths["html"].read_text(encoding="utf-8")
    assert 'class="verdict verdict-pass-noclaim"' in html and 'class="verdict verdict-pass"' not in html
    assert "no DP claim: only the LTU floors were checked, no ε is certified" in html
    assert "## Verdict: **PASS** — no DP claim, no ε certified" in paths["md"].read_text(encoding="utf-8")
    # the flagged training samples are on the first screen of a defender without a claim
    banner = html[html.index('id="verdict"'):html.index("</div>", html.index('id="verdict"'))]
    assert "logreg</b>: no DP claim: only the LTU privacy and utility floors were checked; 8 of 30 training " \
           "samples flagged by the per-sample risk test" in banner


def test_a_failing_verdict_still_lists_only_the_failing_reasons(tmp_path: Path) -> None:
    html = build_report(inputs_of(certified_and_no_claim()), tmp_path)["html"].read_text(encoding="utf-8")
    banner = html[html.index('id="verdict"'):html.index("</div>", html.index('id="verdict"'))]
    assert 'class="verdict verdict-fail"' in html and "dp_sgd" not in banner and "chip" not in banner


def write(tmp_path: Path, m: dict[str, Any], **gate: Any) -> Path:
    folder = tmp_path / "metrics"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gate.json").write_text(json.dumps(synthetic.gate_of(m, **gate).to_json()), encoding="utf-8")
    (folder / "audit.json").write_text(json.dumps(m["audit"]), encoding="utf-8")
    return folder / "gate.json"


def test_cli_shows_strongest_eps_and_no_claim_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gate = write(tmp_path, certified_and_no_claim(), min_privacy=0.0)
    assert main(["verdict", "--no-check", "--gate", str(gate)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("privaudit verdict: PASS\n")
    assert ("  PASS  dp_sgd\n        strongest ε̂ 0.958 (white-box DP-SGD audit) ≤ claimed ε 1 (96% of the claim)\n"
            in out)
    assert "  PASS (no DP claim)  logreg\n" in out
    gate = write(tmp_path / "fail", certified_and_no_claim())
    assert main(["verdict", "--no-check", "--gate", str(gate)]) == 1  # exit codes unchanged
    assert "  FAIL  logreg\n" in capsys.readouterr().out


def test_cli_without_audit_json_prints_the_plain_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gate = write(tmp_path, certified_and_no_claim(), min_privacy=0.0)
    (tmp_path / "metrics" / "audit.json").unlink()
    assert main(["verdict", "--no-check", "--gate", str(gate)]) == 0
    out = capsys.readouterr().out
    assert "  PASS  logreg\n" in out and "strongest" not in out


def test_rich_cli_marks_no_claim() -> None:
    m = certified_and_no_claim()
    out = io.StringIO()
    print_verdict(synthetic.gate_of(m, min_privacy=0.0), out, use_rich=True, audit=synthetic.typed(m).audit)
    text = out.getvalue()
    assert "PASS (no DP claim)" in text and "strongest ε̂ 0.958" in text
