// Fibers for emulated GPU threads (tests only; tests/cuda_emu/): Boost.Context continuations
// (callcc) on stacks taken from one reserved region, each stack with a guard page below it, so a
// stack overflow faults at once and is reported (fault.cc). POSIX ucontext would be ~30x slower
// (it saves the signal mask with a system call on every switch).
#ifndef HS_EMU_FIBER_H
#define HS_EMU_FIBER_H
#include <cstddef>
#include <vector>
#include <boost/context/continuation.hpp>

namespace hs_emu {

class StackPool {
public:
  StackPool(size_t stack_bytes, size_t max_stacks);
  boost::context::stack_context allocate();
  void deallocate(boost::context::stack_context &sc) noexcept;
  const char *region() const { return base_; }
  size_t region_bytes() const { return slot_ * max_; }

private:
  static constexpr size_t kColorBytes = 16 << 10;
  char *base_;
  size_t stack_bytes_, slot_, max_, next_ = 0;
  std::vector<char *> free_;
};

class Fiber {
public:
  // Creates the fiber and runs entry(arg) on it until it first calls suspend() or returns.
  void start(StackPool &pool, void (*entry)(void *), void *arg);
  void resume() { fiber_ = fiber_.resume(); }           // scheduler -> fiber, until it suspends or ends
  void suspend() { scheduler_ = scheduler_.resume(); }  // fiber -> scheduler
  bool finished() const { return !fiber_; }

private:
  boost::context::continuation fiber_, scheduler_;
};

} // namespace hs_emu
#endif
