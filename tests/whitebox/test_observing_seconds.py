"""What the white-box recording itself costs in a run (hooks.Recording.observing_seconds): the plan prices the
one-run audit's unwatched DP-SGD run from the watched release fit with it (at 10k x 128 an opacus fit took
5.9-6.7 s watched, 3.5-3.8 s not). It must count the recording's own work and nothing of the trainer's."""

from __future__ import annotations

import dataclasses
import time

import pytest

from privaudit import hooks
from privaudit.defenders.registry import validate_defender_spec
from privaudit.defenders.release_watch import ReleaseWatch, read_release_watch, write_release_watch
from privaudit.defenders.trained_files import train_release
from privaudit.testing.planted.opacus_bugs import tiny_data

from tests.whitebox.test_release_run import DP_SGD, _feature_set

pytestmark = pytest.mark.filterwarnings("ignore:Optimal order", "ignore:Full backward hook", "ignore:GDP accounting",
                                        "ignore:Using a non-full backward hook", "ignore:.*empty")

PAUSE_S = 0.01  # 0.3 s over the 30 steps: well above the 0.03-0.06 s a plain run's recording costs under load


def _fit(monkeypatch: pytest.MonkeyPatch, *, slow_trainer: bool = False, slow_recording: bool = False,  # type: ignore[no-untyped-def]
         slow_clip: bool = False):
    spec = validate_defender_spec(DP_SGD)
    if slow_clip:  # opacus's clip: an unwatched step runs it once, a watched one twice (its canary pass)
        from opacus.optimizers import DPOptimizer

        clip = DPOptimizer.clip_and_accumulate
        monkeypatch.setattr(DPOptimizer, "clip_and_accumulate", lambda self: (time.sleep(PAUSE_S), clip(self))[1])
    if slow_trainer:  # the training loop's own work: a pause in every forward pass of the model
        import torch

        forward = torch.nn.Linear.forward
        monkeypatch.setattr(torch.nn.Linear, "forward", lambda self, x: (time.sleep(PAUSE_S), forward(self, x))[1])
    if slow_recording:  # the recording's own work: a pause in every noise read
        noise = hooks.Recording._noise
        monkeypatch.setattr(hooks.Recording, "_noise", lambda self, opt: (time.sleep(PAUSE_S), noise(self, opt))[1])
    start = time.perf_counter()
    t = train_release(spec, _feature_set(), 7, "cpu", canary_scale=4.0)
    return t, time.perf_counter() - start


def test_the_recording_counts_its_own_work_and_not_the_trainers(monkeypatch: pytest.MonkeyPatch) -> None:
    _fit(monkeypatch)  # a first fit in this process: one-off costs (imports, first calls) land anywhere
    plain, wall = _fit(monkeypatch)
    assert plain.watch is not None and plain.watch.observed
    steps = plain.watch.observations.steps
    assert 0 < plain.watch.observing_seconds < wall
    with monkeypatch.context() as m:
        slow, _ = _fit(m, slow_recording=True)
    assert slow.watch.observing_seconds >= plain.watch.observing_seconds + 0.8 * steps * PAUSE_S
    with monkeypatch.context() as m:
        trainer, trainer_wall = _fit(m, slow_trainer=True)
    assert trainer_wall >= wall + steps * PAUSE_S * 0.8  # the pause ran in every step
    assert trainer.watch.observing_seconds < plain.watch.observing_seconds + 0.3 * steps * PAUSE_S
    with monkeypatch.context() as m:
        clipped, _ = _fit(m, slow_clip=True)  # the canary pass is the recording's, the data pass the step's
    extra = clipped.watch.observing_seconds - plain.watch.observing_seconds
    assert 0.8 * steps * PAUSE_S <= extra < 1.6 * steps * PAUSE_S, extra


def test_observing_seconds_is_a_measurement_not_an_output(tmp_path) -> None:  # type: ignore[no-untyped-def]
    t = train_release(validate_defender_spec(DP_SGD), _feature_set(), 7, "cpu", canary_scale=4.0)
    write_release_watch(tmp_path, t.watch)
    assert "observing" not in (tmp_path / "release_watch.json").read_text()  # DVC output: no timings in it
    back = read_release_watch(tmp_path)
    assert back.observing_seconds == 0.0 and t.watch.observing_seconds > 0
    same = ReleaseWatch(t.watch.seed, t.watch.canary_scale, None, reason="x")
    assert same == dataclasses.replace(same, observing_seconds=9.0)  # not compared: equal watches stay equal


def test_a_recording_that_watched_nothing_cost_nothing() -> None:
    X, y = tiny_data(n=50)
    with hooks.recording(seed=1) as rec:
        pass
    assert rec.observing_seconds == 0.0
