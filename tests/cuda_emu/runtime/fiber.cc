// Fibers for emulated GPU threads: see fiber.h.
#include "fiber.h"
#include <sys/mman.h>
#include <unistd.h>
#include <chrono>
#include "fault.h"
#include "state.h"

namespace ctx = boost::context;

namespace hs_emu {

StackPool::StackPool(size_t stack_bytes, size_t max_stacks) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  stack_bytes_ = (stack_bytes + page - 1) / page * page;
  // guard page at the low end of each slot (stacks grow down), then the stack, then kColorBytes so the
  // tops of the stacks fall on different cache sets (equal strides would make them evict each other)
  slot_ = page + stack_bytes_ + kColorBytes;
  max_ = max_stacks;
  void *p = mmap(nullptr, slot_ * max_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) fatal("cannot reserve %zu bytes for fiber stacks", slot_ * max_);
  base_ = static_cast<char *>(p);
  fault_register_region(base_, slot_ * max_, FaultRegion::FiberStacks);
}

ctx::stack_context StackPool::allocate() {
  char *slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    if (next_ == max_) fatal("more than %zu emulated threads blocked at once", max_);
    slot = base_ + slot_ * next_++;
    if (mprotect(slot + (slot_ - stack_bytes_ - kColorBytes), stack_bytes_ + kColorBytes, PROT_READ | PROT_WRITE) != 0)
      fatal("cannot map a fiber stack of %zu bytes", stack_bytes_);
  }
  const size_t k = static_cast<size_t>(slot - base_) / slot_;
  ctx::stack_context sc;
  sc.size = stack_bytes_;
  sc.sp = slot + slot_ - (k % (kColorBytes / 64)) * 64; // top of the stack
  return sc;
}

void StackPool::deallocate(ctx::stack_context &sc) noexcept {
  char *top = static_cast<char *>(sc.sp);
  free_.push_back(base_ + static_cast<size_t>(top - base_) / slot_ * slot_);
}

namespace {
struct PooledStack { // the allocator handle Boost.Context copies into each fiber
  StackPool *pool;
  ctx::stack_context allocate() { return pool->allocate(); }
  void deallocate(ctx::stack_context &sc) noexcept { pool->deallocate(sc); }
};
} // namespace

void Fiber::start(StackPool &pool, void (*entry)(void *), void *arg) {
  fiber_ = ctx::callcc(std::allocator_arg, PooledStack{&pool}, [this, entry, arg](ctx::continuation &&scheduler) {
    scheduler_ = std::move(scheduler);
    entry(arg);
    return std::move(scheduler_);
  });
}

} // namespace hs_emu

extern "C" double hs_emu_measure_fiber_round_trip(long n) {
  std::lock_guard<std::recursive_mutex> lock(hs_emu::device_mutex());
  static hs_emu::StackPool pool(64 << 10, 2);
  struct Loop {
    hs_emu::Fiber fiber;
    long left;
    static void body(void *p) {
      Loop *l = static_cast<Loop *>(p);
      while (l->left-- > 0) l->fiber.suspend();
    }
  } loop;
  loop.left = n;
  loop.fiber.start(pool, Loop::body, &loop); // runs to the first suspend
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; i++) loop.fiber.resume();
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  return ns / static_cast<double>(n);
}
