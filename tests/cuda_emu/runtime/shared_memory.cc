// Shared memory of the block that runs now: see shared_memory.h. Each window ends at a PROT_NONE
// page and static variables are placed from the top down, so running off the end of dynamic shared
// memory or of the first static variable a block declares faults at once.
#include "shared_memory.h"
#include <sys/mman.h>
#include <unistd.h>
#include <cstring>
#include "fault.h"
#include "memory.h"
#include "state.h"

namespace hs_emu {

static char *map_window(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void *p = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fatal("cannot map shared memory");
  char *guard = static_cast<char *>(p) + bytes;
  mprotect(guard, page, PROT_NONE);
  fault_register_region(guard, page, FaultRegion::SharedGuard);
  return static_cast<char *>(p);
}

SharedMemory::SharedMemory() {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t dyn = (kSharedPerBlockOptin + page - 1) / page * page;
  static_base_ = map_window(kStaticSharedLimit);
  dynamic_end_ = map_window(dyn) + dyn;
}

void SharedMemory::begin_block(size_t dynamic_bytes, size_t limit) {
  vars_.clear();
  used_ = 0;
  limit_ = limit;
  dynamic_bytes_ = dynamic_bytes;
  // 32-byte aligned (as kernels/hs_cuda.h declares it on a GPU), ending at the guard page
  dynamic_ = dynamic_end_ - (dynamic_bytes + 31) / 32 * 32;
  memset(dynamic_, kFillByte, dynamic_bytes);
}

void *SharedMemory::static_var(const void *key, size_t size, size_t align) {
  for (const auto &v : vars_)
    if (v.first == key) return static_base_ + v.second;
  if (size > kStaticSharedLimit - used_) return nullptr;
  size_t off = (kStaticSharedLimit - used_ - size) / align * align;
  // A variable declared with less than 32-byte alignment starts 16 bytes past a 32-byte boundary where
  // that still fits: CUDA places it at its declared alignment only, so a kernel that needs more (the
  // 256-bit pointers of nvcuda::wmma) must declare it (HS_SHARED_ALIGNED), not find it by chance here.
  if (align < 32 && off % 32 == 0 && off >= 16 && kStaticSharedLimit - (off - 16) + dynamic_bytes_ <= limit_)
    off -= 16;
  if (kStaticSharedLimit - off + dynamic_bytes_ > limit_) return nullptr;
  used_ = kStaticSharedLimit - off;
  vars_.emplace_back(key, off);
  memset(static_base_ + off, kFillByte, size);
  return static_base_ + off;
}

} // namespace hs_emu
