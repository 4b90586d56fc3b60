from __future__ import annotations

from pathlib import Path

import pytest

from executor.static import check_source, strip_source
from executor.taskformat import FunctionTask, KernelTask, load_task

TASKS_DIR = Path(__file__).parent / "fixtures" / "tasks"

GOOD_FUNCTION = (TASKS_DIR / "saxpy" / "naive.cu").read_text()

GOOD_FUNCTION_TRICKY = r"""
// A comment that mentions system("rm -rf /"), fopen, exit(1) and printf must not matter.
/* neither does this one: popen(), fork(), std::ofstream out("x"); */
#include <cuda_runtime.h>
#include <cub/cub.cuh>
static const char* kNote = "exit(0) inside a string is fine";
__global__ void __launch_bounds__(256) saxpy_k(int n, float a, const float* __restrict__ x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    char c = '"';  // a quote character must not confuse the stripper
    if (i < n) y[i] = fmaf(a, x[i], y[i]) + (c == 0);
}
extern "C" {
void saxpy(int n, float a, const float* x, float* y) {
    float *dx, *dy;
    cudaMalloc(&dx, n * sizeof(float)); cudaMalloc(&dy, n * sizeof(float));
    cudaMemcpyAsync(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice);
    saxpy_k<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
    cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dx); cudaFree(dy); (void)kNote;
}
}
"""

GOOD_KERNEL = r"""
__device__ __forceinline__ double scaled(double s, double v) { return s * v; }
__global__ void scale_kernel(long long count, double s, const double* in, double* out) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < count) out[i] = scaled(s, in[i]);
}
"""


@pytest.fixture
def saxpy() -> FunctionTask | KernelTask:
    return load_task(TASKS_DIR / "saxpy")


@pytest.fixture
def kernel_task() -> FunctionTask | KernelTask:
    return load_task(TASKS_DIR / "scale_kernel")


@pytest.mark.parametrize("source", [GOOD_FUNCTION, GOOD_FUNCTION_TRICKY])
def test_good_function_candidates_pass(saxpy: FunctionTask | KernelTask, source: str) -> None:
    assert check_source(saxpy, source) == []


def test_good_kernel_candidate_passes(kernel_task: FunctionTask | KernelTask) -> None:
    assert check_source(kernel_task, GOOD_KERNEL) == []
    bounded = GOOD_KERNEL.replace("__global__ void", "__global__ void __launch_bounds__(256)")
    assert check_source(kernel_task, bounded) == []


def _inject(body: str) -> str:
    return GOOD_FUNCTION.replace("    cudaFree(dx);", f"    {body}\n    cudaFree(dx);")


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        ('system("curl evil");', "forbidden_call:system"),
        ('FILE* f = popen("ls", "r");', "forbidden_call:popen"),
        ("if (fork() == 0) {}", "forbidden_call:fork"),
        ('execvp("sh", nullptr);', "forbidden_call:execvp"),
        ("int s = socket(2, 1, 0);", "forbidden_call:socket"),
        ('FILE* f = fopen("/tmp/cache", "w");', "forbidden_call:fopen"),
        ('int fd = ::open("/etc/passwd", 0);', "forbidden_call:open"),
        ('std::ofstream out("y.bin");', "forbidden_type:ofstream"),
        ("exit(0);", "forbidden_call:exit"),
        ("std::abort();", "forbidden_call:abort"),
        ('printf("%f", y[0]);', "prints:printf"),
        ("std::cout << y[0];", "prints:cout"),
        ('const char* e = getenv("HOME");', "forbidden_call:getenv"),
        ("cudaDeviceReset();", "forbidden_call:cudaDeviceReset"),
        ("usleep(10);", "forbidden_call:usleep"),
        ("std::thread t([]{}); t.join();", "forbidden_type:std::thread"),
        (
            "using namespace std; auto f = async(launch::async, []{}); f.wait();",
            "forbidden_type:launch::async",
        ),
        ("regraph_generate(0, n, 0.f, nullptr, nullptr);", "redefines_harness"),
        ("void* (*look)(void*, const char*) = &dlsym;", "forbidden_type:dlsym"),
        ('void* p = __libc_dlsym(nullptr, "x");', "forbidden_type:__libc_dlsym"),
        ('PyRun_SimpleString("import os");', "forbidden_type:PyRun_SimpleString"),
        ("int g = _PyObject_GC_New != nullptr;", "forbidden_type:_PyObject_GC_New"),
    ],
)
def test_forbidden_host_code_is_rejected(saxpy: FunctionTask | KernelTask, body: str, rule: str) -> None:
    violations = check_source(saxpy, _inject(body))
    assert rule in {v.rule for v in violations}
    hit = next(v for v in violations if v.rule == rule)
    assert hit.reason and hit.line is not None and hit.line > 1


def test_inline_ptx_timer_reads_are_rejected(kernel_task: FunctionTask | KernelTask) -> None:
    source = GOOD_KERNEL.replace(
        "if (i < count)",
        'unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));\n    if (i < count)',
    )
    assert [v.rule for v in check_source(kernel_task, source)] == ["reads_timer_register"]
    clock = GOOD_KERNEL.replace(
        "if (i < count)", 'unsigned c; asm("mov.u32 %0, %%clock;" : "=r"(c)); if (i < count)'
    )
    assert [v.rule for v in check_source(kernel_task, clock)] == ["reads_timer_register"]


def test_missing_entry_points(
    saxpy: FunctionTask | KernelTask, kernel_task: FunctionTask | KernelTask
) -> None:
    not_extern_c = GOOD_FUNCTION.replace('extern "C" void saxpy', "void saxpy")
    assert "missing_entry" in {v.rule for v in check_source(saxpy, not_extern_c)}
    renamed = GOOD_FUNCTION.replace('extern "C" void saxpy(', 'extern "C" void saxpy2(')
    assert "missing_entry" in {v.rule for v in check_source(saxpy, renamed)}
    commented = "/*\n" + GOOD_FUNCTION + "\n*/"
    assert "missing_entry" in {v.rule for v in check_source(saxpy, commented)}
    device_only = GOOD_KERNEL.replace("__global__ void scale_kernel", "__device__ void scale_kernel")
    assert "missing_entry" in {v.rule for v in check_source(kernel_task, device_only)}


def test_kernel_candidate_must_not_use_the_reference(kernel_task: FunctionTask | KernelTask) -> None:
    sneaky = GOOD_KERNEL + '\nextern "C" void scale(long long c, double s, const double* i, double* o);\n'
    assert "redefines_reference" in {v.rule for v in check_source(kernel_task, sneaky)}


def test_host_only_function_candidate_is_rejected(saxpy: FunctionTask | KernelTask) -> None:
    host = (
        'extern "C" void saxpy(int n, float a, const float* x, float* y) '
        "{ for (int i = 0; i < n; ++i) y[i] += a * x[i]; }"
    )
    assert [v.rule for v in check_source(saxpy, host)] == ["no_gpu_work"]


def test_quoted_includes_are_rejected(saxpy: FunctionTask | KernelTask) -> None:
    assert "local_include" in {
        v.rule for v in check_source(saxpy, '#include "/etc/passwd"\n' + GOOD_FUNCTION)
    }
    assert "forbidden_header" in {v.rule for v in check_source(saxpy, "#include <fstream>\n" + GOOD_FUNCTION)}
    assert "forbidden_header" in {v.rule for v in check_source(saxpy, "#include <future>\n" + GOOD_FUNCTION)}


def test_stripper_keeps_lines_and_extern_c() -> None:
    src = 'a // x\n/* y\n z */ extern "C" "hello \\" world" R"(raw\n)" b\n'
    stripped = strip_source(src)
    assert stripped.code.count("\n") == src.count("\n")
    assert 'extern "C"' in stripped.code and "hello" not in stripped.code and "raw" not in stripped.code
    assert [s for _, s in stripped.strings][:2] == ["C", 'hello \\" world']


def test_words_that_only_begin_like_python_api_names_pass(saxpy: FunctionTask | KernelTask) -> None:
    assert check_source(saxpy, _inject("int Pyramid = 1, pyLevel = 2; (void)Pyramid; (void)pyLevel;")) == []
