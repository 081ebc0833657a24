"""What the ``report`` stage does: read the metrics once, evaluate the gate, write the report and the gate.

:func:`run_report` is the whole stage (``stages/report.py`` only parses its arguments). Order:

1. fail early if ``metrics/gate.json`` or ``reports/`` cannot be written;
2. read ``metrics/ltu.json``, ``audit.json``, ``bounds.json`` into typed entries, each checked
   against its GX contract (:func:`privaudit.verdict.metrics_files.read_metrics` with ``contract=True``),
   and the ledger's releases of the audited data set (``releases.yaml``);
3. evaluate the release gate (with ``gate.total_budget``, composing the releases with each candidate) and check its result against the ``gate`` contract, before anything
   is written;
4. load the optional report tables (per-sample scores and ROC curves of the ``ltu`` stage, LiDP ε̂
   vs trials, the Table 1 reproductions of ``report.table1`` of the audited data set, see
   :func:`select_table1`) and the provenance manifest;
5. write ``audit.html``, ``audit.md`` and ``plots/`` (each replaced atomically), then
   ``metrics/summary.json`` (:mod:`privaudit.report.summary`, what ``dvc metrics diff`` shows);
6. write ``metrics/gate.json`` last, with its provenance stamp (``privaudit verdict`` checks it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from privaudit.artifacts import ensure_writable, read_json, write_json
from privaudit.claims.ledger import LEDGER_FILE, Release, read_ledger
from privaudit.repro.provenance import build_manifest, provenance_stamp
from privaudit.seeding import SeededBlock
from privaudit.verdict.gate import GateSettings, evaluate_gate
from privaudit.verdict.total_budget import BudgetSettings, LedgerContext
from privaudit.verdict.metrics_files import GateResult, read_metrics
from privaudit.report.summary import build_summary

if TYPE_CHECKING:
    import pandas as pd

# pandas, matplotlib (the renderer) and the report's inputs are imported inside the functions that use them,
# so importing this module (the report stage's --help, its argument errors) pays for none of them.

__all__ = ["ReportPaths", "ReportPlan", "read_epsilon_curves", "read_ltu_tables", "read_releases", "read_table1", "run_report",
           "select_table1", "write_gate"]

#: the upstream data folders whose hashes the provenance manifest records
MANIFEST_DATA: dict[str, Path] = {
    "source": Path("data/source"), "split": Path("data/split"), "features": Path("data/features")}


@dataclass(frozen=True)
class ReportPaths:
    """Inputs and outputs of the report stage (the defaults are the pipeline's paths)."""

    ltu: Path = Path("metrics/ltu.json")
    audit: Path = Path("metrics/audit.json")
    bounds: Path = Path("metrics/bounds.json")
    ltu_scores: Path = Path("data/ltu")  # <defender>.scores.parquet and <defender>.roc.json
    curves: Path = Path("data/audit/epsilon_vs_trials")  # <defender>.csv (trials, eps_k1, eps_ksqrt)
    gate: Path = Path("metrics/gate.json")
    summary: Path = Path("metrics/summary.json")
    out: Path = Path("reports")
    repo: Path = Path(".")
    releases: Path = LEDGER_FILE  # the ledger of releases (composed under gate.total_budget)


class _Dataset(Protocol):
    @property
    def name(self) -> str: ...

    def data_identity(self) -> str: ...


class _GateBlock(GateSettings, Protocol):
    @property
    def total_budget(self) -> BudgetSettings | None: ...


class _ComputeBlock(Protocol):
    def workers(self) -> int: ...


class _ReportBlock(Protocol):
    @property
    def title(self) -> str: ...
    @property
    def most_exposed(self) -> int: ...
    @property
    def table1(self) -> list[str] | None: ...
    @property
    def table1_other_datasets(self) -> bool: ...


class ParamsWithReport(Protocol):
    """What :meth:`ReportPlan.of` reads of the params (:class:`privaudit.config.Params` is one; the report
    imports no params module)."""

    @property
    def gate(self) -> _GateBlock: ...
    @property
    def report(self) -> _ReportBlock: ...
    @property
    def dataset(self) -> _Dataset: ...
    @property
    def base(self) -> SeededBlock: ...
    @property
    def compute(self) -> _ComputeBlock: ...

    def model_dump(self, *, mode: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ReportPlan:
    """What the report stage reads of the params, built once by the stage (:meth:`of`).

    Attributes:
        gate: the ``gate`` block (thresholds, ``gate.beta``, ``gate.bounds``).
        dataset: ``dataset.name`` (which Table 1 reproductions belong to this audit).
        title, most_exposed, table1, table1_other_datasets: the ``report`` block.
        seed: ``base.seed``; params: the whole params as JSON (both recorded in the provenance manifest).
        total_budget: ``gate.total_budget`` (``None``: no budget, the ledger is shown but not composed).
        identity: the data set's identity (``dataset.identity`` or the data source): which releases compose.
        workers: ``compute.n_jobs`` as a count: the processes that draw the figures (no result depends on it).
    """

    gate: GateSettings
    dataset: str
    title: str
    most_exposed: int
    table1: tuple[str, ...]
    table1_other_datasets: bool
    seed: int
    params: dict[str, Any]
    total_budget: BudgetSettings | None = None
    identity: str | None = None
    workers: int = 1

    @classmethod
    def of(cls, params: ParamsWithReport) -> "ReportPlan":
        r = params.report
        return cls(gate=params.gate, dataset=params.dataset.name, title=r.title, most_exposed=r.most_exposed,
                   table1=tuple(r.table1 or ()), table1_other_datasets=r.table1_other_datasets,
                   seed=params.base.seed, params=params.model_dump(mode="json"),
                   total_budget=params.gate.total_budget, identity=params.dataset.data_identity(),
                   workers=params.compute.workers())

    def data_identity(self) -> str:
        """The audited data set's identity (``dataset.name`` when the plan was built without one)."""
        return self.identity if self.identity is not None else self.dataset


def read_releases(path: Path, plan: ReportPlan) -> tuple[Release, ...]:
    """The ledger's releases of the audited data set (oldest first). A missing ledger is empty without a budget
    and an error with one (:func:`privaudit.claims.ledger.read_ledger` names the fix)."""
    if plan.total_budget is None and not path.is_file():
        return ()
    return read_ledger(path).for_identity(plan.data_identity())


def read_ltu_tables(folder: Path, defenders: Iterable[str]) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """The ``ltu`` stage's per-sample scores and ROC curves of each defender that has them:
    ``(scores, roc)``; a defender without a file is left out, as is an empty ROC file."""
    import pandas as pd

    scores: dict[str, pd.DataFrame] = {}
    roc: dict[str, Any] = {}
    for name in defenders:
        if (path := folder / f"{name}.scores.parquet").is_file():
            scores[name] = pd.read_parquet(path)
        if (path := folder / f"{name}.roc.json").is_file() and (curves := read_json(path)):
            roc[name] = curves
    return scores, roc


def read_epsilon_curves(folder: Path, defenders: Iterable[str]) -> dict[str, pd.DataFrame]:
    """LiDP ε̂ vs trials (``<defender>.csv``) of each defender that has one."""
    import pandas as pd

    from privaudit.report.inputs import EPSILON_TRIALS_COLUMNS

    return {name: pd.read_csv(folder / f"{name}.csv")[list(EPSILON_TRIALS_COLUMNS)]
            for name in defenders if (folder / f"{name}.csv").is_file()}


def read_table1(paths: Iterable[str]) -> dict[str, pd.DataFrame]:
    """The Table 1 reproductions of ``report.table1``, keyed by data set (``table1_<name>.csv``).

    Raises:
        FileNotFoundError: a listed file does not exist (the message says how to make it or drop it).
    """
    import pandas as pd

    tables = {}
    for entry in paths:
        path = Path(entry)
        if not path.is_file():
            raise FileNotFoundError(f"report.table1: {path} not found (run benchmarks/ltu_table1.py or set it to null)")
        tables[path.stem.removeprefix("table1_")] = pd.read_csv(path)
    return tables


def select_table1(tables: dict[str, pd.DataFrame], dataset: str, *, other_datasets: bool = False
                  ) -> tuple[dict[str, pd.DataFrame], tuple[str, ...]]:
    """``(shown, left out)``: the tables of data set ``dataset`` (all with ``other_datasets``); the
    others are left out, so a report on a user's own data shows no digits/Location benchmark table."""
    shown = {name: frame for name, frame in tables.items() if other_datasets or name == dataset}
    return shown, tuple(name for name in tables if name not in shown)


def write_gate(path: Path, gate: GateResult, provenance: dict[str, Any]) -> None:
    """Write ``metrics/gate.json``: the verdict with the provenance it was computed from."""
    write_json(path, {**gate.to_json(), "provenance": provenance})


def run_report(paths: ReportPaths, plan: ReportPlan) -> GateResult:
    """Evaluate the release gate and write the self-contained audit report (see the module doc).

    Returns:
        The gate's verdict (as written to ``paths.gate``, without the provenance stamp).
    """
    from privaudit.report.inputs import ReportInputs
    from privaudit.report.render import build_report
    from privaudit.validation import validate_metrics

    ensure_writable(paths.gate, paths.summary, paths.out / "audit.html")
    metrics = read_metrics(paths.ltu, paths.audit, paths.bounds, contract=True)
    releases = read_releases(paths.releases, plan)
    ledger = (LedgerContext(plan.total_budget, plan.data_identity(), releases)
              if plan.total_budget is not None else None)
    gate = evaluate_gate(metrics, plan.gate, ledger)
    validate_metrics("gate", gate.to_json())  # the output, before anything is written
    scores, roc = read_ltu_tables(paths.ltu_scores, metrics.ltu)
    curves = read_epsilon_curves(paths.curves, metrics.audit)
    table1, left_out = select_table1(read_table1(plan.table1), plan.dataset,
                                     other_datasets=plan.table1_other_datasets)
    manifest = build_manifest(paths.repo, plan.params, plan.seed, MANIFEST_DATA)
    inputs = ReportInputs(metrics, gate, manifest, privacy_scores=scores or None, roc=roc or None,
                          epsilon_vs_trials=curves or None, table1=table1 or None,
                          table1_left_out=left_out, dataset=plan.dataset, releases=releases)
    build_report(inputs, paths.out, title=plan.title, most_exposed=plan.most_exposed, workers=plan.workers)
    write_json(paths.summary, build_summary(metrics, gate).to_json())
    # ties the verdict to the inputs/params/dvc.lock it was computed from (privaudit verdict checks it)
    write_gate(paths.gate, gate, provenance_stamp(paths.repo, "report"))
    return gate
