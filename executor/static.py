"""Static checks on a candidate's source, each rule with the reason it exists.

Matching runs on the source with its backslash-newlines spliced (as the compiler's first phase does,
so that ``#inc\\<newline>lude`` or ``fo\\<newline>pen`` is seen whole), comments removed and string
literals emptied, so that a banned name in a comment or a message never triggers a rule, and a rule
cannot be dodged by hiding code in a comment. Inline-assembly strings are kept aside and checked
separately.

Includes are checked here on the directive's text (no absolute or climbing paths, no header named by
a macro); what the preprocessor really read, after macro expansion, is checked by the compile itself
(:mod:`executor.compile`, its dependency list) inside the compile jail (:mod:`executor.jail`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from executor.taskformat import FunctionTask, KernelTask
from executor.verdict import StaticViolation

MAX_SOURCE_CHARS = 400_000


@dataclass
class StrippedSource:
    """A source with comments blanked and string contents removed (line numbers preserved)."""

    code: str
    strings: list[tuple[int, str]] = field(default_factory=list)  # (line, contents) of each literal


def splice_lines(source: str) -> str:
    """Join each line that ends in a backslash with the next (translation phase 2), keeping line
    numbers: a logical line made of k physical ones is followed by k - 1 empty lines. Whitespace
    between the backslash and the newline is accepted, as GCC does."""
    out: list[str] = []
    pending: list[str] = []
    for line in source.split("\n"):
        stripped = line.rstrip(" \t\r")
        if stripped.endswith("\\"):
            pending.append(stripped[:-1])
            continue
        out.append("".join(pending) + line)
        out.extend([""] * len(pending))
        pending = []
    if pending:
        out.append("".join(pending))
        out.extend([""] * (len(pending) - 1))
    return "\n".join(out)


def strip_source(source: str) -> StrippedSource:
    """Blank comments and the contents of string/char literals, keeping newlines and ``"C"``.

    ``extern "C"`` is the only string whose contents matter to the rules, so it is kept verbatim.
    """
    out: list[str] = []
    strings: list[tuple[int, str]] = []
    i, n, line = 0, len(source), 1
    while i < n:
        c = source[i]
        nxt = source[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = source.find("\n", i)
            j = n if j < 0 else j
            out.append(" ")
            i = j
        elif c == "/" and nxt == "*":
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            comment = source[i:j]
            out.append(" " + "\n" * comment.count("\n"))
            line += comment.count("\n")
            i = j
        elif c == "R" and nxt == '"' and (i == 0 or not (source[i - 1].isalnum() or source[i - 1] == "_")):
            m = re.match(r'R"([^(\s]{0,16})\(', source[i:])
            if m is None:
                out.append(c)
                i += 1
                continue
            end = source.find(")" + m.group(1) + '"', i + m.end())
            end = n if end < 0 else end + len(m.group(1)) + 2
            body = source[i:end]
            strings.append((line, body))
            out.append('""' + "\n" * body.count("\n"))
            line += body.count("\n")
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            body = source[i + 1 : j]
            if c == '"':
                strings.append((line, body))
                out.append('"C"' if body == "C" else '""')
            else:
                out.append("' '")
            i = j + 1
        else:
            if c == "\n":
                line += 1
            out.append(c)
            i += 1
    return StrippedSource("".join(out), strings)


# Host calls that escape the sandboxed contract: processes, files, sockets, process exit, environment,
# dynamic loading and signals. Each is matched as a call or a type use on the stripped code.
_FORBIDDEN_CALLS: dict[str, str] = {
    "system|popen|fork|_Fork|vfork|execl|execlp|execle|execv|execvp|execvpe|execve|execveat|fexecve|"
    "posix_spawnp?|pidfd_spawnp?|clone3?|__clone": ("starts processes; a candidate must only compute"),
    "socket|connect|bind|listen|accept|gethostbyname|getaddrinfo": "opens network connections",
    "fopen|freopen|open|openat|creat|fdopen|unlink|rename|mkdir|rmdir|chdir|truncate": (
        "touches the file system; a candidate must not read or write files"
    ),
    "exit|_exit|_Exit|quick_exit|abort|atexit|at_quick_exit|terminate": (
        "ends or hooks the process; the executor reports failures, candidates must not exit"
    ),
    "kill|raise|signal|sigaction|alarm|setitimer": "plays with signals, which the worker uses for isolation",
    "dlopen|dlsym|mmap|mprotect|ptrace|syscall|prctl|setrlimit": "escapes the sandbox through the OS",
    "getenv|setenv|putenv|unsetenv": "depends on or changes the environment",
    "sleep|usleep|nanosleep": "sleeps on the host, which only distorts timing",
    "cudaDeviceReset|cudaSetDevice|cudaDeviceSetLimit|cudaProfilerStart|cudaProfilerStop": (
        "changes the device or context the executor manages"
    ),
}
_FORBIDDEN_TYPES = {
    "ofstream|ifstream|fstream|filebuf": "touches the file system through iostreams",
    # named at all, not only called: a pointer to them reaches the worker's own code (executor.linkcheck)
    "dlopen|dlsym|dlvsym|dlmopen|dladdr|dlinfo|dl_iterate_phdr|__libc_dlsym|__libc_dlopen_mode|_dl_sym": (
        "looks up code loaded in the process by name; a candidate runs inside the worker that checks it"
    ),
    "_*Py[A-Z_][A-Za-z0-9_]*": (
        "is named like the Python C API (Py..., _Py...), which a candidate must not reach: it runs inside the "
        "Python worker that checks it"
    ),
    # launch::async and <future> too: with ``using namespace std`` a bare async(...) named no std::
    # (review 37: a confirming call answered by a thread after it returned)
    "std::thread|std::jthread|pthread_create|std::async|launch::async": (
        "starts host threads; the timed call must be self-contained"
    ),
}
_CALL_PATTERNS = [
    (re.compile(rf"(?<![\w.>:])(?:::)?(?:std::)?({names})\s*\("), reason)
    for names, reason in _FORBIDDEN_CALLS.items()
]
_TYPE_PATTERNS = [
    (re.compile(rf"(?<![\w])({names})\b"), reason) for names, reason in _FORBIDDEN_TYPES.items()
]
_TIMER_REGISTER = re.compile(r"%(globaltimer(?:_lo|_hi)?|clock(?:64|_hi)?)\b")
_INCLUDE = re.compile(r'^\s*(?:#|%:)\s*include\s*"([^"]*)"', re.M)
# Every directive that reads a file, ``%:`` being the digraph of ``#``.
_READING_DIRECTIVE = re.compile(r"^[ \t]*(?:#|%:)[ \t]*(include|include_next|import|embed)\b(.*)$", re.M)
_DEPENDENCY_PRAGMA = re.compile(r"^[ \t]*(?:#|%:)[ \t]*pragma[ \t]+GCC[ \t]+dependency\b", re.M)
_HAS_INCLUDE = re.compile(r"\b__has_include(?:_next)?\s*\(([^)]*)\)")
_SYSTEM_HEADER = re.compile(r"^\s*<([^<>]+)>\s*$")
_FORBIDDEN_HEADERS = re.compile(
    r"^\s*(?:#|%:)\s*include\s*<(fstream|thread|future|unistd\.h|sys/[\w/]+\.h|dlfcn\.h|"
    r"spawn\.h|signal\.h|csignal|filesystem|sys/socket\.h)>",
    re.M,
)
_PRINT = re.compile(r"(?<![\w.>:])(?:std::)?(printf|fprintf|puts|fputs|putchar|cout|cerr|clog)\b")
_GPU_WORK = re.compile(
    r"<<<|cudaLaunch\w*\s*\(|\bcub::|\bthrust::|\bcublas\w*\s*\(|\bcusparse\w*\s*\(|\bcufft\w*\s*\("
)


def _unsafe_header(operand: str) -> str | None:
    """Why an include operand (on the stripped code) may not be used, or None for ``<relative/name>``."""
    m = _SYSTEM_HEADER.match(operand)
    if m is None:
        return "the header is not a plain <name> (a macro, or a malformed name)"
    name = m.group(1).strip()
    if name.startswith(("/", "~")) or "\\" in name or ":" in name:
        return "an absolute path"
    if ".." in name.split("/"):
        return "a path that climbs out with .."
    return None


def _line_of(code: str, pos: int) -> int:
    return code.count("\n", 0, pos) + 1


def _excerpt(code: str, pos: int) -> str:
    start = code.rfind("\n", 0, pos) + 1
    end = code.find("\n", pos)
    return code[start : end if end >= 0 else len(code)].strip()[:120]


def _matching_brace(code: str, open_pos: int) -> int:
    depth = 0
    for k in range(open_pos, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(code)


def _has_extern_c_definition(code: str, entry: str) -> bool:
    name = re.escape(entry)
    direct = re.compile(rf'extern\s+"C"\s+(?:__host__\s+)?void\s+{name}\s*\([^;{{]*\)\s*\{{')
    if direct.search(code):
        return True
    definition = re.compile(rf"(?:__host__\s+)?void\s+{name}\s*\([^;{{]*\)\s*\{{")
    for block in re.finditer(r'extern\s+"C"\s*\{', code):
        end = _matching_brace(code, block.end() - 1)
        if definition.search(code, block.end(), end):
            return True
    return False


def _has_kernel_definition(code: str, entry: str) -> bool:
    bounds = r"(?:__launch_bounds__\s*\([^)]*\)\s*)?"
    pattern = (
        rf'(?:extern\s+"C"\s+)?(?:static\s+)?__global__\s+{bounds}void\s+{bounds}{re.escape(entry)}\s*\('
    )
    return re.search(pattern, code) is not None


def check_source(task: FunctionTask | KernelTask, source: str) -> list[StaticViolation]:
    """Return every rule the candidate breaks (an empty list means it may be compiled)."""
    violations: list[StaticViolation] = []
    if len(source) > MAX_SOURCE_CHARS:
        return [
            StaticViolation(rule="source_too_large", reason=f"sources over {MAX_SOURCE_CHARS} characters")
        ]
    if "\0" in source:
        return [StaticViolation(rule="binary_source", reason="the source contains NUL bytes")]
    spliced = splice_lines(source)
    stripped = strip_source(spliced)
    code = stripped.code

    def add(rule: str, reason: str, pos: int | None = None, excerpt: str = "") -> None:
        line = _line_of(code, pos) if pos is not None else None
        violations.append(
            StaticViolation(
                rule=rule, reason=reason, line=line, excerpt=excerpt or (_excerpt(code, pos) if pos else "")
            )
        )

    for m in _INCLUDE.finditer(spliced):
        add(
            "local_include",
            "a candidate is one translation unit; quoted includes could read host files",
            m.start(),
            m.group(0).strip(),
        )
    for m in _READING_DIRECTIVE.finditer(code):
        directive, operand = m.group(1), m.group(2)
        if directive != "include":
            add(
                f"forbidden_directive:{directive}",
                f"#{directive} reads files; only #include <...> is allowed",
                m.start(),
            )
        elif operand.strip() != '""' and (why := _unsafe_header(operand)) is not None:
            add(
                "include_path", f"#include names {why}; only the toolkit's headers may be included", m.start()
            )
    for m in _HAS_INCLUDE.finditer(code):
        if m.group(1).strip() != '""' and (why := _unsafe_header(m.group(1))) is not None:
            add("include_path", f"__has_include names {why}; it probes host files", m.start())
        elif m.group(1).strip() == '""':
            add("local_include", "__has_include with a quoted name probes host files", m.start())
    for m in _DEPENDENCY_PRAGMA.finditer(code):
        add("forbidden_directive:pragma", "#pragma GCC dependency reads a host file's date", m.start())
    for m in _FORBIDDEN_HEADERS.finditer(code):
        add(
            "forbidden_header",
            f"<{m.group(1)}> only serves file, process, thread or signal access",
            m.start(),
        )
    for pattern, reason in _CALL_PATTERNS:
        for m in pattern.finditer(code):
            add(f"forbidden_call:{m.group(1)}", f"{m.group(1)}() {reason}", m.start())
    for pattern, reason in _TYPE_PATTERNS:
        for m in pattern.finditer(code):
            add(f"forbidden_type:{m.group(1)}", f"{m.group(1)} {reason}", m.start())
    for m in _PRINT.finditer(code):
        add(f"prints:{m.group(1)}", "candidates must not print (output is compared, not logged)", m.start())
    for line, text in stripped.strings:
        timer = _TIMER_REGISTER.search(text)
        if timer:
            violations.append(
                StaticViolation(
                    rule="reads_timer_register",
                    reason=f"inline PTX reads %{timer.group(1)}, which can fake or skew timing",
                    line=line,
                    excerpt=text[:120],
                )
            )
    harness = re.search(r"\bregraph_\w+", code)
    if harness is not None:
        add(
            "redefines_harness",
            "names starting with regraph_ belong to the executor's harness",
            harness.start(),
        )
    if isinstance(task, KernelTask):
        ref = task.reference_symbol
        use = re.search(rf"\b{re.escape(ref)}\s*\(", code)
        if use is not None and ref != task.entry:
            add(
                "redefines_reference",
                f"{ref}() is the serial reference; a kernel candidate must not define or call it",
                use.start(),
            )
        if not _has_kernel_definition(code, task.entry):
            add("missing_entry", f"no __global__ void {task.entry}(...) kernel definition")
        if re.search(r"\bmain\s*\(", code):
            add("defines_main", "a kernel candidate is launched by the executor; main() is not allowed")
    else:
        if not _has_extern_c_definition(code, task.entry):
            add("missing_entry", f'no extern "C" void {task.entry}(...) definition')
        if re.search(r"\bint\s+main\s*\(", code):
            add("defines_main", "a candidate is a library; main() is not allowed")
        if not _GPU_WORK.search(code):
            add(
                "no_gpu_work",
                "no kernel launch (<<<...>>>, cudaLaunchKernel) or CUDA library call: "
                "the work would run on the host",
            )
    return violations
