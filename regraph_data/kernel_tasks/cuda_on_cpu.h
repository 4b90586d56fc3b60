// A small CPU emulation of the CUDA execution model, enough to run this suite's candidate kernels
// with g++ so that indexing, grid coverage and barrier mistakes show up without a GPU
// (tests/unit/bench/test_kernel_tasks.py). It is not a GPU: memory is coherent, there is no real
// concurrency, and timing means nothing.
//
// Every CUDA thread of a block is a ucontext fiber. Warps run one at a time, each as far as it can:
// its lanes run one after another to the next barrier; a shuffle is a warp barrier that is released
// as soon as the warp's live lanes arrive, __syncthreads is released once every warp has arrived or
// returned. Running one warp far ahead of the others (first to last, or last to first) is what makes
// a missing __syncthreads show up as a wrong result. Blocks run one after another. Shared memory is a
// function-local static (shared by the fibers of the running block); dynamic shared memory is one
// buffer. Misuse that the hardware would not forgive (a shuffle reading a lane that has exited, a
// warp split between a shuffle and __syncthreads, writes outside an array) is recorded in
// machine().error.
#pragma once

#include <ucontext.h>

#include <cmath>
#include <cstring>
#include <vector>

struct dim3 {
    unsigned int x = 1, y = 1, z = 1;
};

struct alignas(16) float4 {
    float x, y, z, w;
};

inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

namespace emu {

enum class State { ready, block_barrier, warp_barrier, done };

struct Fiber {
    ucontext_t context;
    dim3 thread;
    int linear = 0;
    State state = State::ready;
};

struct Machine {
    dim3 grid, block, block_index;
    std::vector<Fiber> fibers;
    std::vector<std::vector<char>> stacks;
    std::vector<char> dynamic_shared;
    ucontext_t scheduler;
    Fiber* current = nullptr;
    void (*body)(void*) = nullptr;
    void* body_context = nullptr;
    long long shuffle_slots[1024];
    char error[256] = "";
    bool reverse_warps = false;  // run the warps of a block last to first
};

inline Machine& machine() {
    static Machine m;
    return m;
}

inline void fail(const char* what, const char* detail = "") {
    Machine& m = machine();
    if (m.error[0] == '\0') {
        std::strncat(m.error, what, sizeof m.error - 1);
        std::strncat(m.error, detail, sizeof m.error - 1 - std::strlen(m.error));
    }
}

inline void wait(State state) {
    Machine& m = machine();
    m.current->state = state;
    swapcontext(&m.current->context, &m.scheduler);
}

inline void fiber_main() {
    Machine& m = machine();
    m.body(m.body_context);
    m.current->state = State::done;
    swapcontext(&m.current->context, &m.scheduler);
}

// Runs warp w until every lane has returned or waits at __syncthreads: a warp whose live lanes all
// wait at a shuffle is released at once, so a warp runs as far ahead of the others as it can, which
// is what exposes a missing __syncthreads. Returns false when the warp is split between a shuffle and
// __syncthreads.
inline bool run_warp(Machine& m, int w) {
    const int n = static_cast<int>(m.fibers.size());
    const int first = w * 32;
    const int last = first + 32 < n ? first + 32 : n;
    for (;;) {
        for (int l = first; l < last; ++l) {
            Fiber& f = m.fibers[l];
            if (f.state != State::ready) continue;
            m.current = &f;
            swapcontext(&m.scheduler, &f.context);
        }
        bool at_shuffle = false, at_sync = false;
        for (int l = first; l < last; ++l) {
            at_shuffle = at_shuffle || m.fibers[l].state == State::warp_barrier;
            at_sync = at_sync || m.fibers[l].state == State::block_barrier;
        }
        if (!at_shuffle) return true;
        if (at_sync) {
            fail("a warp is split between a shuffle and __syncthreads");
            return false;
        }
        for (int l = first; l < last; ++l)
            if (m.fibers[l].state == State::warp_barrier) m.fibers[l].state = State::ready;
    }
}

inline void run_block(Machine& m) {
    const int n = static_cast<int>(m.fibers.size());
    for (int i = 0; i < n; ++i) {
        Fiber& f = m.fibers[i];
        f.linear = i;
        f.thread.x = i % m.block.x;
        f.thread.y = (i / m.block.x) % m.block.y;
        f.thread.z = i / (m.block.x * m.block.y);
        f.state = State::ready;
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = m.stacks[i].data();
        f.context.uc_stack.ss_size = m.stacks[i].size();
        f.context.uc_link = nullptr;
        makecontext(&f.context, fiber_main, 0);
    }
    const int warps = (n + 31) / 32;
    for (;;) {
        for (int k = 0; k < warps; ++k)
            if (!run_warp(m, m.reverse_warps ? warps - 1 - k : k)) return;
        bool waiting = false;
        for (Fiber& f : m.fibers)
            if (f.state == State::block_barrier) {
                f.state = State::ready;
                waiting = true;
            }
        if (!waiting) return;  // every thread has returned
    }
}

// Runs body(context) as every thread of every block of the grid.
inline void launch(dim3 grid, dim3 block, long long shared_bytes, void (*body)(void*), void* context) {
    Machine& m = machine();
    m.error[0] = '\0';
    m.grid = grid;
    m.block = block;
    m.body = body;
    m.body_context = context;
    const int threads = static_cast<int>(block.x * block.y * block.z);
    m.fibers.assign(threads, Fiber{});
    if (static_cast<int>(m.stacks.size()) < threads) m.stacks.resize(threads, std::vector<char>(64 * 1024));
    m.dynamic_shared.assign(static_cast<size_t>(shared_bytes) + 16, 0x5a);
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) {
                m.block_index = dim3{x, y, z};
                run_block(m);
                if (m.error[0] != '\0') return;
            }
}

inline void syncthreads() { wait(State::block_barrier); }

template <typename T>
T shuffle(T value, int source_lane) {
    static_assert(sizeof(T) <= sizeof(long long), "shuffle of a wide type");
    Machine& m = machine();
    const int lane = m.current->linear % 32;
    const int base = m.current->linear - lane;
    long long slot = 0;
    std::memcpy(&slot, &value, sizeof(T));
    m.shuffle_slots[m.current->linear] = slot;
    wait(State::warp_barrier);
    const int src = base + source_lane;
    T result = value;
    if (src >= static_cast<int>(m.fibers.size()) || m.fibers[src].state == State::done) {
        fail("a shuffle reads a lane that has exited or does not exist");
    } else {
        std::memcpy(&result, &m.shuffle_slots[src], sizeof(T));
    }
    wait(State::warp_barrier);  // nobody overwrites a slot before every lane has read
    return result;
}

inline int lane_id() { return machine().current->linear % 32; }

// A copy of a host array between two guard zones filled with 0xff bytes (NaN as float, -1 as int):
// reads past either end poison the result, writes past either end are reported on check().
template <typename T>
struct Guarded {
    static constexpr size_t pad = 4096;
    T* original;
    size_t bytes;
    std::vector<unsigned char> buffer;
    const char* name;

    Guarded(const T* data, long long count, const char* arg)
        : original(const_cast<T*>(data)), bytes(static_cast<size_t>(count) * sizeof(T)),
          buffer(bytes + 2 * pad, 0xff), name(arg) {
        std::memcpy(buffer.data() + pad, data, bytes);
    }
    T* device() { return reinterpret_cast<T*>(buffer.data() + pad); }
    void check_and_copy_back(bool output) {
        for (size_t i = 0; i < pad; ++i)
            if (buffer[i] != 0xff || buffer[pad + bytes + i] != 0xff) {
                fail("a write outside array ", name);
                break;
            }
        if (std::memcmp(buffer.data() + pad, original, bytes) != 0 && !output)
            fail("a write into input array ", name);
        if (output) std::memcpy(original, buffer.data() + pad, bytes);
    }
};

}  // namespace emu

#define threadIdx (emu::machine().current->thread)
#define blockIdx (emu::machine().block_index)
#define blockDim (emu::machine().block)
#define gridDim (emu::machine().grid)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __syncthreads() emu::syncthreads()

template <typename T>
T __shfl_sync(unsigned, T v, int src) {
    return emu::shuffle(v, src & 31);
}
template <typename T>
T __shfl_down_sync(unsigned, T v, unsigned delta) {
    const int src = emu::lane_id() + static_cast<int>(delta);
    const T got = emu::shuffle(v, src < 32 ? src : emu::lane_id());
    return src < 32 ? got : v;
}
template <typename T>
T __shfl_up_sync(unsigned, T v, unsigned delta) {
    const int src = emu::lane_id() - static_cast<int>(delta);
    const T got = emu::shuffle(v, src >= 0 ? src : emu::lane_id());
    return src >= 0 ? got : v;
}
template <typename T>
T __shfl_xor_sync(unsigned, T v, int mask) {
    return emu::shuffle(v, emu::lane_id() ^ mask);
}

template <typename T>
T __ldg(const T* p) {
    return *p;
}

inline int atomicAdd(int* p, int v) {
    const int old = *p;
    *p = v + old;
    return old;
}
inline float atomicAdd(float* p, float v) {
    const float old = *p;
    *p = v + old;
    return old;
}
inline unsigned int atomicAdd(unsigned int* p, unsigned int v) {
    const unsigned int old = *p;
    *p = v + old;
    return old;
}

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, sizeof f);
    return f;
}
inline int __float_as_int(float f) {
    int i;
    std::memcpy(&i, &f, sizeof i);
    return i;
}
inline int __popc(unsigned int v) { return __builtin_popcount(v); }
