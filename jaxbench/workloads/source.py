"""Where a user workload's code comes from, and how another environment gets the same code.

A user workload (``-w package.module:factory`` or an entry point's name) is code outside
jaxbench. Two questions follow it everywhere:

- **which code was measured**: the module's file, the distribution that provides it (name and
  version), and the commit and dirty state of the git repository that holds the file
  (:class:`jaxbench.store.record.WorkloadSource`, kept in every record's
  ``env.workload_source``);
- **how a JAX-version environment gets it**: a distribution installed from a local folder
  (PEP 610's ``direct_url.json`` names it) is installed from that folder, in editable mode, so
  every version runs the user's working tree; one installed from an index is pinned to the
  version installed here; a module on ``PYTHONPATH`` or in the current folder has no
  distribution, and another environment reaches it only the way this one does
  (:func:`requirements`).

Distributions are found with :mod:`importlib.metadata` (``packages_distributions`` for a
module's top-level package, an entry point's ``dist`` for an entry point).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import subprocess
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from jaxbench.env import git_state
from jaxbench.store.record import WorkloadSource
from jaxbench.workloads import get_workload
from jaxbench.workloads.user import GROUP, UserWorkload


def requirements(source: WorkloadSource) -> list[str]:
    """The ``pip install`` arguments that give another environment ``source``'s code.

    Returns:
        ``["-e", project]`` for a distribution installed from a local folder;
        ``["name==version"]`` for one from an index; ``[]`` without a distribution, and for
        jaxbench's own modules (every environment installs this checkout).
    """
    if source.distribution == "jaxbench":  # every environment has this checkout already
        return []
    if source.project is not None:
        return ["-e", source.project]
    if source.distribution is not None and source.version is not None:
        return [f"{source.distribution}=={source.version}"]
    return []


def _module_and_dist(name: str) -> tuple[str, str | None]:
    """The factory's module and, for an entry point, the distribution that declares it."""
    for point in metadata.entry_points(group=GROUP):
        if point.name == name:
            dist = point.dist.metadata["Name"] if point.dist is not None else None
            return point.module, dist
    return name.partition(":")[0], None


def _distribution_of(module: str) -> str | None:
    """The installed distribution providing ``module``'s top-level package, if exactly known."""
    top = module.split(".")[0]
    names = metadata.packages_distributions().get(top, [])
    return names[0] if names else None


def _installed_from(dist: metadata.Distribution) -> tuple[str | None, bool]:
    """The local folder ``dist`` was installed from and whether editably (PEP 610)."""
    try:
        text = dist.read_text("direct_url.json")
        direct = json.loads(text) if text else {}
    except (OSError, ValueError):
        return None, False
    url = direct.get("url", "") if isinstance(direct, dict) else ""
    parsed = urlparse(url)
    if parsed.scheme != "file" or "dir_info" not in direct:
        return None, False
    editable = bool((direct.get("dir_info") or {}).get("editable"))
    return unquote(parsed.path), editable


@functools.cache
def source_of(workload: str) -> WorkloadSource:
    """Find the code behind the user workload ``workload`` in this interpreter (once).

    The module is not imported (its file is found with ``importlib.util.find_spec``, which
    imports only its parent packages). Asked once per process: the code a process imported
    does not change under it.

    Args:
        workload: ``package.module:factory`` or the name of an entry point of
            :data:`jaxbench.workloads.user.GROUP`.

    Returns:
        The :class:`jaxbench.store.record.WorkloadSource`; fields that cannot be found are
        ``None``.
    """
    module, dist_name = _module_and_dist(workload)
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    origin = spec.origin if spec is not None and spec.has_location else None
    file = str(Path(origin).resolve()) if origin else None
    dist_name = dist_name or _distribution_of(module)
    version, project, editable = None, None, False
    if dist_name is not None:
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            dist_name = None
        else:
            version = dist.version
            project, editable = _installed_from(dist)
    git = git_state(Path(file).parent) if file else {"commit": None, "dirty": None}
    return WorkloadSource(workload=workload, module=module, file=file, distribution=dist_name,
                          version=version, project=project, editable=editable,
                          commit=git["commit"], dirty=git["dirty"],
                          digest=code_digest(module, file))  # fmt: skip


#: The most files :func:`code_digest` reads of one package (a tree beyond it is not hashed).
MAX_DIGEST_FILES = 5000


def code_digest(module: str, file: str | None) -> str | None:
    """SHA-256 (hex) of the Python files of ``module``'s top-level package, in path order.

    Outside a package, of the Python files beside ``file`` (its folder, not below): a module
    run from a folder of scripts imports its neighbours. Each file adds its path (relative to
    the package's folder) and its bytes, so a file renamed or moved changes it too.
    ``__pycache__`` is left out.

    Returns:
        The digest; ``None`` where the files cannot be found or read, or the package holds
        more than :data:`MAX_DIGEST_FILES` of them.
    """
    try:
        spec = importlib.util.find_spec(module.split(".")[0])
    except (ImportError, ValueError):
        spec = None
    places = list(spec.submodule_search_locations or []) if spec is not None else []
    if places:
        root = Path(places[0])
        files = sorted(f for f in root.rglob("*.py") if "__pycache__" not in f.parts)
    elif file is not None:
        root = Path(file).parent
        files = sorted(root.glob("*.py"))
    else:
        return None
    if len(files) > MAX_DIGEST_FILES:
        return None
    digest = hashlib.sha256()
    try:
        for f in files:
            digest.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    except OSError:
        return None
    return digest.hexdigest()


def user_workload_names(names: list[str]) -> list[str]:
    """The names among ``names`` that are user workloads (not built-in families), in order.

    Raises:
        ValueError: A name is no workload (:func:`jaxbench.workloads.get_workload`).
    """
    return [n for n in dict.fromkeys(names) if isinstance(get_workload(n), UserWorkload)]


#: Exit status of :data:`_PROBE` when a workload cannot be found.
_MISSING = 3
_PROBE = f"""
import sys
from jaxbench.workloads.user import find
for name in sys.argv[1:]:
    try:
        find(name)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        sys.exit({_MISSING})
"""


def unimportable(python: str, workloads: list[str]) -> str | None:
    """Why ``python`` cannot find one of the user workloads ``workloads``, or ``None``.

    Runs ``python`` once, finding each workload as a worker will
    (:func:`jaxbench.workloads.user.find`: the entry point, or the module and its factory).

    Returns:
        The first failure's one line (it names the ``--workload`` and the module), or
        ``None`` when all are found (or there are none).

    Raises:
        OSError: ``python`` cannot be started.
    """
    if not workloads:
        return None
    proc = subprocess.run([python, "-c", _PROBE, *workloads], capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    if proc.returncode == 0:
        return None
    lines = proc.stderr.strip().splitlines()
    if proc.returncode == _MISSING and lines:
        return lines[-1]
    return f"{python} exited {proc.returncode}: {lines[-1] if lines else '(no output)'}"


def environment_requirements(
    workloads: list[str], with_: list[str], requirements_file: Path | None
) -> tuple[tuple[str, ...], list[str]]:
    """The ``pip install`` arguments a JAX-version environment gets beyond jaxbench and JAX.

    Args:
        workloads: User workload names (:func:`user_workload_names`); each one's distribution
            (:func:`requirements`).
        with_: ``--with`` requirements; an existing folder or file is made absolute.
        requirements_file: ``--requirements FILE``, or ``None``.

    Returns:
        The arguments, and one line per workload saying what its environments get.

    Raises:
        ValueError: A ``--with`` that is empty or names a path (``.``, ``/``, ``~``) that does
            not exist, or a ``--requirements`` that is not a file (the line names the option).
    """
    args: list[str] = []
    said = []
    for name in workloads:
        source = source_of(name)
        given = requirements(source)
        if given and not any(args[i : i + len(given)] == given for i in range(len(args))):
            args += given
        if given:
            said.append(f"-w {name}: JAX-version venvs install {' '.join(given)} "
                        f"({source.distribution} {source.version})")  # fmt: skip
        elif source.distribution == "jaxbench":
            continue
        else:
            said.append(f"-w {name}: {source.module} belongs to no installed distribution; "
                        "JAX-version venvs find it only on PYTHONPATH or in the current folder "
                        "(or give --with)")  # fmt: skip
    for req in with_:
        if not req.strip():
            raise ValueError(f"--with {req!r}: expected a pip requirement or a local project "
                             "folder, got nothing")  # fmt: skip
        if req.startswith((".", "/", "~")) and not Path(req).expanduser().exists():
            raise ValueError(f"--with {req}: no such folder or file (a local project is "
                             "given by its folder)")  # fmt: skip
        local = Path(req).expanduser()
        args.append(str(local.resolve()) if local.exists() else req)
    if requirements_file is not None:
        if requirements_file.is_dir():
            raise ValueError(f"--requirements {requirements_file}: a folder, expected a pip "
                             "requirements file")  # fmt: skip
        if not requirements_file.is_file():
            raise ValueError(f"--requirements {requirements_file}: no such file")
        args += ["-r", str(requirements_file.resolve())]
    return tuple(args), said
