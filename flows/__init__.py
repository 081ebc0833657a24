"""Prefect flows of privaudit (the only place, with the stage glue, that imports prefect).

- :mod:`flows.audit`: the DVC pipeline under a concurrency limit of one; verdict artifacts.
- :mod:`flows.validate`: Great Expectations checks of a new data drop; starts the audit.
- :mod:`flows.canary_trials`: canary trial shards on a Dask cluster, then the pipeline.
- :mod:`flows.deploy`: the deployments (nightly audit, hourly validation) served by one process.

Run them from the repository root (deployment entrypoints are ``flows/<module>.py:<flow>``).
"""
