"""Every registered LTU attacker on tiny data; Theorem 3 with the retrain attacker; registry errors."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.attacks.ltu import LtuData, run_attacker
from privaudit.attacks.ltu_evaluation import ATTACKERS, AttackerOptions, evaluate_defender, make_attacker
from privaudit.config import ParamsError, parse_params
from privaudit.defenders.registry import make_defender, validate_defender_spec

OPTS = AttackerOptions(n_jobs=1, reference_models=3, learned_mode="exact")


def _tiny(raw: dict, n: int = 60, seed: int = 0, d: int = 5, classes: int = 3) -> LtuData:
    spec = validate_defender_spec(raw)
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, 2 * n)
    X = (rng.normal(size=(2 * n, d)) + 1.5 * np.eye(classes, d)[y]).astype(np.float32)
    is_def = np.zeros(2 * n, bool)
    is_def[rng.permutation(2 * n)[:n]] = True
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the ltu stage's mock trainings: bitwise-reproducible torch on CPU
    try:
        model = make_defender(spec, n_classes=classes).fit(X[is_def], y[is_def], seed=123)
    finally:
        torch.set_num_threads(threads)
    return LtuData(X=X, y=y, proba=model.predict_proba(X), is_defender=is_def, ids=np.arange(2 * n).astype(str),
                   train_rows=np.flatnonzero(is_def), n_classes=classes, spec=spec, model=model)


LOGREG = {"name": "lr", "kind": "logistic_regression", "randomness": "fixed"}


@pytest.mark.parametrize("name", sorted(ATTACKERS))
def test_each_attacker_runs_on_tiny_data(name: str) -> None:
    data = _tiny(LOGREG)
    res, _, _ = run_attacker(make_attacker(name, OPTS), data, 12, np.random.default_rng(0))
    assert res.rounds == 12 and 0.0 <= res.accuracy <= 1.0
    assert res.privacy == pytest.approx(min(2 * (1 - res.accuracy), 1.0))


@pytest.mark.parametrize("spec", [
    LOGREG,
    {"name": "nb", "kind": "sklearn", "estimator": "gaussian_nb", "randomness": "unseeded"},
    {"name": "sgd", "kind": "sklearn", "estimator": "sgd_svm", "randomness": "fixed"},
    {"name": "mlp", "kind": "torch_mlp", "hidden": [4], "epochs": 2, "batch_size": 16, "randomness": "fixed"},
])
def test_theorem3_deterministic_trainer_is_fully_exposed_by_retrain(spec: dict) -> None:
    data = _tiny(spec)
    assert data.model is not None and data.model.deterministic
    res, _, _ = run_attacker(make_attacker("retrain", OPTS), data, 15, np.random.default_rng(1))
    assert res.accuracy == 1.0 and res.privacy == 0.0
    if spec["randomness"] == "fixed":  # same data in the same order: the member's mock *is* M_D
        assert res.extra["exact_match_rounds"] == 15


def test_retrain_loses_power_with_secret_randomness() -> None:
    spec = {"name": "sgd", "kind": "sklearn", "estimator": "sgd_svm", "randomness": "unseeded"}
    res, _, _ = run_attacker(make_attacker("retrain", OPTS), _tiny(spec, n=80), 40, np.random.default_rng(2))
    assert res.extra["exact_match_rounds"] == 0 and res.accuracy < 1.0


def test_gradient_not_applicable_is_recorded_not_raised() -> None:
    data = _tiny({"name": "nb", "kind": "sklearn", "estimator": "gaussian_nb"})
    ev = evaluate_defender(data, 10, ["loss_gap", "gradient"], np.random.default_rng(0), OPTS)
    assert "gradient" in ev.not_applicable and "gradient" not in ev.results
    m = ev.metrics(0.9, 0.01)
    assert "gradient" not in m["attackers"] and "not applicable" in m["not_applicable"]["gradient"]


def test_progress_reports_every_attacker() -> None:
    """Issue 15 papercut: a long attacker (retrain) must not leave the ltu stage silent."""
    lines: list[str] = []
    data = _tiny({"name": "nb", "kind": "sklearn", "estimator": "gaussian_nb"})
    evaluate_defender(data, 10, ["loss_gap", "gradient"], np.random.default_rng(0), OPTS, progress=lines.append)
    assert len(lines) == 2 and lines[0].startswith("attacker loss_gap: accuracy ") and "skipped" in lines[1]


def test_logreg_gradient_norm_matches_autograd() -> None:
    import torch

    from privaudit.attacks.ltu_gradient import gradient_norms

    data = _tiny(LOGREG)
    from privaudit.attacks.ltu import make_table

    table, _ = make_table(data, np.random.default_rng(0))
    est = data.model.model  # type: ignore[union-attr]
    W = torch.tensor(est.coef_, requires_grad=True)
    b = torch.tensor(est.intercept_, requires_grad=True)
    i = 3
    x = torch.tensor(table.X[i].astype(np.float64))
    W, b = W.double(), b.double()
    loss = torch.nn.functional.cross_entropy((W @ x + b)[None], torch.tensor([int(table.y[i])]))
    gw, gb = torch.autograd.grad(loss, (W, b))
    expected = float(torch.sqrt((gw**2).sum() + (gb**2).sum()))
    assert gradient_norms(table)[i] == pytest.approx(expected, rel=1e-5)


def test_gradient_attacker_computes_a_tables_norms_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """guess() and the evaluator's per-sample scores share one gradient pass; another table gets its own."""
    import privaudit.attacks.ltu_gradient as ltu_gradient
    from privaudit.attacks.ltu import make_table

    calls: list[object] = []
    real = ltu_gradient.gradient_norms

    def counted(table: object) -> np.ndarray:
        calls.append(table)
        return real(table)  # type: ignore[arg-type]

    monkeypatch.setattr(ltu_gradient, "gradient_norms", counted)
    data = _tiny(LOGREG)
    table, _ = make_table(data, np.random.default_rng(0))
    other, _ = make_table(data, np.random.default_rng(1))
    att = ltu_gradient.GradientAttacker()
    first = att.sample_scores(table)
    again = att.sample_scores(table)
    assert calls == [table] and first.tobytes() == again.tobytes() == (-real(table)).tobytes()
    att.sample_scores(other)
    assert calls == [table, other]


def test_evaluate_defender_metrics_contract_and_outputs() -> None:
    data = _tiny(LOGREG)
    ev = evaluate_defender(data, 20, ["loss_gap", "bounded_loss", "lira", "rmia"], np.random.default_rng(0), OPTS)
    m = ev.metrics(0.8, 0.05)
    for key in ("accuracy", "privacy", "privacy_stderr", "utility", "utility_stderr", "rounds", "attacker",
                "theorem1_bound", "theorem2_bound", "below_theorem_bound"):
        assert key in m
    assert set(m["attackers"]) == {"loss_gap", "bounded_loss", "lira", "rmia"}
    assert m["attacker"] == max(m["attackers"].items(), key=lambda kv: (kv[1]["accuracy"], kv[0]))[0]
    assert set(ev.roc) == {"loss_gap", "lira", "rmia"}  # bounded_loss is randomized: no per-sample score
    for r in ev.roc.values():
        assert len(r["fpr"]) == len(r["tpr"]) <= 200 and 0 <= r["auc"] <= 1
    assert len(ev.scores) == len(data.y) and set(ev.scores.columns) == {"id", "role", "score"}
    assert ev.scores["score"].between(0, 1).all()
    assert "expected_accuracy" in m["attackers"]["loss_gap"]


def test_unknown_attacker_is_a_params_error() -> None:
    with pytest.raises(ParamsError, match=r"ltu.attackers.*unknown attacker 'nope'"):
        parse_params({"defenders": [LOGREG], "ltu": {"attackers": ["nope"]}})
    with pytest.raises(ParamsError, match=r"ltu.attackers.*twice"):
        parse_params({"defenders": [LOGREG], "ltu": {"attackers": ["loss_gap", "loss_gap"]}})


def test_params_know_exactly_the_registered_attackers() -> None:
    """config lists the names (loading params imports no attack code); they must be the registry's."""
    from privaudit.config import ATTACKER_NAMES

    assert ATTACKER_NAMES == tuple(ATTACKERS)
    with pytest.raises(ValueError, match="learned_mode"):
        make_attacker("learned", AttackerOptions(learned_mode="sometimes"))


@pytest.mark.parametrize("hidden", [[], [7], [6, 5]])
def test_torch_head_gradient_norms_match_autograd_per_sample(hidden: list[int]) -> None:
    """The gradient attacker's norms for a ``torch_mlp`` head (one batched forward and backward, the linear-layer
    identity) equal autograd's per-sample gradients, example by example, in float64."""
    import torch

    from privaudit.attacks.ltu_gradient import _torch_grad_norms
    from privaudit.defenders.registry import make_defender, validate_defender_spec

    g = np.random.default_rng(3)
    X, y = g.normal(size=(37, 9)).astype(np.float32), g.integers(0, 4, 37)
    spec = validate_defender_spec({"name": "m", "kind": "torch_mlp", "hidden": hidden, "epochs": 2}, where="d")
    model = make_defender(spec, 4).fit(X, y, 1)
    norms = _torch_grad_norms(model, X, y, chunk=8)  # chunks of 8: the last one of 5 rows
    net = model.net.double()
    expected = []
    for i in range(len(y)):
        loss = torch.nn.functional.cross_entropy(net(torch.tensor(X[i:i + 1], dtype=torch.float64)),
                                                 torch.tensor(y[i:i + 1]))
        grads = torch.autograd.grad(loss, list(net.parameters()))
        expected.append(float(torch.sqrt(sum((gr ** 2).sum() for gr in grads))))
    np.testing.assert_allclose(norms, expected, rtol=1e-12)


def test_torch_head_gradient_needs_linear_layers_with_relu_between() -> None:
    import torch

    from privaudit.attacks.ltu_gradient import NotApplicable, _torch_grad_norms

    class M:
        net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))

    with pytest.raises(NotApplicable, match="not Linear layers with ReLU between them"):
        _torch_grad_norms(M(), np.zeros((2, 3), np.float32), np.zeros(2, np.int64))
