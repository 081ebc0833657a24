"""The white-box stage's work besides its training runs, timed for a first plan (``audits.whitebox_work``): the
stage's own estimate (opacus's accountant composed over the pooled runs) on the release run the defenders stage
recorded, at the δ, level and accountant the stage uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from privaudit.audits import whitebox
from privaudit.audits.protocol import AuditRequest
from privaudit.audits.whitebox_work import time_whitebox_work
from privaudit.claims.claim import PrivacyClaim
from privaudit.defenders.registry import validate_defender_spec
from privaudit.defenders.release_watch import WATCH_FILE, ReleaseWatch, write_release_watch
from privaudit.defenders.trained_files import train_release, write_defender
from tests.whitebox.test_release_run import DP_SGD, _feature_set

pytestmark = pytest.mark.filterwarnings("ignore:Optimal order", "ignore:Full backward hook", "ignore:GDP accounting",
                                        "ignore:Using a non-full backward hook", "ignore:.*empty")


def _request(spec) -> AuditRequest:  # noqa: ANN001
    return AuditRequest(spec=spec, claim=PrivacyClaim(1.0, 1e-5, "add_remove"), level=0.05, default_delta=1e-5, seed=1)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    spec = validate_defender_spec(DP_SGD)
    t = train_release(spec, _feature_set(), 7, "cpu", canary_scale=4.0)
    root = tmp_path_factory.mktemp("defenders")
    write_defender(root / "dp", t.model, t.outputs, t.info, t.watch)
    return root, spec


def test_the_probe_runs_the_stages_estimate_on_the_release_run_pooled_as_the_stage_pools(
        recorded, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    root, spec = recorded
    seen: list[dict[str, object]] = []
    real = whitebox.estimate_whitebox

    def spy(runs, **kw):  # noqa: ANN001, ANN003, ANN202
        seen.append({"runs": list(runs), **kw})
        return real(runs, **kw)

    monkeypatch.setattr(whitebox, "estimate_whitebox", spy)
    t = time_whitebox_work([_request(spec)], root, 2)
    assert t.seconds > 0 and t.timed_by == "the estimate of 1 defender on 3 copies of its recorded release run"
    (call,) = seen
    assert len(call["runs"]) == 3 and all(r is call["runs"][0] for r in call["runs"])
    delta, accountant = whitebox.estimate_settings(_request(spec))
    assert (call["delta"], call["accountant"], call["level"]) == (delta, accountant, 0.05)
    assert accountant == spec.accountant and call["canary_scale"] == 4.0 and call["dataset_size"] == 200


def test_what_the_probe_cannot_time(recorded, tmp_path: Path) -> None:  # noqa: ANN001
    root, spec = recorded
    with pytest.raises(ValueError, match=r"runs >= 1 \(whitebox.runs\), got 0"):
        time_whitebox_work([_request(spec)], root, 0)
    with pytest.raises(FileNotFoundError, match="release_watch.json"):
        time_whitebox_work([_request(spec)], tmp_path, 2)
    write_release_watch(tmp_path / "dp", ReleaseWatch(seed=1, canary_scale=4.0, observations=None, reason="not watched"))
    assert (tmp_path / "dp" / WATCH_FILE).is_file()
    t = time_whitebox_work([_request(spec)], tmp_path, 2)
    assert t.seconds == 0 and t.timed_by == "no release run observed: nothing to time"
