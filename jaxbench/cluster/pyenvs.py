"""One Python environment per requested JAX version, built once on the shared filesystem.

``jaxbench submit --jax 0.11.2,0.12.0.1`` runs each version's tasks with the interpreter of
``<env_root>/jax-<version>[-<extra>]-py<X.Y>/``: a ``venv`` with this checkout installed in
editable mode (so every version runs the same jaxbench code) plus ``jax==<version>`` and
``jaxlib==<version>`` (with an extra such as ``cuda13``, ``jax[cuda13]==<version>``, which pins
the matching CUDA plugin wheels, as JAX's installation guide has it). Another package index
(``extra_index_url``, e.g. JAX's nightly wheels) is passed to pip where given. An environment is
complete once its ``jaxbench-env.json`` exists; a build
cut short is wiped and redone; concurrent builders of one environment wait on a lock file. The
marker holds a digest of the checkout's declared dependencies: an environment built before they
changed (a new dependency, a new bound) is rebuilt, not used without it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tomllib
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from jaxbench.cluster.profile import REPO_ROOT

MARKER = "jaxbench-env.json"
#: What pip (and the OS, ``ENOSPC``) says when the disk is full.
NO_SPACE = "No space left on device"
#: The ``jax`` extras an environment may take.
JAX_EXTRAS = ("cuda12", "cuda13", "tpu")
#: The plugin package an extra pins to the same version as ``jaxlib`` (JAX's installation guide).
PLUGINS = {"cuda12": "jax-cuda12-plugin", "cuda13": "jax-cuda13-plugin"}


class PyEnvError(RuntimeError):
    """An environment could not be built; the message has pip's last lines."""


class WorkloadNotFound(PyEnvError):
    """An environment cannot find a user workload (one line: workload, module, environment)."""


def base_python(configured: str | None) -> str:
    """The interpreter environments are made from: ``configured``, else the base of this one."""
    return configured or getattr(sys, "_base_executable", None) or sys.executable


def python_tag(python: str) -> str:
    """``X.Y`` of an interpreter (``3.12``).

    Raises:
        PyEnvError: It cannot be run.
    """
    out = _run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], "python")
    return out.strip()


def env_dir(
    env_root: Path,
    jax_version: str,
    extra: str | None,
    py_tag: str,
    requirements: tuple[str, ...] = (),
) -> Path:
    """Folder of the environment for one JAX version.

    Environments with more requirements (:func:`requirements_digest`) get a folder of their
    own (``-u<digest>``), so the user's packages never enter another command's environment.
    """
    suffix = f"-{extra}" if extra else ""
    user = f"-u{requirements_digest(requirements)}" if requirements else ""
    return env_root / f"jax-{jax_version}{suffix}-py{py_tag}{user}"


def requirements_digest(requirements: tuple[str, ...]) -> str:
    """SHA-256 (first 10 hex digits) of pip arguments and of the files they name.

    Each ``-r FILE``'s text and each ``-e FOLDER``'s ``pyproject.toml`` count, so an edited
    requirements file builds anew, and so does a local project whose declared dependencies
    changed (its code is installed editable: edits to the code need no new environment).

    Raises:
        ValueError: A ``-r`` file cannot be read.
    """
    parts = []
    for i, arg in enumerate(requirements):
        parts.append(arg)
        flag = requirements[i - 1] if i > 0 else ""
        if flag == "-r":
            try:
                parts.append(Path(arg).read_text(encoding="utf-8"))
            except OSError as exc:
                raise ValueError(f"--requirements {arg}: cannot be read ({exc.strerror})") from None
        elif flag == "-e" and (Path(arg) / "pyproject.toml").is_file():
            parts.append((Path(arg) / "pyproject.toml").read_text(encoding="utf-8"))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:10]


def dependencies_digest(pyproject: Path = REPO_ROOT / "pyproject.toml") -> str:
    """SHA-256 (first 16 hex digits) of the project's ``dependencies`` and optional ones."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    declared = {"dependencies": project.get("dependencies", []),
                "optional": project.get("optional-dependencies", {})}  # fmt: skip
    return hashlib.sha256(json.dumps(declared, sort_keys=True).encode()).hexdigest()[:16]


def _is_current(folder: Path) -> bool:
    """Whether ``folder`` is a finished environment of the dependencies declared now."""
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("dependencies") == dependencies_digest()


def env_python(folder: Path) -> Path:
    """The interpreter inside an environment folder."""
    return folder / "bin" / "python"


def check_extra(extra: str | None) -> None:
    """Raise ``ValueError`` naming ``--jax-extra`` unless ``extra`` is ``None`` or known."""
    if extra is not None and extra not in JAX_EXTRAS:
        raise ValueError(f"--jax-extra {extra!r}: expected one of {', '.join(JAX_EXTRAS)}")


def check_index_url(url: str | None) -> None:
    """Raise ``ValueError`` naming ``--extra-index-url`` unless ``url`` is ``None`` or an index.

    pip takes an ``http://``, ``https://`` or ``file://`` URL, or a local folder laid out as
    a simple repository (PEP 503); anything else would reach pip, whose error blames the
    install.
    """
    if url is None:
        return
    parts = urllib.parse.urlsplit(url)
    if (parts.scheme in ("http", "https") and parts.netloc) or parts.scheme == "file":
        return
    if not parts.scheme and Path(url).expanduser().is_dir():
        return
    raise ValueError(f"--extra-index-url {url!r}: expected an http(s):// or file:// URL, or a "
                     "local folder laid out as a package index")  # fmt: skip


def packages(extra: str | None) -> tuple[str, ...]:
    """The packages an environment pins to one version: jax, jaxlib and the extra's plugin."""
    plugin = PLUGINS.get(extra or "")
    return ("jax", "jaxlib", plugin) if plugin else ("jax", "jaxlib")


def _index_args(extra_index_url: str | None) -> list[str]:
    """The arguments that give pip another index."""
    return ["--extra-index-url", extra_index_url] if extra_index_url else []


def index_versions(python: str, package: str, extra_index_url: str | None = None) -> list[str]:
    """Versions of ``package`` the package index offers for ``python`` (``pip index versions``).

    Args:
        python: The interpreter whose pip asks.
        package: The distribution name.
        extra_index_url: Another index to ask too; development builds (nightlies) are then
            listed as well (``--pre``).

    Raises:
        PyEnvError: pip failed (no index reachable) or its output had no version list.
    """
    out = _run(
        [python, "-m", "pip", "index", "versions", package, "--disable-pip-version-check",
         *_index_args(extra_index_url), *(["--pre"] if extra_index_url else [])],
        f"pip index versions {package}",
    )  # fmt: skip
    match = re.search(r"Available versions:\s*(.+)", out)
    if not match:
        raise PyEnvError(f"pip index versions {package}: no version list in {out!r}")
    return [v.strip() for v in match.group(1).split(",") if v.strip()]


def check_supported(versions: Iterable[str]) -> None:
    """Fail for a JAX version outside jaxbench's own ``jax`` requirement (``jax>=0.10``).

    Its environment would install jaxbench with that requirement, and pip would refuse with a
    page of resolver output after the environment was half built.

    Raises:
        ValueError: Such a version (the message names it and the requirement), or a text that
            is not a version at all.
    """
    import importlib.metadata

    from packaging.requirements import Requirement
    from packaging.version import InvalidVersion, Version

    for v in versions:
        try:
            Version(v)
        except InvalidVersion:
            raise ValueError(f"--jax: {v!r} is not a JAX version (e.g. 0.12.1)") from None
    try:
        own = map(Requirement, importlib.metadata.requires("jaxbench") or [])
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return
    needs = next((r.specifier for r in own if r.name == "jax" and not r.marker), None)
    old = [v for v in versions if needs is not None and not needs.contains(v, prereleases=True)]
    if old:
        raise ValueError(f"--jax: JAX {', '.join(old)}: jaxbench runs on jax{needs} (its own "
                         "requirement), so no environment of it can hold jaxbench")  # fmt: skip


def check_versions(
    python: str,
    versions: Iterable[str],
    extra: str | None = None,
    extra_index_url: str | None = None,
) -> None:
    """Fail unless each version is supported and the index has it, of each of :func:`packages`.

    Supported: :func:`check_supported`.

    Raises:
        ValueError: A version is unsupported or missing; the message names it (and the newest
            ones offered).
        PyEnvError: The index cannot be asked.
    """
    versions = list(versions)
    check_supported(versions)
    for package in packages(extra):
        offered = index_versions(python, package, extra_index_url)
        missing = [v for v in versions if v not in offered]
        if missing:
            raise ValueError(
                f"--jax: {package} {', '.join(missing)} is not on the package index for "
                f"{python} (newest offered: {', '.join(offered[:5])})"
            )


def ensure_env(
    env_root: Path,
    jax_version: str,
    python: str,
    extra: str | None = None,
    extra_index_url: str | None = None,
    requirements: tuple[str, ...] = (),
) -> Path:
    """Build (once) the environment for ``jax_version``; returns its interpreter.

    Args:
        env_root: Folder of the environments.
        jax_version: The version of jax and jaxlib (and the extra's plugin) to pin.
        python: The base interpreter.
        extra: ``jax``'s extra (:data:`JAX_EXTRAS`), or ``None``.
        extra_index_url: Another package index for pip (e.g. JAX's nightly wheels).
        requirements: More ``pip install`` arguments, installed with JAX in one resolve: the
            user workload's own distribution (``-e FOLDER`` or ``NAME==VERSION``,
            :func:`jaxbench.workloads.source.requirements`), ``--with``
            requirements, ``-r FILE``. They name the folder (:func:`env_dir`).

    Raises:
        PyEnvError: ``venv`` or ``pip install`` failed, or the environment imports a
            different JAX version than asked; the folder is removed again (as on Ctrl-C).
        ValueError: A ``-r`` file cannot be read.
    """
    folder = env_dir(env_root, jax_version, extra, python_tag(python), requirements)
    folder.parent.mkdir(parents=True, exist_ok=True)
    lock_path = folder.parent / f".{folder.name}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _is_current(folder):
            return env_python(folder)
        shutil.rmtree(folder, ignore_errors=True)
        try:
            _run([python, "-m", "venv", str(folder)], "python -m venv")
            jax_req = f"jax[{extra}]=={jax_version}" if extra else f"jax=={jax_version}"
            # --no-compile: pip would byte-compile every installed module (two thirds of the
            # install's time here); Python compiles those a task imports, on first import.
            _run(
                [str(env_python(folder)), "-m", "pip", "install", "--quiet", "--no-compile",
                 "--disable-pip-version-check", *_index_args(extra_index_url), "-e", str(REPO_ROOT),
                 jax_req, f"jaxlib=={jax_version}", *requirements],
                f"pip install {jax_req}",
            )  # fmt: skip
            imported = imported_jax(str(env_python(folder)))
            if imported != jax_version:
                raise PyEnvError(f"{folder}: imports jax {imported}, not {jax_version}")
            marker = {"jax": jax_version, "extra": extra, "base_python": python,
                      "extra_index_url": extra_index_url, "requirements": list(requirements),
                      "dependencies": dependencies_digest()}  # fmt: skip
        except BaseException as exc:  # a half-built folder is never left behind
            shutil.rmtree(folder, ignore_errors=True)
            if isinstance(exc, PyEnvError) and NO_SPACE in str(exc):
                raise PyEnvError(_no_space(folder.parent)) from None
            raise
        (folder / MARKER).write_text(json.dumps(marker, indent=2))
    return env_python(folder)


@dataclass(frozen=True)
class VersionEnvs:
    """Where and how the commands that take JAX versions build their environments.

    Attributes:
        root: Folder of the environments (``sweeps/envs`` by default).
        extra: ``jax``'s extra (:data:`JAX_EXTRAS`), or ``None``.
        extra_index_url: Another package index (e.g. JAX's nightly wheels), or ``None``.
        requirements: More ``pip install`` arguments (:func:`ensure_env`).
        workloads: The user workloads every environment must find (:meth:`check`).

    Raises:
        ValueError: An unknown extra (:func:`check_extra`) or an index that is neither a URL
            nor a folder (:func:`check_index_url`).
    """

    root: Path
    extra: str | None = None
    extra_index_url: str | None = None
    requirements: tuple[str, ...] = ()
    workloads: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_extra(self.extra)
        check_index_url(self.extra_index_url)

    def folder(self, version: str, base: str) -> tuple[Path, bool]:
        """Where ``version``'s environment is, and whether it is built already (and current).

        Raises:
            PyEnvError: ``base`` cannot be run (:func:`python_tag`).
        """
        folder = env_dir(self.root, version, self.extra, python_tag(base), self.requirements)
        return folder, _is_current(folder)

    def python(self, version: str, base: str) -> Path:
        """The interpreter of ``version``'s environment, built once and checked.

        Raises:
            PyEnvError: It does not build (:func:`ensure_env`), or it cannot find one of
                :attr:`workloads` (:meth:`check`).
        """
        python = ensure_env(self.root, version, base, self.extra, self.extra_index_url,
                            self.requirements)  # fmt: skip
        self.check(str(python), f"the JAX {version} environment ({python.parent.parent})")
        return python

    def check(self, python: str, where: str) -> None:
        """Fail unless ``python`` finds every one of :attr:`workloads`, as its workers will.

        Args:
            python: The interpreter.
            where: How the message names it (``the JAX 0.11.2 environment (FOLDER)``).

        Raises:
            WorkloadNotFound: One line: the workload, the module, ``where``, and the options
                that install more into an environment.
        """
        from jaxbench.workloads.source import unimportable

        try:
            why = unimportable(python, list(self.workloads))
        except (OSError, subprocess.TimeoutExpired) as exc:
            why = f"{python} cannot be run: {exc}"
        if why is not None and "No module named" in why:  # something to install there
            raise WorkloadNotFound(f"{why}, in {where}; install what it needs there with --with "
                             "PKG or --requirements FILE")  # fmt: skip
        if why is not None:  # it imports, and fails there: this JAX, not a missing package
            raise WorkloadNotFound(
                f"{why}, in {where}: it fails to load under that "
                "environment's JAX or packages, not for want of one"
            )

    def offered(self, base: str) -> list[list[str]]:
        """Versions on the index of each of :func:`packages` (jax, jaxlib, the plugin)."""
        return [index_versions(base, p, self.extra_index_url) for p in packages(self.extra)]


def imported_jax(python: str) -> str:
    """The JAX version ``python`` imports, with jaxbench (as its workers need).

    Raises:
        PyEnvError: It cannot import JAX or jaxbench, or cannot be run (the message has its
            last lines).
    """
    return _run([python, "-c", "import jax, jaxbench; print(jax.__version__)"],
                "import jax").strip()  # fmt: skip


def _no_space(root: Path) -> str:
    """One line for a build the disk could not hold: where, and what is free now."""
    free_gib = shutil.disk_usage(root).free / 2**30
    return (f"environments under {root}: no space left on device ({free_gib:.1f} GiB free "
            "after the half-built environment was removed; each holds jax, jaxlib and "
            "jaxbench's dependencies); free space there, or build them on another filesystem "
            "(--env-root, or a cluster profile's env_root)")  # fmt: skip


def _run(cmd: list[str], what: str) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PyEnvError(f"{what}: {exc}") from None
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        # pip's warnings (a configured index folder it ignores, say) would crowd its error out
        errors = [line for line in lines if not line.startswith("WARNING: ")] or lines
        tail = "\n".join(errors[-8:])
        said = f":\n{tail}" if tail else ", printing nothing"
        raise PyEnvError(f"{what} failed (exit {proc.returncode}){said}")
    return proc.stdout
