"""Data-dependent canary sizes: ``game3.canaries: auto`` and the checks the split stage runs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from privaudit.canaries.sizes import (
    GAME3_AUTO_MAX,
    check_canary_sizes,
    game3_canaries,
    game3_min_canaries,
    resolve_game3_canaries,
)
from privaudit.config import ParamsError, parse_params
from tests.canaries.conftest import LOGREG, make_params


def test_auto_is_a_quarter_of_the_defender_set_capped_at_1000() -> None:
    assert resolve_game3_canaries(898, "auto") == 224  # digits, split.defender_fraction 0.5
    assert resolve_game3_canaries(89, "auto") == 22  # wine (178 rows)
    assert resolve_game3_canaries(8, "auto") == 2
    assert resolve_game3_canaries(16, "auto", "split") == 4
    assert resolve_game3_canaries(4000, "auto") == 1000 == GAME3_AUTO_MAX
    assert resolve_game3_canaries(10**6, "auto") == GAME3_AUTO_MAX
    for n in range(8, 5000, 37):  # always fits: distinct Defender rows, at least the minimum
        assert game3_min_canaries() <= resolve_game3_canaries(n, "auto") <= n


def test_explicit_counts_pass_through_when_they_fit() -> None:
    assert resolve_game3_canaries(898, 200) == 200
    assert resolve_game3_canaries(36, 36) == 36
    assert resolve_game3_canaries(36, 4, "split") == 4


@pytest.mark.parametrize("n_def, setting, how, words", [
    (89, 200, "bonferroni", ["game3.canaries=200 exceeds the 89 Defender samples", "game3.canaries: auto (here 22)",
                             "<= 89"]),
    (36, 3, "split", ["game3.canaries=3 is below the 4 canaries", "game3.tau_selection: split"]),
    (7, "auto", "bonferroni", ["game3.canaries: auto", "= 1 is below the 2 canaries", "dataset.max_samples"]),
    (15, "auto", "split", ["= 3 is below the 4 canaries", "game3.tau_selection: split"]),
    (100, "many", "bonferroni", ["game3.canaries must be a count or 'auto'"]),
])
def test_sizes_that_cannot_fit_name_the_key_and_the_fix(n_def, setting, how, words) -> None:
    with pytest.raises(ValueError) as err:
        resolve_game3_canaries(n_def, setting, how)
    for w in words:
        assert w in str(err.value), str(err.value)


def _params(game3: dict, lidp: dict | None = None) -> SimpleNamespace:
    """Params-like object: ``game3`` as given (``auto`` needs no config support), ``lidp`` validated."""
    lp = make_params([LOGREG], lidp=lidp or {}).lidp
    g = SimpleNamespace(canaries=game3.get("canaries", "auto"), tau_selection=game3.get("tau_selection", "bonferroni"))
    return SimpleNamespace(game3=g, lidp=lp)


def test_check_canary_sizes_accepts_the_defaults_on_small_data() -> None:
    check_canary_sizes(_params({}), n_defender=89, n_reserved=89, n_features=13)
    assert game3_canaries(_params({}), 89) == 22
    check_canary_sizes(make_params([LOGREG]), 36, 36, 6)  # explicit game3.canaries: 30


@pytest.mark.parametrize("game3, lidp, n, words", [
    ({"canaries": 500}, {}, (36, 36, 6), ["game3.canaries=500 exceeds the 36 Defender samples"]),
    ({}, {"canaries": 30}, (100, 40, 6), ["lidp.canaries + lidp.null_canaries = 30 + 30 exceeds the canary pool "
                                          "of 40 Reserved samples", "lidp.trials"]),
    ({}, {"canary_type": "clipbkd", "clipbkd_pool": 1000}, (36, 36, 6), ["lidp.clipbkd_pool=1000 exceeds "
                                                                         "min(n, d) = 6"]),
    ({}, {"trials": 3, "tune_fraction": 0.2}, (100, 100, 6), ["lidp.trials=3 with lidp.tune_fraction=0.2 leaves "
                                                              "an empty tuning"]),
])
def test_check_canary_sizes_messages(game3, lidp, n, words) -> None:
    with pytest.raises(ValueError) as err:
        check_canary_sizes(_params(game3, lidp), *n)
    for w in words:
        assert w in str(err.value), str(err.value)


def test_clipbkd_pool_is_not_checked_without_a_feature_dimension() -> None:
    """The split stage knows d only for the identity backbone; the canaries stage checks it again."""
    check_canary_sizes(_params({}, {"canary_type": "clipbkd", "clipbkd_pool": 1000}), 2000, 2000, None)


def _auto_supported() -> bool:
    try:
        parse_params({"defenders": [LOGREG], "game3": {"canaries": "auto"}})
    except ParamsError:
        return False
    return True


@pytest.mark.skipif(not _auto_supported(), reason="config.Game3Params.canaries does not accept 'auto' yet")
def test_params_accept_auto_and_resolve_it() -> None:
    p = parse_params({"defenders": [LOGREG], "game3": {"canaries": "auto"}})
    assert game3_canaries(p, 898) == 224
    with pytest.raises(ParamsError, match="game3.canaries"):
        parse_params({"defenders": [LOGREG], "game3": {"canaries": 1}})
