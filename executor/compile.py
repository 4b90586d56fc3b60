"""Compiling candidates with nvcc or NVRTC: toolchain discovery, resource reports, a content-hash cache.

A compile error is an ordinary outcome (a :class:`CompileResult` with ``ok=False`` and the log), never
an exception; only a missing toolchain raises :class:`ToolchainError`.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from executor.cache import DEFAULT_CACHE_DIR, content_key
from executor.cubin import CubinFormatError, kernel_names
from executor.errors import EvaluationCancelled, ToolchainError
from executor.fleet.pinning import compile_cores
from executor.gpuquery import gpus_or_none
from executor.jail import (
    STOPPED,
    Jail,
    StopSignal,
    compiler_include_dirs,
    cut_log,
    describe,
    host_toolchain_paths,
    protection,
)
from executor.nvrtc import Nvrtc, candidate_libraries, find_nvrtc
from executor.taskformat import FunctionTask, KernelTask
from executor.verdict import CompileResult, KernelResources

if TYPE_CHECKING:
    from executor.settings import ExecutorSettings

logger = logging.getLogger(__name__)

DEFAULT_ARCH = "sm_90"
MAX_LOG_CHARS = 20_000
# The first words of a build's log when its dependency list (what the preprocessor really read, after
# line splicing and macro expansion) names a file outside the toolchain and the build's directory.
INCLUDE_REFUSED = "static check after preprocessing: refused"
OWN_FILES = ("candidate.cu", "candidate.d", "candidate.so", "candidate.cubin")
# How often a request waiting for the same build under way elsewhere looks again (and at its ``stop``).
BUILD_WAIT_POLL_S = 0.05


@dataclass(frozen=True)
class Toolchain:
    """A usable nvcc and what is needed to call it correctly."""

    nvcc: Path
    version: str  # the full `nvcc --version` text, part of every cache key
    release: str  # "13.5"
    extra_flags: tuple[str, ...] = ()

    @property
    def root(self) -> Path:
        """The toolkit directory (the parent of bin/)."""
        return self.nvcc.parent.parent


def _pypi_nvcc() -> Path | None:
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        for sub in ("cu13", "cu12", "cuda_nvcc"):
            candidate = Path(base) / sub / "bin" / "nvcc"
            if candidate.is_file():
                return candidate
    return None


def _header_cudart_version(root: Path) -> str | None:
    header = root / "include" / "cuda_runtime_api.h"
    if not header.is_file():
        return None
    m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", header.read_text(errors="replace"))
    if m is None:
        return None
    value = int(m.group(1))
    return f"{value // 1000}.{(value % 1000) // 10}"


_toolchains: dict[str, Toolchain] = {}
_toolchain_lock = threading.Lock()


def find_toolchain(nvcc_path: str | None = None) -> Toolchain:
    """Locate nvcc: an explicit path, then PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, the PyPI wheel."""
    with _toolchain_lock:
        cache_key = nvcc_path or ""
        if cache_key in _toolchains:
            return _toolchains[cache_key]
        candidates: list[Path] = []
        if nvcc_path:
            candidates.append(Path(nvcc_path))
        else:
            on_path = shutil.which("nvcc")
            if on_path:
                candidates.append(Path(on_path))
            for env in ("CUDA_HOME", "CUDA_PATH"):
                if os.environ.get(env):
                    candidates.append(Path(os.environ[env]) / "bin" / "nvcc")
            candidates.append(Path("/usr/local/cuda/bin/nvcc"))
            wheel = _pypi_nvcc()
            if wheel is not None:
                candidates.append(wheel)
        for nvcc in candidates:
            if not nvcc.is_file():
                continue
            try:
                out = subprocess.run(
                    [str(nvcc), "--version"], capture_output=True, text=True, timeout=60, check=False
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                logger.warning("nvcc at %s is unusable: %s", nvcc, e)
                continue
            m = re.search(r"release (\d+\.\d+)", out.stdout)
            if out.returncode != 0 or m is None:
                logger.warning("nvcc at %s does not report a version", nvcc)
                continue
            extra: list[str] = []
            header = _header_cudart_version(nvcc.parent.parent)
            if header is not None and header != m.group(1):
                # The PyPI wheels version nvcc and the runtime headers independently (e.g. nvcc 13.5 with
                # cudart 13.2 headers); CCCL refuses that pairing unless told the mix is intended.
                extra.append("-DCCCL_DISABLE_CTK_COMPATIBILITY_CHECK")
            chain = Toolchain(
                nvcc=nvcc, version=out.stdout.strip(), release=m.group(1), extra_flags=tuple(extra)
            )
            logger.info("using nvcc %s at %s", chain.release, nvcc)
            _toolchains[cache_key] = chain
            return chain
        raise ToolchainError(f"no usable nvcc found (tried {[str(c) for c in candidates]})")


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")


def parse_ptxas_report(log: str) -> list[KernelResources]:
    """Per-kernel registers, shared/constant memory, stack and spills from ``-Xptxas -v`` output."""
    entries: dict[str, dict[str, int | None]] = {}
    order: list[str] = []
    current: str | None = None
    props_for: str | None = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = m.group(1)
            if current not in entries:
                entries[current] = {}
                order.append(current)
            continue
        if m := _PROPS.search(line):
            props_for = m.group(1)
            continue
        if (m := _FRAME.search(line)) and props_for in entries:
            entries[props_for].update(
                stack_bytes=int(m.group(1)),
                spill_store_bytes=int(m.group(2)),
                spill_load_bytes=int(m.group(3)),
            )
            continue
        if (m := _USED.search(line)) and current is not None:
            fields = entries[current]
            fields["registers"] = int(m.group(1))
            if b := _BARRIERS.search(line):
                fields["barriers"] = int(b.group(1))
            if s := _SMEM.search(line):
                fields["shared_bytes"] = int(s.group(1))
            if c := _CMEM.search(line):
                fields["constant_bytes"] = int(c.group(1))
    return [
        KernelResources(name=name, **{k: v for k, v in entries[name].items() if v is not None})
        for name in order
    ]


def kernels_of(log: str, cubin: bytes | Path | None) -> list[KernelResources]:
    """The kernels of a build: from the resource report, else (no report) the names in the CUBIN
    (its bytes, or its file, read only then).

    Kernels known only from the CUBIN carry no register or memory figures.
    """
    kernels = parse_ptxas_report(log)
    if kernels or cubin is None:
        return kernels
    try:
        data = cubin.read_bytes() if isinstance(cubin, Path) else cubin
        return [KernelResources(name=name) for name in kernel_names(data)]
    except CubinFormatError:
        logger.warning("the compiler's output is not a readable CUBIN; no kernel names")
        return []


def kernel_symbol(kernels: list[KernelResources], entry: str) -> str | None:
    """The (possibly C++-mangled) symbol of the kernel named ``entry`` in a ptxas report."""
    mangled_prefix = f"_Z{len(entry)}{entry}"
    for k in kernels:
        if k.name == entry or k.name.startswith(mangled_prefix):
            return k.name
    return None


CompilerChoice = Literal["auto", "nvrtc", "nvcc"]


class RemoteBuilds(Protocol):
    """Somewhere else that builds (the fleet's compile workers on CPU nodes, `executor.fleet.compilers`)."""

    def build(
        self,
        compiler: Compiler,
        key: str,
        source: str,
        kind: Literal["shared_library", "cubin"],
        stop: StopSignal | None = None,
    ) -> CompileResult | None:
        """Build ``source`` and store it in ``compiler``'s cache under ``key``; None to build locally.
        Once ``stop`` is set, the build is stopped where it runs and :class:`EvaluationCancelled`
        raised, as a local build would."""
        ...


# NVRTC's option (12.4 and later) that leaves out texture, device-runtime and driver-type declarations.
MINIMAL = "--minimal"


class Compiler:
    """Compiles candidates (and tasks' naive.cu) into cached products; safe to share between threads.

    Kernel tasks (a CUBIN) go through NVRTC when ``choice`` is ``auto`` or ``nvrtc`` and the library is
    found; ``auto`` falls back to nvcc when NVRTC is missing or rejects the source (a header NVRTC
    cannot provide, host code), so what compiles is exactly what nvcc accepts. Function tasks (a shared
    library with host code) always use nvcc.
    """

    def __init__(
        self,
        cache_dir: Path | None = None,
        arch: str = DEFAULT_ARCH,
        nvcc_path: str | None = None,
        timeout_s: float = 180.0,
        extra_flags: tuple[str, ...] = (),
        choice: CompilerChoice = "auto",
        nvrtc_path: str | None = None,
        remote: RemoteBuilds | None = None,
        nice: int = 0,
        timing_cores: int | None = None,
    ) -> None:
        self.remote = remote
        self.nice = nice
        # Builds stay off the cores kept for host-timed trials (executor.fleet.pinning.compile_cores).
        self.timing_cores = timing_cores
        self.cache_dir = (cache_dir or DEFAULT_CACHE_DIR) / "candidates"
        self.arch = arch
        self.nvcc_path = nvcc_path
        self.timeout_s = timeout_s
        self.extra_flags = extra_flags
        self.choice = choice
        self.nvrtc_path = nvrtc_path

    @classmethod
    def from_settings(
        cls, settings: ExecutorSettings, arch: str, remote: RemoteBuilds | None = None
    ) -> Compiler:
        """The compiler an executor with ``settings`` uses for the GPU arch ``arch``."""
        return cls(
            cache_dir=settings.cache_dir,
            arch=arch,
            nvcc_path=settings.nvcc_path,
            timeout_s=settings.compile_timeout_s,
            choice=settings.compiler,
            nvrtc_path=settings.nvrtc_path,
            remote=remote,
            nice=settings.compile_nice,
            timing_cores=settings.timing_cores,
        )

    @property
    def toolchain(self) -> Toolchain:
        """The nvcc in use (located on first use)."""
        return find_toolchain(self.nvcc_path)

    @property
    def nvrtc(self) -> Nvrtc | None:
        """The NVRTC library in use for kernel tasks, or None (not found, or ``choice="nvcc"``)."""
        if self.choice == "nvcc":
            return None
        found = find_nvrtc(self.nvrtc_path)
        if found is None and self.choice == "nvrtc":
            raise ToolchainError(
                f"compiler=nvrtc but no libnvrtc was found (tried {[str(p) for p in candidate_libraries(self.nvrtc_path)]}"
                " and the nvidia-cuda-nvrtc wheel)"
            )
        return found

    def flags(self, kind: str) -> list[str]:
        """The nvcc flags for a product kind (``shared_library`` or ``cubin``)."""
        common = [
            "-O3",
            f"-arch={self.arch}",
            "-Xptxas",
            "-v",
            "-std=c++17",
            *self.toolchain.extra_flags,
            *self.extra_flags,
        ]
        if kind == "shared_library":
            return [*common, "-shared", "-Xcompiler", "-fPIC"]
        return [*common, "-cubin"]

    def _has_nvcc(self) -> bool:
        try:
            find_toolchain(self.nvcc_path)
        except ToolchainError:
            return False
        return True

    def nvrtc_options(self, nvrtc: Nvrtc) -> list[str]:
        """NVRTC options equivalent to the nvcc cubin build.

        NVVM and ptxas optimise at their highest level by default, which is what nvcc gives device
        code (nvcc's ``-O3`` sets the host compiler's level). ``-default-device`` compiles functions
        without an execution-space annotation as device functions, as nvcc's device pass sees them.
        """
        options = [
            f"--gpu-architecture={self.arch}",
            "-std=c++17",
            "--ptxas-options=-v",
            "-default-device",
            "-DCCCL_DISABLE_CTK_COMPATIBILITY_CHECK",
            # NVRTC runs in this process, outside any jail: a quoted include must not be looked up
            # beside the (nameless) source, i.e. in the executor's working directory.
            "-no-source-include",
            *self.extra_flags,
        ]
        if nvrtc.include_dir is not None:
            options.append(f"-I{nvrtc.include_dir}")
            if (nvrtc.include_dir / "cccl").is_dir():
                options.append(f"-I{nvrtc.include_dir / 'cccl'}")
        return options

    def compile(
        self, task: FunctionTask | KernelTask, source: str, stop: StopSignal | None = None
    ) -> CompileResult:
        """Compile a candidate for a task: a .so for function tasks, a .cubin for kernel tasks. Once
        ``stop`` is set, an nvcc build under way is killed and :class:`EvaluationCancelled` raised
        (nothing is kept of it)."""
        kind: Literal["shared_library", "cubin"] = (
            "cubin" if isinstance(task, KernelTask) else "shared_library"
        )
        return self.compile_source(source, kind, stop)

    def _key(self, kind: str, source: str, nvrtc: Nvrtc | None) -> str:
        if nvrtc is None:
            return content_key("candidate", self.toolchain.version, kind, " ".join(self.flags(kind)), source)
        try:  # the nvcc that a fallback would use is part of what determines the product
            fallback = self.toolchain.version + " ".join(self.flags(kind)) if self.choice == "auto" else ""
        except ToolchainError:
            fallback = "no nvcc"
        options = " ".join(self.nvrtc_options(nvrtc))
        return content_key("candidate", "nvrtc", nvrtc.release, fallback, kind, options, source)

    def build_key(self, source: str, kind: Literal["shared_library", "cubin"]) -> str:
        """The cache key of a build: the source, the product kind, and the compiler with its version and
        options (two compilers that agree on the key build the same product)."""
        return self._key(kind, source, self.nvrtc if kind == "cubin" else None)

    def _paths(self, key: str, kind: str) -> tuple[Path, Path]:
        suffix = ".so" if kind == "shared_library" else ".cubin"
        return self.cache_dir / f"{key}{suffix}", self.cache_dir / f"{key}.json"

    def cached(self, key: str, kind: Literal["shared_library", "cubin"]) -> CompileResult | None:
        """The cached result of the build ``key`` (an error too), or None when it was not built here."""
        product, record = self._paths(key, kind)
        if not record.is_file():
            return None
        try:
            cached = CompileResult.model_validate_json(record.read_text())
        except ValueError:
            logger.warning("ignoring unreadable compile record %s", record)
            return None
        return cached if not cached.ok or product.is_file() else None

    def store(self, key: str, result: CompileResult, product: bytes | None) -> CompileResult:
        """Put a build done elsewhere (another node's compiler with the same key) into this cache, as
        if it had been built here; the result's ``product`` then names the local file."""
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        path, record = self._paths(key, result.kind)
        with tempfile.TemporaryDirectory(dir=self.cache_dir, prefix=f".store-{key[:8]}-") as tmp:
            if result.ok:
                if product is None:
                    raise ValueError("a successful build comes with its product")
                built = Path(tmp) / "product"
                built.write_bytes(product)
                os.replace(built, path)
            result = result.model_copy(update={"product": str(path) if result.ok else None})
            if result.rememberable:
                written = Path(tmp) / "record.json"
                written.write_text(result.model_dump_json())
                os.replace(written, record)
        return result

    def compile_source(
        self, source: str, kind: Literal["shared_library", "cubin"], stop: StopSignal | None = None
    ) -> CompileResult:
        """Compile one translation unit, answering from the cache when the same build was done before.
        ``stop``: as in :meth:`compile` (an NVRTC build, in this process, runs to its end)."""
        start = time.perf_counter()
        nvrtc = self.nvrtc if kind == "cubin" else None
        key = self._key(kind, source, nvrtc)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        cached = self.cached(key, kind)
        if cached is None:
            elsewhere = self.build_elsewhere(key, source, kind, stop)
            if elsewhere is not None:
                return elsewhere.model_copy(update={"seconds": time.perf_counter() - start})
            # One build of a key at a time over this cache: a second request for a build under way (in
            # another thread, or another process over the same cache) waits for it and is answered from
            # the cache, instead of running the same build beside it. (Not held for a build elsewhere:
            # a compile worker over the same cache takes it for its own build.)
            with self._one_build(key, stop):
                cached = self.cached(key, kind)
                if cached is None:
                    return self._build_here(key, source, kind, nvrtc, stop, start)
        return cached.model_copy(update={"cache_hit": True, "seconds": time.perf_counter() - start})

    @contextlib.contextmanager
    def _one_build(self, key: str, stop: StopSignal | None) -> Iterator[None]:
        """Hold the build of ``key`` alone across this host's threads and processes (an exclusive
        ``flock`` on a file of the cache, taken by each caller through an open file of its own). A
        waiter gives up with :class:`EvaluationCancelled` once ``stop`` is set; the kernel lets the lock
        go when its holder dies. The lock files lie beside the builds, not among them: a candidate's
        worker sees the builds (read-only) and could otherwise hold one (``flock`` needs no write)."""
        locks = self.cache_dir.parent / "compile-locks"
        locks.mkdir(parents=True, exist_ok=True)
        with (locks / key).open("ab") as handle:
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if stop is not None and stop.is_set():
                        raise EvaluationCancelled(STOPPED) from None
                    time.sleep(BUILD_WAIT_POLL_S)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _build_here(
        self,
        key: str,
        source: str,
        kind: Literal["shared_library", "cubin"],
        nvrtc: Nvrtc | None,
        stop: StopSignal | None,
        start: float,
    ) -> CompileResult:
        product, record = self._paths(key, kind)
        with tempfile.TemporaryDirectory(dir=self.cache_dir, prefix=f".build-{key[:8]}-") as tmp:
            work = Path(tmp)
            with compile_cores(self.timing_cores):
                result, built = self._build(work, source, kind, nvrtc, stop)
            result = result.model_copy(
                update={
                    "product": str(product) if result.ok else None,
                    "seconds": time.perf_counter() - start,
                }
            )
            if result.ok and built is not None:
                os.replace(built, product)
            if result.rememberable:
                tmp_record = work / "record.json"
                tmp_record.write_text(result.model_dump_json())
                os.replace(tmp_record, record)
        logger.info(
            "compiled %s with %s in %.2fs (ok=%s)", key[:12], result.compiler, result.seconds, result.ok
        )
        return result

    def build_elsewhere(
        self,
        key: str,
        source: str,
        kind: Literal["shared_library", "cubin"],
        stop: StopSignal | None = None,
    ) -> CompileResult | None:
        """A build done by ``remote`` and stored here (see :meth:`store`), or None to build here;
        ``stop``: as in :meth:`compile`."""
        return None if self.remote is None else self.remote.build(self, key, source, kind, stop)

    def _build(
        self,
        work: Path,
        source: str,
        kind: Literal["shared_library", "cubin"],
        nvrtc: Nvrtc | None,
        stop: StopSignal | None = None,
    ) -> tuple[CompileResult, Path | None]:
        if nvrtc is None:
            return self._nvcc(work, source, kind, stop)
        options = self.nvrtc_options(nvrtc)
        output = None
        if nvrtc.has_minimal:
            # Without the declarations that device-only kernels rarely use (texture objects, the device
            # runtime, driver types) the front end is about 10 % faster; a source that needs them is
            # compiled again with everything.
            output = nvrtc.compile(source, [*options, MINIMAL])
            if output.ok:
                options = [*options, MINIMAL]
        if output is None or not output.ok:
            output = nvrtc.compile(source, options)
        log = cut_log(output.log, OWN_FILES, None, MAX_LOG_CHARS)
        if output.ok:
            cubin = work / "candidate.cubin"
            cubin.write_bytes(output.cubin)
            return CompileResult(
                ok=True,
                kind=kind,
                log=log,
                command=["nvrtc", *options],
                kernels=kernels_of(log, output.cubin),
                arch=self.arch,
                compiler="nvrtc",
            ), cubin
        if self.choice == "auto":
            if not self._has_nvcc():
                logger.info("NVRTC rejected a candidate and there is no nvcc to fall back to")
            else:
                first = next((ln for ln in log.splitlines() if "error" in ln), log.strip()[:200])
                result, built = self._nvcc(work, source, kind, stop)
                return result.model_copy(update={"fallback": f"NVRTC: {first.strip()}"}), built
        return CompileResult(
            ok=False, kind=kind, log=log, command=["nvrtc", *options], arch=self.arch, compiler="nvrtc"
        ), None

    def _nvcc(
        self,
        work: Path,
        source: str,
        kind: Literal["shared_library", "cubin"],
        stop: StopSignal | None = None,
    ) -> tuple[CompileResult, Path | None]:
        chain = self.toolchain
        flags = self.flags(kind)
        (work / "candidate.cu").write_text(source, encoding="utf-8")
        out_name = "candidate.so" if kind == "shared_library" else "candidate.cubin"
        # -MD writes what the preprocessor read (after splicing and macro expansion) as part of the
        # build itself, at no extra cost; it is checked before the product is accepted.
        cmd = [str(chain.nvcc), *flags, "-MD", "-MF", "candidate.d", "candidate.cu", "-o", out_name]
        returncode, log = toolchain_jail(chain).run(cmd, work, self.timeout_s, self.nice, stop=stop)
        log = cut_log(log, OWN_FILES, work, MAX_LOG_CHARS)
        log = f"{log.rstrip()}\n[{describe(protection())}]".lstrip()
        ok = returncode == 0 and (work / out_name).is_file()
        killed_by = -returncode if returncode is not None and returncode < 0 else None
        if killed_by is not None:
            log = (log + f"\nnvcc was killed by signal {killed_by}").strip()[-MAX_LOG_CHARS:]
        if returncode == 125 and log.startswith("jail:"):
            raise ToolchainError(f"the compile jail failed: {log.strip()[:300]}")
        if ok:
            outside = includes_outside(work / "candidate.d", work, include_roots(chain))
            if outside is not None:
                ok = False
                log = (
                    f"{INCLUDE_REFUSED} {outside}: a candidate may include only the toolkit's and the host "
                    "compiler's headers"
                )
        kernels = kernels_of(log, work / out_name if kind == "cubin" else None) if ok else []
        return CompileResult(
            ok=ok,
            kind=kind,
            log=log,
            command=["nvcc", *flags, "candidate.cu", "-o", out_name],
            timed_out=returncode is None,
            interrupted=killed_by is not None,
            kernels=kernels,
            arch=self.arch,
            compiler="nvcc",
        ), (work / out_name if ok else None)


def toolchain_jail(chain: Toolchain) -> Jail:
    """The jail an nvcc build runs in: the toolkit, the host compiler's paths, nothing else."""
    env = {"PATH": f"{chain.nvcc.parent}:/usr/bin:/bin"}
    return Jail(read_only=[chain.root, *host_toolchain_paths()], env=env)


def include_roots(chain: Toolchain) -> list[str]:
    """Where an nvcc build may take headers from: the toolkit and the host compiler's search list."""
    gxx = shutil.which("g++") or "g++"
    roots = [str(chain.root), os.path.realpath(chain.root), *compiler_include_dirs(gxx)]
    return [os.path.normpath(r) for r in roots]


def read_depfile(path: Path) -> list[str]:
    """The prerequisites of a make-style dependency file (``-MD``), with escaped spaces undone."""
    text = path.read_text(errors="replace").replace("\\\n", " ")
    tokens = re.findall(r"(?:\\.|[^\s\\])+", text)
    names = [re.sub(r"\\(.)", r"\1", t) for t in tokens]
    try:
        start = next(i for i, t in enumerate(names) if t.endswith(":")) + 1
    except StopIteration:
        return []
    return [n for n in names[start:] if not n.endswith(":")]


def includes_outside(depfile: Path, work: Path, roots: list[str]) -> str | None:
    """The first file a build read from outside ``work`` and ``roots`` (or a note that the dependency
    list is missing), or None when every file it read is allowed."""
    if not depfile.is_file():
        return "(the compiler wrote no dependency list)"
    allowed = [os.path.normpath(work), *roots]
    for dep in read_depfile(depfile):
        path = os.path.normpath(dep if os.path.isabs(dep) else os.path.join(work, dep))
        if not any(path == root or path.startswith(root.rstrip("/") + "/") for root in allowed):
            return path
    return None


def device_arch() -> str | None:
    """``sm_XY`` of GPU 0 via nvidia-smi (:mod:`executor.gpuquery`), or None where there is no GPU (or
    none that nvidia-smi describes: logged)."""
    # with the index, so that a line that is no GPU's (a driver's warning) is told from a GPU's row
    rows = gpus_or_none(["index", "compute_cap"])
    first = rows[0][1] if rows else ""
    if not re.fullmatch(r"\d+\.\d+", first):
        if rows:
            logger.warning("nvidia-smi names compute capability %r for GPU 0: taken as no GPU", first[:50])
        return None
    return "sm_" + first.replace(".", "")
