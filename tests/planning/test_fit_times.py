"""The defenders stage's measured fit times (``privaudit.planning.timings``): what is written is read back."""

from __future__ import annotations

from pathlib import Path

from privaudit.planning.timings import FitTime, read_fit_times, record_fit_time


def test_a_fit_time_with_its_one_thread_rate_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "fits.json"
    batched = FitTime("dp", "k1", 2.0, 900, model_seconds=0.03, call_seconds=0.4, timed_by="probe", device="cpu",
                      one_thread_model_seconds=0.05, one_thread_call_seconds=0.5)
    plain = FitTime("lr", "k2", 0.1, 900, model_seconds=0.05, timed_by="fits", device="cpu")
    record_fit_time(batched, path)
    record_fit_time(plain, path)
    assert read_fit_times(path) == {"dp": batched, "lr": plain}
    assert "one_thread_model_seconds" not in path.read_text().split('"lr"')[1]  # written only where measured
