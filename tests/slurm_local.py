"""A real single-node Slurm cluster, with accounting, that tests start and stop themselves.

Everything lives in one scratch folder: the configuration (``slurm.conf``, ``gres.conf``,
``slurmdbd.conf``, ``my.cnf``), the daemons' state and logs, a MariaDB data folder and two
placeholder GPU devices. MariaDB, munged, slurmdbd, slurmctld and slurmd run in the foreground in
new sessions; their PIDs are written to ``pids.json`` in that folder, so another process can stop
them (``LocalSlurm.stop_workdir``, or ``scripts/slurm-local stop DIR``). Daemons are only ever
signalled by those PIDs.

Needs root and Debian's ``slurm-wlm``, ``munge``, ``slurmdbd`` and ``mariadb-server``
(``scripts/install-slurm-local`` installs them). ``LocalSlurm.unavailable_reason()`` says why a
cluster cannot run here, for ``pytest.skip``.

The cluster ``jaxbench-test`` has one node, ``localhost``, that declares 16 CPUs, 16000 MB and two
GPUs whatever the machine has, and two partitions on it: ``cpu`` (the default) and ``gpu``. A
one-GPU job sees ``CUDA_VISIBLE_DEVICES=0`` or ``1``; a third one waits. The client commands find
the cluster through ``SLURM_CONF`` only (see ``LocalSlurm.env``): it must be set in the process
that submits, because submitit runs ``sbatch``, ``squeue``, ``sacct`` and ``scancel`` by name.
A requeued job may start again after 10 s (``cred_expire=10``; Slurm's default is 120 s).
submitit's ``AutoExecutor`` picks Slurm because ``srun`` is on ``PATH``; use ``timeout_min >= 3``,
since submitit asks Slurm for a signal 90 s before the time limit.

A session fixture in ``conftest.py`` (``cluster_fixture`` skips where no cluster can run, and
sets ``SLURM_CONF`` while the cluster runs)::

    from slurm_local import cluster_fixture

    @pytest.fixture(scope="session")
    def slurm_cluster(tmp_path_factory):
        yield from cluster_fixture(tmp_path_factory)

    def test_result(slurm_cluster, tmp_path):
        executor = submitit.AutoExecutor(folder=tmp_path)
        executor.update_parameters(slurm_partition="cpu", timeout_min=3)
        assert executor.submit(int, "3").result() == 3
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    import pytest

DAEMONS = ("mariadbd", "munged", "slurmdbd", "slurmctld", "slurmd")
CLIENTS = ("srun", "sbatch", "squeue", "sinfo", "sacct", "sacctmgr", "scancel", "scontrol")
TOOLS = ("mariadb-install-db", "mariadb", "munge")
SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")
MUNGE_DIR = Path("/run/munge")
MUNGE_KEY = Path("/etc/munge/munge.key")
SCRATCH = ("db", "dev", "log", "run", "state")
SUN_PATH_MAX = 107
STOP_GRACE_S = {"mariadbd": 20.0, "slurmctld": 15.0}
DEFAULT_GRACE_S = 10.0


MAX_ARRAY_SIZE = 10
"""Low on purpose (Slurm's default is 1001), so a sweep of 16 tasks is split into two arrays."""


class LocalSlurmError(RuntimeError):
    """The local cluster failed to start; the message ends with the daemons' log tails."""


def _which(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for folder in SBIN:
        candidate = Path(folder, name)
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """Return ``(state, start time in clock ticks)`` of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def _alive(pid: int, start: int) -> bool:
    info = _proc_stat(pid)
    return info is not None and info[1] == start and info[0] not in "ZX"


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class LocalSlurm:
    """One single-node Slurm cluster with slurmdbd accounting, in a scratch folder.

    Attributes:
        cluster_name: Slurm's ``ClusterName``.
        cpus: CPUs the node declares (more than the machine has is fine).
        gpus: Placeholder GPUs the node declares.
        memory_mb: The node's ``RealMemory``.
        start_timeout_s: Longest wait for each daemon, and for the first ``srun``.
        workdir: The scratch folder, set by ``start``.
    """

    def __init__(
        self,
        *,
        cluster_name: str = "jaxbench-test",
        cpus: int = 16,
        gpus: int = 2,
        memory_mb: int = 16000,
        start_timeout_s: float = 60.0,
    ) -> None:
        self.cluster_name = cluster_name
        self.cpus = cpus
        self.gpus = gpus
        self.memory_mb = memory_mb
        self.start_timeout_s = start_timeout_s
        self.workdir: Path | None = None
        self._procs: dict[str, subprocess.Popen] = {}
        self._record: dict = {}

    @staticmethod
    def unavailable_reason() -> str | None:
        """Say why no cluster can be started here.

        Returns:
            None when one can, otherwise a sentence for ``pytest.skip``.
        """
        if not hasattr(os, "geteuid") or not Path("/proc/self/stat").exists():
            return "a local Slurm cluster needs Linux"
        if os.geteuid() != 0:
            return "a local Slurm cluster needs root (daemons, munge, MariaDB)"
        missing = [name for name in DAEMONS + CLIENTS + TOOLS if _which(name) is None]
        if missing:
            return (
                f"a local Slurm cluster needs {', '.join(missing)}: run scripts/install-slurm-local"
            )
        return None

    @classmethod
    def available(cls) -> bool:
        """Whether a cluster can be started here (see ``unavailable_reason``)."""
        return cls.unavailable_reason() is None

    @property
    def slurm_conf(self) -> Path:
        """Path of ``slurm.conf``, which ``SLURM_CONF`` names."""
        return self._dir() / "slurm.conf"

    @property
    def log_dir(self) -> Path:
        """Folder of the daemons' logs (``<daemon>.log``, ``<daemon>.out``)."""
        return self._dir() / "log"

    def env(self) -> dict[str, str]:
        """Environment variables that point Slurm's client commands at this cluster.

        Returns:
            ``{"SLURM_CONF": path}``, to set in the submitting process (and its children).
        """
        return {"SLURM_CONF": str(self.slurm_conf)}

    def run(
        self, *args: str, timeout: float = 30.0, check: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm command (``sacct``, ``squeue``, ...) against this cluster.

        Args:
            *args: The command and its arguments.
            timeout: Seconds before the command is killed.
            check: Raise ``CalledProcessError`` on a non-zero exit.

        Returns:
            The finished process, with text output captured.
        """
        return subprocess.run(
            args,
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
            stdin=subprocess.DEVNULL,
        )

    def start(self, workdir: Path | str) -> Self:
        """Start the cluster in ``workdir`` and wait until a job step runs.

        A cluster still recorded in ``workdir`` is stopped first, and the folder's scratch
        subfolders (db, dev, log, run, state) are wiped; nothing else there is touched.

        Args:
            workdir: Scratch folder; created if missing. Keep its path short (unix sockets live
                under it).

        Returns:
            This cluster, so that ``with LocalSlurm().start(dir) as cluster:`` works.

        Raises:
            LocalSlurmError: When something is missing or a daemon does not come up; the message
                has the log tails, and whatever was started is stopped again.
        """
        reason = self.unavailable_reason()
        if reason:
            raise LocalSlurmError(reason)
        if self._procs:
            raise LocalSlurmError(f"this cluster is already running in {self.workdir}")
        workdir = Path(workdir).resolve()
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.stop_workdir(workdir)
        longest = workdir / "state" / "spool" / "localhost_4294967294.4294967294"
        if len(str(longest)) > SUN_PATH_MAX:
            raise LocalSlurmError(f"workdir path too long for unix sockets: {workdir}")
        if any(char.isspace() or char in "#=" for char in str(workdir)):
            raise LocalSlurmError(f"workdir path unfit for slurm.conf: {workdir!r}")
        for name in SCRATCH:
            shutil.rmtree(workdir / name, ignore_errors=True)
        try:
            self._write_config()
            self._start_mariadb()
            self._start_munged()
            self._start_slurmdbd()
            self._spawn("slurmctld", [_which("slurmctld"), "-D", "-f", str(self.slurm_conf)])
            self._spawn(
                "slurmd", [_which("slurmd"), "-D", "-f", str(self.slurm_conf), "-N", "localhost"]
            )
            self._wait(
                "node localhost idle",
                lambda: (
                    set(self.run("sinfo", "-h", "-n", "localhost", "-o", "%T").stdout.split())
                    == {"idle"}
                ),
            )
            self._wait_command(["srun", "-t", "1", "-I", "true"])
        except BaseException as error:
            message = f"local Slurm failed to start in {workdir}: {error}\n{self.log_tails()}"
            self.stop()
            if isinstance(error, Exception):
                raise LocalSlurmError(message) from error
            raise
        return self

    def stop(self) -> None:
        """Cancel remaining jobs, then stop every daemon by its recorded PID. Safe to repeat."""
        if self.workdir is not None:
            self.stop_workdir(self.workdir, self._procs)
        self._procs = {}

    @classmethod
    def stop_workdir(
        cls, workdir: Path | str, children: dict[str, subprocess.Popen] | None = None
    ) -> list[str]:
        """Stop the cluster recorded in ``workdir/pids.json``, from any process.

        Jobs still known to slurmctld are cancelled first. Each daemon gets SIGTERM, in reverse
        start order, and SIGKILL when it has not exited after a grace period. A PID is only
        signalled while its process start time matches the recorded one.

        Args:
            workdir: The folder given to ``start``.
            children: Popen objects of daemons this process started, so they are reaped.

        Returns:
            Names of the daemons that had to be killed with SIGKILL.
        """
        workdir = Path(workdir)
        record_path = workdir / "pids.json"
        try:
            record = json.loads(record_path.read_text())
        except (OSError, ValueError):
            return []
        children = children or {}
        procs = record.get("processes", [])
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = record.get("slurm_conf", "")
        if any(p["name"] == "slurmctld" and _alive(p["pid"], p["start"]) for p in procs):
            cls._cancel_jobs(env)
        killed = []
        for proc in reversed(procs):
            name, pid, start = proc["name"], proc["pid"], proc["start"]
            child = children.get(name)
            if not _alive(pid, start):
                if child is not None:
                    child.poll()
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            if not cls._wait_exit(pid, start, child, STOP_GRACE_S.get(name, DEFAULT_GRACE_S)):
                killed.append(name)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                cls._wait_exit(pid, start, child, 5.0)
        for leftover in record.get("files", []):
            Path(leftover).unlink(missing_ok=True)
        record_path.unlink(missing_ok=True)
        return killed

    def log_tails(self, lines: int = 25) -> str:
        """The last lines of every daemon's logs, for error messages."""
        if self.workdir is None:
            return ""
        parts = []
        for path in sorted(self.log_dir.glob("*")):
            tail = _tail(path, lines)
            if tail.strip():
                parts.append(f"--- {path.name} ---\n{tail}")
        return "\n".join(parts)

    def __enter__(self) -> Self:
        if not self._procs:
            raise LocalSlurmError("call start(workdir) before entering the context")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _dir(self) -> Path:
        if self.workdir is None:
            raise LocalSlurmError("the cluster has not been started")
        return self.workdir

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        return {**env, **self.env()}

    def _write_config(self) -> None:
        work = self._dir()
        for name in SCRATCH:
            (work / name).mkdir()
        (work / "state" / "ctld").mkdir()
        (work / "state" / "spool").mkdir()
        (work / "db" / "data").mkdir()
        tag = hashlib.sha1(str(work).encode()).hexdigest()[:10]
        self._munge_socket = MUNGE_DIR / f"jaxbench-{tag}.socket"
        self._munge_seed = MUNGE_DIR / f"jaxbench-{tag}.seed"
        self._munge_pid = MUNGE_DIR / f"jaxbench-{tag}.pid"
        self._db_password = secrets.token_hex(12)
        self._db_port, ctld_port, slurmd_port, self._dbd_port = _free_ports(4)
        self._record = {
            "slurm_conf": str(self.slurm_conf),
            "processes": [],
            "files": [
                str(self._munge_seed),
                str(self._munge_pid),
                str(self._munge_socket),
                f"{self._munge_socket}.lock",
            ],
        }
        self._save_record()

        gpu_files = []
        for index in range(self.gpus):
            device = work / "dev" / f"gpu{index}"
            os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            gpu_files.append(f"NodeName=localhost Name=gpu File={device}")
        (work / "gres.conf").write_text("AutoDetect=off\n" + "\n".join(gpu_files) + "\n")

        log, run, state = work / "log", work / "run", work / "state"
        gres = f" Gres=gpu:{self.gpus}" if self.gpus else ""
        self.slurm_conf.write_text(
            f"""\
ClusterName={self.cluster_name}
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self._munge_socket},cred_expire=10
StateSaveLocation={state / "ctld"}
SlurmdSpoolDir={state / "spool"}
SlurmctldPidFile={run / "slurmctld.pid"}
SlurmdPidFile={run / "slurmd.pid"}
SlurmctldLogFile={log / "slurmctld.log"}
SlurmdLogFile={log / "slurmd.log"}
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
GresTypes=gpu
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=600
MaxArraySize={MAX_ARRAY_SIZE}
InactiveLimit=0
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort={self._dbd_port}
AccountingStoragePass={self._munge_socket}
JobCompType=jobcomp/none
MailProg=/bin/true
NodeName=localhost NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={self.memory_mb}{gres} \
State=UNKNOWN
PartitionName=cpu Nodes=localhost Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=localhost MaxTime=INFINITE State=UP
"""
        )

        dbd_conf = work / "slurmdbd.conf"
        dbd_conf.touch(mode=0o600)
        dbd_conf.chmod(0o600)
        dbd_conf.write_text(
            f"""\
AuthType=auth/munge
AuthInfo=socket={self._munge_socket}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={self._dbd_port}
SlurmUser=root
LogFile={log / "slurmdbd.log"}
PidFile={run / "slurmdbd.pid"}
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={self._db_port}
StorageUser=slurm
StoragePass={self._db_password}
StorageLoc=slurm_acct_db
"""
        )

        db = work / "db"
        self._db_socket = db / "mysqld.sock"
        self._my_cnf = work / "my.cnf"
        self._my_cnf.write_text(
            f"""\
[client]
socket={self._db_socket}
user=root

[mariadbd]
datadir={db / "data"}
socket={self._db_socket}
port={self._db_port}
bind-address=127.0.0.1
pid-file={run / "mariadbd.pid"}
log-error={log / "mariadbd.log"}
user=root
skip-name-resolve
innodb_buffer_pool_size=1G
innodb_log_file_size=64M
innodb_lock_wait_timeout=900
innodb_flush_log_at_trx_commit=0
innodb_doublewrite=0
"""
        )

    def _start_mariadb(self) -> None:
        install = subprocess.run(
            [
                _which("mariadb-install-db"),
                f"--defaults-file={self._my_cnf}",
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        if install.returncode != 0:
            raise LocalSlurmError(f"mariadb-install-db failed:\n{install.stdout}{install.stderr}")
        self._spawn("mariadbd", [_which("mariadbd"), f"--defaults-file={self._my_cnf}"])
        client = [_which("mariadb"), f"--defaults-file={self._my_cnf}"]
        self._wait_command([*client, "-e", "SELECT 1"])
        grants = "".join(
            f"CREATE USER 'slurm'@'{host}' IDENTIFIED BY '{self._db_password}';"
            f"GRANT ALL ON slurm_acct_db.* TO 'slurm'@'{host}';"
            for host in ("127.0.0.1", "localhost")
        )
        subprocess.run([*client, "-e", grants], check=True, capture_output=True, timeout=30)

    def _start_munged(self) -> None:
        MUNGE_DIR.mkdir(mode=0o755, exist_ok=True)
        shutil.chown(MUNGE_DIR, "munge", "munge")
        MUNGE_DIR.chmod(0o755)
        if not MUNGE_KEY.exists():
            MUNGE_KEY.parent.mkdir(mode=0o700, exist_ok=True)
            shutil.chown(MUNGE_KEY.parent, "munge", "munge")
            mungekey = _which("mungekey")
            if mungekey:
                command = [mungekey, "--create", f"--keyfile={MUNGE_KEY}"]
            else:
                command = [_which("create-munge-key") or "create-munge-key", "-f"]
            subprocess.run(command, check=True, capture_output=True, timeout=30)
            shutil.chown(MUNGE_KEY, "munge", "munge")
            MUNGE_KEY.chmod(0o600)
        self._munge_socket.unlink(missing_ok=True)
        Path(f"{self._munge_socket}.lock").unlink(missing_ok=True)
        self._spawn(
            "munged",
            [
                _which("munged"),
                "--foreground",
                f"--socket={self._munge_socket}",
                f"--pid-file={self._munge_pid}",
                f"--seed-file={self._munge_seed}",
                f"--key-file={MUNGE_KEY}",
            ],
            user="munge",
        )
        self._wait_command([_which("munge"), "-n", f"--socket={self._munge_socket}"])

    def _start_slurmdbd(self) -> None:
        self._spawn("slurmdbd", [_which("slurmdbd"), "-D"])
        self._wait("slurmdbd", lambda: _port_open(self._dbd_port))
        self._wait_command(["sacctmgr", "-i", "add", "cluster", self.cluster_name])

    def _spawn(self, name: str, command: list[str | None], user: str | None = None) -> None:
        log = self.log_dir / f"{name}.out"
        extra: dict = {}
        if user is not None:
            extra = {"user": user, "group": user, "extra_groups": [], "cwd": "/"}
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [str(part) for part in command],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=self._env(),
                **extra,
            )
        self._procs[name] = proc
        info = _proc_stat(proc.pid)
        self._record["processes"].append(
            {"name": name, "pid": proc.pid, "start": info[1] if info else 0}
        )
        self._save_record()

    def _save_record(self) -> None:
        path = self._dir() / "pids.json"
        path.with_suffix(".tmp").write_text(json.dumps(self._record, indent=1))
        path.with_suffix(".tmp").replace(path)

    def _wait(self, what: str, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            for name, proc in self._procs.items():
                if proc.poll() is not None:
                    raise LocalSlurmError(f"{name} exited with {proc.returncode}")
            try:
                if ready():
                    return
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() > deadline:
                raise LocalSlurmError(f"{what} not ready after {self.start_timeout_s:.0f} s")
            time.sleep(0.1)

    def _wait_command(self, command: list[str | None]) -> None:
        """Wait until ``command`` exits with 0; on time-out, say what it printed last."""
        args = [str(part) for part in command]
        last: list[str] = []

        def succeeds() -> bool:
            done = self.run(*args, timeout=15)
            last[:] = [done.stdout, done.stderr]
            return done.returncode == 0

        try:
            self._wait(" ".join(args), succeeds)
        except LocalSlurmError as error:
            output = "".join(last).strip()
            raise LocalSlurmError(
                f"{error}; its last output:\n{output}" if output else str(error)
            ) from None

    @staticmethod
    def _cancel_jobs(env: dict[str, str], timeout_s: float = 20.0) -> None:
        def job_ids() -> list[str]:
            try:
                out = subprocess.run(
                    ["squeue", "-h", "-o", "%A"],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=10,
                )
            except (OSError, subprocess.TimeoutExpired):
                return []
            return out.stdout.split() if out.returncode == 0 else []

        ids = job_ids()
        if not ids:
            return
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(["scancel", *ids], env=env, capture_output=True, timeout=10)
        deadline = time.monotonic() + timeout_s
        while job_ids() and time.monotonic() < deadline:
            time.sleep(0.5)

    @staticmethod
    def _wait_exit(pid: int, start: int, child: subprocess.Popen | None, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            if child is not None:
                if child.poll() is not None:
                    return True
            elif not _alive(pid, start):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)


def iter_daemon_pids(workdir: Path | str) -> Iterator[tuple[str, int]]:
    """Yield ``(name, pid)`` of the daemons recorded in ``workdir`` that are still running."""
    try:
        record = json.loads((Path(workdir) / "pids.json").read_text())
    except (OSError, ValueError):
        return
    for proc in record.get("processes", []):
        if _alive(proc["pid"], proc["start"]):
            yield proc["name"], proc["pid"]


def cluster_fixture(
    tmp_path_factory: pytest.TempPathFactory, require: bool = False
) -> Iterator[LocalSlurm]:
    """The body of a pytest fixture: a cluster in a fresh scratch folder, ``env()`` set meanwhile.

    Use it as ``yield from cluster_fixture(tmp_path_factory)``; the cluster stops and the
    environment is restored when the fixture is torn down.

    Args:
        tmp_path_factory: pytest's fixture; the scratch folder is ``mktemp("slurm")``.
        require: Fail the test where no cluster can run here, in place of skipping it (as
            ``JAXBENCH_REQUIRE_SLURM=1`` asks).

    Yields:
        The running cluster, with :meth:`LocalSlurm.env` set in ``os.environ``.

    Raises:
        pytest.skip.Exception: No cluster can run here (``LocalSlurm.unavailable_reason``).
        pytest.fail.Exception: The same, with ``require``.
        LocalSlurmError: The cluster did not start (:meth:`LocalSlurm.start`).
    """
    import pytest

    reason = LocalSlurm.unavailable_reason()
    if reason:
        if require:
            pytest.fail(f"JAXBENCH_REQUIRE_SLURM=1 but no local Slurm: {reason}")
        pytest.skip(reason)
    with (
        LocalSlurm().start(tmp_path_factory.mktemp("slurm")) as cluster,
        pytest.MonkeyPatch.context() as mp,
    ):
        for name, value in cluster.env().items():
            mp.setenv(name, value)
        yield cluster
