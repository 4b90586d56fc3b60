"""A runner's const inputs are read-only there: every way its candidate has to write one is refused.

Review 39's H2 wrote a mark into its const input on every timed call (to know a set it had seen) and
had a timer put it back once the calls stopped: when the worker took more than the timer's 5 ms to
kill the runner after the trials, the copies' check found nothing (3 of 32 runs passed under load).
Since session 39 a set's ``in`` arrays are in a memfd of their own that the worker seals
(``F_SEAL_FUTURE_WRITE``: executor.worker.runner.SharedArrays) and the runner maps read-only. The
candidate below computes the right answer and then tries to write its input ``x`` by every way it has
(each once per call, each outcome written on its stderr once): make its pages writable (``mprotect``),
write through ``/proc/self/mem``, open the mapping's file through ``/proc/self/map_files``, open a
sealed memfd through its worker's ``/proc/PID/fd`` or its own ``/proc/self/fd`` read-write and write
to it, or map it writable. (The runner holds a descriptor of each memfd it maps for as long as the
mapping: CPython's ``mmap`` keeps a duplicate; so the last route does reopen it read-write, and only
the seal refuses the write.) A route that works writes into ``x``, which the input check then finds
(``wrong_output``). With every route refused it passes. With the seal off (everything in one
read-write memfd, as before session 39, or where the kernel refuses the seal), ``mprotect`` works and
the run is refused.

Host runtime, built with the host compiler; the worker's side of the seal (every write route of a
sealed descriptor, the worker's own mapping still writable) is tests/unit/executor/test_input_seal.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.worker.messages import CandidateRun
from executor.worker.runner import LANDLOCK_ENV, input_seal
from tests.integration.executor.test_clock_attack import HONEST, OPTIONS
from tests.integration.executor.test_executor_hacks_host import POLY_BODY, POLY_HEAD, POLY_TASK
from tests.support.hostcode import (
    build_host_candidates,
    run_job_showing_stderr,
    timing_set_job,
    use_candidate_process,
    write_task,
)

# Each route's report on the candidate's stderr: "route NAME: wrote" or "route NAME: refused (WHY)".
ROUTES = ("mprotect", "proc_self_mem", "map_files", "parent_fd", "own_fd")
_WRITES = r"""
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
static bool told[8];
static void tell(int k, const char* route, bool wrote, const std::string& why) {
  if (told[k]) return;
  told[k] = true;
  if (wrote) std::fprintf(stderr, "route %s: wrote\n", route);
  else std::fprintf(stderr, "route %s: refused (%s)\n", route, why.c_str());
  std::fflush(stderr);
}
static const float MARK = 12345.0f;
// A descriptor of the memfd that holds x: the mark written at x's place through it, or through a
// writable shared mapping of it. True when either worked.
static bool write_through(int fd, long offset) {
  if (pwrite(fd, &MARK, sizeof MARK, offset) == (ssize_t)sizeof MARK) return true;
  long page = sysconf(_SC_PAGESIZE), base = offset / page * page;
  void* m = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, base);
  if (m == MAP_FAILED) return false;
  std::memcpy((char*)m + (offset - base), &MARK, sizeof MARK);
  munmap(m, page);
  return true;
}
// Every descriptor under dir that names a memfd of a set's const inputs (regraph-set-K-in), opened
// read-write (else read-only) and written through: what happened, in words.
static std::string through_fds(const std::string& dir, long offset, bool* wrote) {
  DIR* d = opendir(dir.c_str());
  if (!d) return std::string("opendir: ") + std::strerror(errno);
  std::string said;
  struct dirent* e;
  while ((e = readdir(d)) != nullptr) {
    if (e->d_name[0] == '.') continue;
    std::string path = dir + "/" + e->d_name;
    char link[256] = {0};
    if (readlink(path.c_str(), link, sizeof link - 1) < 0) {
      said = std::string("readlink: ") + std::strerror(errno);
      continue;
    }
    if (std::strncmp(link, "/memfd:regraph-set-", 19) != 0 || !std::strstr(link, "-in")) continue;
    std::string how = "opened O_RDWR";
    int fd = open(path.c_str(), O_RDWR);
    if (fd < 0) {
      how = std::string("open O_RDWR: ") + std::strerror(errno);
      fd = open(path.c_str(), O_RDONLY);
      if (fd < 0) { said = how + "; open O_RDONLY: " + std::strerror(errno); continue; }
      how += "; opened O_RDONLY";
    }
    if (write_through(fd, offset)) *wrote = true;
    else said = how + "; pwrite and a writable mmap: " + std::strerror(errno);
    close(fd);
  }
  closedir(d);
  return said.empty() ? std::string("no memfd of const inputs seen") : said;
}
static void try_writes(const float* x) {
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t at = (uintptr_t)x, base = at / page * page;
  bool wrote = mprotect((void*)base, page, PROT_READ | PROT_WRITE) == 0;
  if (wrote) const_cast<float*>(x)[0] = MARK;
  tell(0, "mprotect", wrote, std::strerror(errno));
  int mem = open("/proc/self/mem", O_RDWR);
  wrote = mem >= 0 && pwrite(mem, &MARK, sizeof MARK, (off_t)at) == (ssize_t)sizeof MARK;
  tell(1, "proc_self_mem", wrote, std::strerror(errno));
  if (mem >= 0) close(mem);
  // The mapping that holds x (/proc/self/maps): its range and its offset in its file.
  FILE* maps = std::fopen("/proc/self/maps", "r");
  char line[512];
  unsigned long lo = 0, hi = 0, off = 0;
  while (maps && std::fgets(line, sizeof line, maps)) {
    unsigned long a, b, o;
    if (std::sscanf(line, "%lx-%lx %*s %lx", &a, &b, &o) == 3 && a <= at && at < b) { lo = a; hi = b; off = o; break; }
  }
  if (maps) std::fclose(maps);
  long offset = (long)(at - lo + off);
  char name[128];
  std::snprintf(name, sizeof name, "/proc/self/map_files/%lx-%lx", lo, hi);
  int fd = open(name, O_RDWR);
  wrote = fd >= 0 && write_through(fd, offset);
  tell(2, "map_files", wrote, std::strerror(errno));
  if (fd >= 0) close(fd);
  wrote = false;
  std::string said = through_fds("/proc/" + std::to_string(getppid()) + "/fd", offset, &wrote);
  tell(3, "parent_fd", wrote, said);
  wrote = false;
  said = through_fds("/proc/self/fd", offset, &wrote);
  tell(4, "own_fd", wrote, said);
}
"""
WRITER = _WRITES + POLY_HEAD + "for (int i = 0; i < n; ++i) { " + POLY_BODY + " }\ntry_writes(x);\n}\n"


@pytest.mark.parametrize("landlock", [True, False])
def test_a_candidate_cannot_write_its_const_input_in_a_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, landlock: bool
) -> None:
    """Every route is tried and refused, and the run passes (the input check finds ``x`` as made); with
    the runner's Landlock off too (the seal does not need it: its descriptor reopened read-write through
    ``/proc/self/fd`` takes no write either way)."""
    if input_seal() is not None:
        pytest.skip(f"no sealed const inputs on this kernel: {input_seal()}")
    use_candidate_process(monkeypatch)
    if not landlock:
        monkeypatch.setenv(LANDLOCK_ENV, "0")
    task = write_task(tmp_path, POLY_TASK, HONEST)
    built = build_host_candidates(tmp_path, {"writer": WRITER})
    run = CandidateRun(candidate_product=built["writer"], candidate_symbol=task.entry)
    outcome, stderr = run_job_showing_stderr(timing_set_job(task, tmp_path / "job", OPTIONS), run, 120)
    said = {
        line.split(":", 1)[0][len("route ") :]: line
        for line in stderr.splitlines()
        if line.startswith("route ")
    }
    assert sorted(said) == sorted(ROUTES), stderr
    assert not any(line.split(": ", 1)[1].startswith("wrote") for line in said.values()), stderr
    assert outcome.passed, f"{outcome.message}\n{stderr}"
