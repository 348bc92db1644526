"""Cluster runner: sweeps of cases sent as submitit job arrays to Slurm, or to local processes.

- :mod:`~jaxbench.cluster.profile`: cluster profiles (TOML files under ``slurm/``).
- :mod:`~jaxbench.cluster.sweep`: a sweep's folder, manifest, tasks and records.
- :mod:`~jaxbench.cluster.worker`: what runs on a node: sets the environment, then times a shard.
- :mod:`~jaxbench.cluster.executors`: submitit executors, time limits and the sbatch script.
- :mod:`~jaxbench.cluster.pyenvs`: one Python environment per requested JAX version.
- :mod:`~jaxbench.cluster.preflight`: checks made before anything is submitted.
- :mod:`~jaxbench.cluster.dispatch`: submit, resume, status and collect.

Nothing in this package imports JAX at module level: a worker must set ``XLA_FLAGS`` and the
other variables JAX reads at start-up before JAX is first imported.
"""
