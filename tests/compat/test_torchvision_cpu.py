"""import_torchvision: torchvision (a CUDA wheel) over a CPU torch, and only that failure is handled."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from privaudit.compat import compiled_ops_available, import_torchvision

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _run(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (a clean torch op registry and sys.modules)."""
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_models_and_transforms_work() -> None:
    torchvision = import_torchvision()
    assert import_torchvision() is torchvision  # idempotent
    model = torchvision.models.resnet18(weights=None, num_classes=3).eval()
    with torch.inference_mode():
        assert model(torch.rand(2, 3, 32, 32)).shape == (2, 3)
    from torchvision.transforms import v2

    assert v2.Resize(16)(torch.rand(3, 32, 32)).shape == (3, 16, 16)


def test_compiled_ops_state_is_reported_honestly() -> None:
    torchvision = import_torchvision()
    boxes, scores = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]]), torch.tensor([0.9, 0.8])
    if compiled_ops_available():
        assert torchvision.ops.nms(boxes, scores, 0.5).tolist() == [0]
    else:
        with pytest.raises(RuntimeError, match="Couldn't load custom C"):
            torchvision.ops.nms(boxes, scores, 0.5)


def test_fresh_interpreter_plain_import_then_shim() -> None:
    """Where plain ``import torchvision`` fails with the nms error, the shim still imports it,
    even after that failed attempt left half-initialised modules behind."""
    result = _run(
        """
        try:
            import torchvision
            print("native")
        except RuntimeError as exc:
            print("plain import failed:", exc)
        from privaudit.compat import import_torchvision
        tv = import_torchvision()
        import torchvision
        assert torchvision is tv
        print(type(tv.models.mobilenet_v3_small(weights=None)).__name__)
        """
    )
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.strip().splitlines()
    assert second == "MobileNetV3"
    if first == "native":
        pytest.skip("torchvision imports natively here (matching build or CUDA torch); nothing to shim")
    assert first == "plain import failed: operator torchvision::nms does not exist"
    assert torch.version.cuda is None


def test_other_import_failures_propagate() -> None:
    result = _run(
        """
        import sys
        class Boom:
            def find_spec(self, name, path=None, target=None):
                if name == "torchvision":
                    raise RuntimeError("something else entirely")
                return None
        finder = Boom()
        sys.meta_path.insert(0, finder)
        from privaudit.compat import import_torchvision
        try:
            import_torchvision()
        except RuntimeError as exc:
            print("raised:", exc)
        sys.meta_path.remove(finder)
        sys.modules["torchvision"] = None
        try:
            import_torchvision()
        except ImportError:
            print("ImportError")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines() == ["raised: something else entirely", "ImportError"]
