// Memory of the emulated CUDA device: see memory.h.
#include "memory.h"
#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include "fault.h"
#include "state.h"

namespace hs_emu {
namespace {

constexpr size_t kAlign = 256;              // cudaMalloc's alignment (CUDA Programming Guide, "Device Memory Accesses")
constexpr size_t kRedZone = 256;            // at least this many bytes after each allocation
constexpr size_t kProtectGranule = 2 << 20; // the accessible prefix of the arena grows in 2 MiB steps

struct Allocation {
  size_t size;  // as requested
  size_t block; // with alignment padding and red zone
};

struct Arena {
  char *base = nullptr;
  size_t bytes = 0;
  size_t mapped = 0; // [base, base + mapped) is what DeviceAccess opens; the rest stays PROT_NONE
  int open = 0;
  std::map<size_t, size_t> free;      // offset -> length
  std::map<size_t, Allocation> live;  // offset -> allocation
  std::map<uintptr_t, size_t> pinned; // address -> length
};

Arena &arena() {
  static Arena *a = [] {
    Arena *r = new Arena; // never freed: kernels may still be queued while static destructors run
    r->bytes = config().mem_bytes;
    void *p = mmap(nullptr, r->bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fatal("cannot reserve %zu bytes of device memory (HS_CUDA_EMU_MEM_MB)", r->bytes);
    r->base = static_cast<char *>(p);
    madvise(p, r->bytes, MADV_HUGEPAGE); // fewer page-table entries for mprotect to change
    r->free[0] = r->bytes;
    fault_register_region(p, r->bytes, FaultRegion::DeviceMemory);
    return r;
  }();
  return *a;
}

size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

void set_protection(Arena &a, int prot) {
  if (a.mapped != 0 && mprotect(a.base, a.mapped, prot) != 0) fatal("mprotect of device memory failed");
}

} // namespace

DeviceAccess::DeviceAccess() {
  Arena &a = arena();
  if (a.open++ == 0) set_protection(a, PROT_READ | PROT_WRITE);
}

DeviceAccess::~DeviceAccess() {
  Arena &a = arena();
  if (--a.open == 0) set_protection(a, PROT_NONE);
}

MemKind classify(const void *p) {
  Arena &a = arena();
  const uintptr_t u = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = reinterpret_cast<uintptr_t>(a.base);
  if (u >= lo && u < lo + a.bytes) return MemKind::Device;
  auto it = a.pinned.upper_bound(u);
  if (it != a.pinned.begin() && u < (--it)->first + it->second) return MemKind::Pinned;
  return MemKind::Pageable;
}

bool range_valid(MemKind kind, const void *p, size_t n) {
  Arena &a = arena();
  if (kind == MemKind::Device) {
    const size_t off = static_cast<size_t>(static_cast<const char *>(p) - a.base);
    auto it = a.live.upper_bound(off);
    if (it == a.live.begin()) return false;
    --it;
    return off >= it->first && n <= it->first + it->second.size - off;
  }
  if (kind == MemKind::Pinned) {
    const uintptr_t u = reinterpret_cast<uintptr_t>(p);
    auto it = a.pinned.upper_bound(u);
    if (it == a.pinned.begin()) return false;
    --it;
    return u >= it->first && n <= it->first + it->second - u;
  }
  return true;
}

cudaError_t device_malloc(void **p, size_t n) {
  if (p == nullptr) return cudaErrorInvalidValue;
  Arena &a = arena();
  if (n == 0) { // cudaMalloc(&p, 0) succeeds with a null pointer
    *p = nullptr;
    return cudaSuccess;
  }
  if (a.open != 0) fatal("cudaMalloc called while a kernel runs");
  const size_t block = round_up(n, kAlign) + kRedZone;
  for (auto it = a.free.begin(); it != a.free.end(); ++it) { // first fit
    if (it->second < block) continue;
    const size_t off = it->first, len = it->second;
    a.free.erase(it);
    if (len > block) a.free[off + block] = len - block;
    a.live[off] = Allocation{n, block};
    if (off + block > a.mapped) a.mapped = std::min(a.bytes, round_up(off + block, kProtectGranule));
    {
      DeviceAccess access;
      memset(a.base + off, kFillByte, block);
    }
    *p = a.base + off;
    return cudaSuccess;
  }
  return cudaErrorMemoryAllocation;
}

cudaError_t device_free(void *p) {
  if (p == nullptr) return cudaSuccess;
  Arena &a = arena();
  if (classify(p) != MemKind::Device) return cudaErrorInvalidValue;
  const size_t off = static_cast<size_t>(static_cast<char *>(p) - a.base);
  auto it = a.live.find(off);
  if (it == a.live.end()) return cudaErrorInvalidValue; // not the start of a live allocation
  size_t start = off, len = it->second.block;
  a.live.erase(it);
  {
    DeviceAccess access; // freed memory reads as NaN again: a use after free shows up
    memset(a.base + start, kFillByte, len);
  }
  auto next = a.free.lower_bound(start); // coalesce with the free neighbours
  if (next != a.free.end() && next->first == start + len) {
    len += next->second;
    a.free.erase(next);
  }
  auto prev = a.free.lower_bound(start);
  if (prev != a.free.begin() && (--prev)->first + prev->second == start) {
    start = prev->first;
    len += prev->second;
    a.free.erase(prev);
  }
  a.free[start] = len;
  return cudaSuccess;
}

cudaError_t pinned_malloc(void **p, size_t n) {
  if (p == nullptr) return cudaErrorInvalidValue;
  if (n == 0) {
    *p = nullptr;
    return cudaSuccess;
  }
  void *m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return cudaErrorMemoryAllocation;
  memset(m, kFillByte, n);
  arena().pinned[reinterpret_cast<uintptr_t>(m)] = n;
  *p = m;
  return cudaSuccess;
}

cudaError_t pinned_free(void *p) {
  if (p == nullptr) return cudaSuccess;
  Arena &a = arena();
  auto it = a.pinned.find(reinterpret_cast<uintptr_t>(p));
  if (it == a.pinned.end()) return cudaErrorInvalidValue;
  munmap(p, it->second); // a later host access faults
  a.pinned.erase(it);
  return cudaSuccess;
}

void device_mem_info(size_t *free_bytes, size_t *total_bytes) {
  Arena &a = arena();
  size_t f = 0;
  for (const auto &kv : a.free) f += kv.second;
  if (free_bytes) *free_bytes = f;
  if (total_bytes) *total_bytes = a.bytes;
}

void check_red_zones(const char *kernel, const char *file, int line) {
  static unsigned char fill[kAlign + kRedZone];
  static bool ready = false;
  if (!ready) {
    memset(fill, kFillByte, sizeof fill);
    ready = true;
  }
  Arena &a = arena();
  DeviceAccess access;
  for (const auto &kv : a.live) {
    const char *end = a.base + kv.first + kv.second.size;
    const size_t zone = kv.second.block - kv.second.size;
    if (memcmp(end, fill, zone) == 0) continue;
    size_t k = 0;
    while (static_cast<unsigned char>(end[k]) == kFillByte) k++;
    fatal("kernel %s (launched at %s:%d) wrote past the end of a %zu-byte device allocation at %p "
          "(byte %zu after its end); on a GPU this corrupts a neighbouring buffer or faults",
          kernel, file, line, kv.second.size, static_cast<void *>(a.base + kv.first), k);
  }
}

} // namespace hs_emu
