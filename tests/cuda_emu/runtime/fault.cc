// Reports of memory faults on the emulated CUDA device: see fault.h. The handler only reads plain
// data and calls write(2), sigaction(2): async-signal-safe.
#include "fault.h"
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <cstdint>
#include "block.h"

namespace hs_emu {

const KernelLaunch *volatile g_running_kernel = nullptr;

namespace {
struct Region {
  uintptr_t lo, hi;
  FaultRegion what;
};
Region g_regions[8];
volatile int g_nregions = 0;
struct sigaction g_previous;
bool g_installed = false;

struct Msg { // tiny formatter that never allocates
  char buf[1024];
  size_t n = 0;
  Msg &s(const char *t) {
    while (*t && n < sizeof buf - 1) buf[n++] = *t++;
    return *this;
  }
  Msg &u(unsigned long long v) {
    char d[24];
    int k = 0;
    do d[k++] = static_cast<char>('0' + v % 10); while ((v /= 10) && k < 24);
    while (k) { if (n < sizeof buf - 1) buf[n++] = d[--k]; else --k; }
    return *this;
  }
  Msg &x(uintptr_t v) {
    s("0x");
    for (int sh = 60; sh >= 0; sh -= 4) {
      if (n < sizeof buf - 1) buf[n++] = "0123456789abcdef"[(v >> sh) & 15];
    }
    return *this;
  }
  Msg &xyz(const uint3 &v) { return s("(").u(v.x).s(",").u(v.y).s(",").u(v.z).s(")"); }
};

void on_segv(int sig, siginfo_t *info, void *) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  const KernelLaunch *k = g_running_kernel;
  Msg m;
  m.s("hs_cuda_emu: ");
  int what = -1;
  for (int i = 0; i < g_nregions; i++)
    if (a >= g_regions[i].lo && a < g_regions[i].hi) what = static_cast<int>(g_regions[i].what);
  if (k == nullptr && what == static_cast<int>(FaultRegion::DeviceMemory)) {
    m.s("host code accessed device memory at ").x(a)
        .s(": device memory is not accessible from the host; copy it with cudaMemcpy (CUDA Programming Guide, "
           "\"Device Memory\")\n");
  } else if (k != nullptr) {
    m.s("illegal memory access in kernel ").s(k->site.kernel).s(" (launched at ").s(k->site.file).s(":")
        .u(static_cast<unsigned>(k->site.line)).s(")");
    if (g_cur != nullptr) m.s(", block ").xyz(g_cur->bid).s(", thread ").xyz(g_cur->tid);
    m.s(" at address ").x(a);
    if (what == static_cast<int>(FaultRegion::FiberStacks)) {
      m.s(": stack overflow of the emulated thread (raise HS_CUDA_EMU_STACK_KB)\n");
    } else {
      if (what == static_cast<int>(FaultRegion::SharedGuard))
        m.s(": past the end of the block's shared memory");
      else if (what == static_cast<int>(FaultRegion::DeviceMemory))
        m.s(": outside every device allocation");
      m.s(" (a GPU would report cudaErrorIllegalAddress)\n");
    }
  } else {
    m.s("segmentation fault at ").x(a).s(" in host code\n");
  }
  ssize_t ignored = write(2, m.buf, m.n);
  (void)ignored;
  (void)sig;
  sigaction(SIGSEGV, &g_previous, nullptr); // the access faults again under the previous handler
}
} // namespace

void fault_register_region(const void *base, size_t bytes, FaultRegion what) {
  if (!g_installed) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_previous);
    g_installed = true;
  }
  const int i = g_nregions;
  if (i == 8) return;
  g_regions[i].lo = reinterpret_cast<uintptr_t>(base);
  g_regions[i].hi = g_regions[i].lo + bytes;
  g_regions[i].what = what;
  g_nregions = i + 1;
}

void fault_prepare_thread() {
  static thread_local bool done = false;
  if (done) return;
  done = true;
  static thread_local char altstack[64 << 10];
  stack_t ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_sp = altstack;
  ss.ss_size = sizeof altstack;
  sigaltstack(&ss, nullptr);
}

} // namespace hs_emu
