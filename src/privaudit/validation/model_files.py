"""Model files are data, never code: check a saved defender before anything loads it.

Defenders are persisted only as skops (``.skops``: a zip of JSON schema + numpy arrays,
loaded with an explicit list of trusted types) or safetensors (``.safetensors``: a JSON header
+ raw tensor bytes). :func:`check_model_file` inspects a file *without deserialising objects*:

- the suffix must be ``.skops``, ``.safetensors`` or ``.bin`` (the user ``python`` defender's
  file: skops when it is a zip, else safetensors);
- a file starting with a pickle opcode (``\\x80``) is refused outright, whatever its name;
- ``.skops``: must be a zip holding ``schema.json``, and every type it would construct must be
  in :data:`TRUSTED_TYPES` or the defender spec's own
  ``trusted_types`` (``skops.io.get_untrusted_types`` reads the schema only);
- ``.safetensors``: the header must parse (``safe_open`` reads the header, never executes).

Every problem raises :class:`ModelFileError` (a ``ValueError``) naming the file.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Iterable

SUFFIXES = (".skops", ".safetensors", ".bin")  # .bin: the `python` defender's skops-or-safetensors file
PICKLE_PROTOCOL_OPCODE = b"\x80"

#: types skops may reconstruct when loading a defender model (the sklearn zoo and ``kind: python``
#: estimators; nothing else is executed)
TRUSTED_TYPES: tuple[str, ...] = (
    "numpy.dtype",
    "numpy.ndarray",
    "sklearn.ensemble._forest.RandomForestClassifier",
    "sklearn.tree._classes.DecisionTreeClassifier",
    "sklearn.tree._tree.Tree",
    "sklearn.neural_network._stochastic_optimizers.AdamOptimizer",
    "sklearn.neighbors._kd_tree.KDTree",
    "sklearn.neighbors._ball_tree.BallTree",
    "sklearn.multioutput.MultiOutputRegressor",
    "sklearn.linear_model._bayes.BayesianRidge",
    "sklearn._loss.loss.HalfMultinomialLoss",
    "sklearn._loss.link.MultinomialLogit",
    "sklearn._loss.link.Interval",
    "sklearn.linear_model._stochastic_gradient.SGDClassifier",
    "sklearn.linear_model._sgd_fast.Hinge",
    "sklearn.linear_model._perceptron.Perceptron",
    "sklearn.neural_network._multilayer_perceptron.MLPClassifier",
    "sklearn.svm._classes.SVC",
    "sklearn.svm._classes.LinearSVC",
    "sklearn.naive_bayes.GaussianNB",
    "sklearn.neighbors._classification.KNeighborsClassifier",
    "sklearn.linear_model._logistic.LogisticRegression",
)


class ModelFileError(ValueError):
    """A model file is not a safe skops/safetensors file; the message names it."""


def check_model_file(path: Path, extra_trusted: Iterable[str] = ()) -> str:
    """Raise :class:`ModelFileError` unless ``path`` is a loadable-without-code model file.

    Args:
        extra_trusted: skops types trusted beyond ``TRUSTED_TYPES`` (a spec's ``trusted_types``).

    Returns:
        ``"skops"`` or ``"safetensors"``.
    """
    path = Path(path)
    if path.suffix not in SUFFIXES:
        raise ModelFileError(f"model file {path}: suffix must be one of {list(SUFFIXES)} (skops or safetensors), "
                             f"got {path.suffix!r}; other formats are never loaded")
    if not path.is_file():
        raise ModelFileError(f"model file {path} not found (run the defenders stage)")
    with path.open("rb") as fh:
        head = fh.read(2)
    # a safetensors file starts with its header's length (u64, little-endian), whose low byte may be 0x80
    if head[:1] == PICKLE_PROTOCOL_OPCODE and not _is_safetensors(path):
        raise ModelFileError(f"model file {path} is a Python pickle, not {path.suffix[1:]}; refusing to load it "
                             "(loading a pickle can run arbitrary code)")
    if path.suffix == ".skops" or (path.suffix == ".bin" and zipfile.is_zipfile(path)):
        return _check_skops(path, tuple(extra_trusted))
    return _check_safetensors(path)


def _check_skops(path: Path, extra_trusted: tuple[str, ...]) -> str:
    import skops.io as sio

    if not zipfile.is_zipfile(path):
        raise ModelFileError(f"model file {path} is not a skops archive (not a zip: truncated, corrupt or replaced)")
    try:
        with zipfile.ZipFile(path) as zf:
            if "schema.json" not in zf.namelist():
                raise ModelFileError(f"model file {path} is not a skops archive (no schema.json)")
            json.loads(zf.read("schema.json"))
        untrusted = sio.get_untrusted_types(file=path)
    except ModelFileError:
        raise
    except Exception as err:  # zipfile/json/skops raise many types for a corrupt archive
        raise ModelFileError(f"model file {path} is a corrupt skops archive: {err}") from None
    unknown = sorted(set(untrusted) - set(TRUSTED_TYPES) - set(extra_trusted))
    if unknown:
        raise ModelFileError(f"model file {path} would construct untrusted types {unknown}; refusing to load it")
    return "skops"


def _is_safetensors(path: Path) -> bool:
    """Whether ``path`` opens as a safetensors file (its header parses); reads the header only."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as fh:
            list(fh.keys())
    except Exception:  # noqa: BLE001 - SafetensorError and OSError: not a safetensors file
        return False
    return True


def _check_safetensors(path: Path) -> str:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as fh:
            list(fh.keys())
    except Exception as err:  # SafetensorError and OSError; both mean "not a valid file"
        raise ModelFileError(f"model file {path} is not a valid safetensors file: {err}") from None
    return "safetensors"
