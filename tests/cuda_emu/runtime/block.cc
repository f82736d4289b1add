// Execution of one kernel on the emulated CUDA device: see block.h.
// The rules checked here follow the CUDA C++ Programming Guide ("Synchronization Functions", "Warp
// Shuffle Functions", "Warp Vote Functions") and the PTX ISA (bar.sync, bar.warp.sync, shfl.sync,
// vote.sync): __syncthreads waits for every thread of the block at the same barrier; a warp-level
// function waits for every non-exited thread named in its mask to call the same function with the
// same mask; warps are 32 consecutive threads in linear thread order.
#include "block.h"
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <vector>
#include "fault.h"
#include "fiber.h"
#include "shared_memory.h"
#include "state.h"

namespace hs_emu {

ThreadCoords *g_cur = nullptr;

namespace {

enum class State : unsigned char { Unstarted, Running, Ready, Yielded, AtBarrier, AtWarp, Exited };

struct Worker;

struct EmuThread : ThreadCoords {
  int index = 0, lane = 0, warp = 0;
  State state = State::Unstarted;
  Worker *worker = nullptr;
  const char *file = nullptr; // where it waits
  int line = 0;
  BarrierKind barrier = BarrierKind::Plain;
  int predicate = 0, barrier_result = 0;
  WarpOp op = WarpOp::SyncWarp;
  unsigned mask = 0;
  int b = 0, width = 32;
  uint64_t value = 0, result = 0;
  const char *collective = nullptr; // WarpOp::Collective: its name, completion and this lane's arguments
  CollectiveFn complete = nullptr;
  void *args = nullptr;
};

// A fiber that runs emulated threads one after another. A thread keeps its worker while it waits;
// when it exits, the worker runs the next thread that starts, so no thread costs a fiber creation.
// The fast path (HS_CUDA_EMU_FAST_PATH, on by default): when the thread drawn next has not started,
// the worker draws it and runs it itself, without switching back to the scheduler, so a block whose
// threads never wait (an element-wise kernel) is one plain loop on one fiber: two switches per block,
// not per thread. The draw is the scheduler's own (same generator calls, same order), so results
// are bit-identical with the fast path off; and every thread still runs on a fiber, so a barrier or
// warp function reached on the fast path (data-dependent) just suspends it: the block goes on under
// the scheduler from that thread on.
struct Worker {
  Fiber fiber;
  EmuThread *thread = nullptr;
};

const char *op_name(WarpOp op) {
  switch (op) {
  case WarpOp::SyncWarp: return "__syncwarp";
  case WarpOp::ShflIdx: return "__shfl_sync";
  case WarpOp::ShflUp: return "__shfl_up_sync";
  case WarpOp::ShflDown: return "__shfl_down_sync";
  case WarpOp::ShflXor: return "__shfl_xor_sync";
  case WarpOp::Ballot: return "__ballot_sync";
  case WarpOp::Any: return "__any_sync";
  case WarpOp::All: return "__all_sync";
  case WarpOp::Collective: return "a warp-collective function";
  }
  return "?";
}

bool is_shuffle(WarpOp op) {
  return op == WarpOp::ShflIdx || op == WarpOp::ShflUp || op == WarpOp::ShflDown || op == WarpOp::ShflXor;
}

// The source lane of a shuffle, exactly as PTX ISA "shfl.sync" defines it; CUDA's __shfl_*_sync pass
// c = ((32 - width) << 8) | clamp, with clamp 0 for up and 0x1f otherwise.
int shuffle_source(WarpOp op, int lane, int b, int width) {
  const int segmask = (32 - width) & 31;
  const int clamp = op == WarpOp::ShflUp ? 0 : 31;
  const int max_lane = (lane & segmask) | (clamp & ~segmask);
  const int min_lane = lane & segmask;
  const int bval = b & 31;
  int j = lane;
  bool in_range = true;
  switch (op) {
  case WarpOp::ShflUp: j = lane - bval; in_range = j >= max_lane; break;
  case WarpOp::ShflDown: j = lane + bval; in_range = j <= max_lane; break;
  case WarpOp::ShflXor: j = lane ^ bval; in_range = j <= max_lane; break;
  default: j = min_lane | (bval & ~segmask); break;
  }
  return in_range ? j : lane; // out of the segment: the caller's own value
}

// Visits every block once in a seeded random order.
class BlockOrder {
public:
  explicit BlockOrder(uint64_t n) : n_(n) {
    if (n <= (1u << 22)) {
      perm_.resize(n);
      for (uint64_t i = 0; i < n; i++) perm_[i] = static_cast<uint32_t>(i);
      for (uint64_t i = n; i > 1; i--) std::swap(perm_[i - 1], perm_[random_below(i)]);
    } else { // a random stride coprime to n visits each index once
      do a_ = 1 + random_below(n - 1); while (gcd(a_, n) != 1);
      c_ = random_below(n);
    }
  }
  uint64_t operator[](uint64_t k) const {
    if (!perm_.empty()) return perm_[k];
    return static_cast<uint64_t>((static_cast<unsigned __int128>(a_) * k + c_) % n_);
  }

private:
  static uint64_t gcd(uint64_t x, uint64_t y) { return y == 0 ? x : gcd(y, x % y); }
  uint64_t n_, a_ = 1, c_ = 0;
  std::vector<uint32_t> perm_;
};

class Executor {
public:
  Executor() : stacks_(config().stack_bytes, 1024 + 16) {}
  void run(const KernelLaunch &launch);

  // Called by emulated threads (through the functions of device_builtins.h).
  void wait(EmuThread &t) { t.worker->fiber.suspend(); }
  SharedMemory &shared() { return shared_; }
  size_t shared_limit() const { return launch_->shared_limit; }
  int collective_waiting(int warp) const { return collective_waiters_[warp]; } // lanes in a collective now
  [[noreturn]] void kernel_error(const EmuThread *t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

private:
  void run_block(uint3 bid);
  EmuThread &switch_to(EmuThread &t);
  bool chain_next(Worker &w);
  void on_exit(EmuThread &t);
  void on_barrier(EmuThread &t);
  void on_warp(EmuThread &t);
  void try_complete(int warp, unsigned mask, WarpOp op);
  void try_collective(const EmuThread &t);
  void check_collective_divergence(int warp);
  [[noreturn]] void report_deadlock();
  static void worker_main(void *worker);

  const KernelLaunch *launch_ = nullptr;
  uint3 bid_{0, 0, 0};
  int n_ = 0, exited_ = 0, first_exited_ = -1;
  int pending_ = -1;          // a thread the worker drew but could not run (it waits on its own fiber)
  bool exit_handled_ = false; // the worker already did on_exit for the thread that stopped
  bool waited_ = false;       // a thread of this block waited (barrier, warp function, yield)
  std::vector<EmuThread> threads_;
  std::vector<int> ready_;           // runnable threads; the next one is drawn at random
  std::vector<int> barrier_waiters_; // threads at __syncthreads
  std::vector<int> warp_waiters_;    // per warp: threads in a warp-level function
  std::vector<int> collective_waiters_; // per warp: those of them in a warp-collective one
  StackPool stacks_;
  std::deque<Worker> workers_; // stable addresses
  std::vector<Worker *> idle_;
  SharedMemory shared_;
};

Executor &executor() {
  static Executor *e = new Executor; // never destroyed: its fibers are suspended forever
  return *e;
}

EmuThread &current(const char *what) {
  if (g_cur == nullptr) outside_kernel(what);
  return *static_cast<EmuThread *>(g_cur);
}

void Executor::worker_main(void *p) {
  Worker *w = static_cast<Worker *>(p);
  Executor &e = executor();
  for (;;) {
    do {
      e.launch_->body();
      w->thread->state = State::Exited;
    } while (e.chain_next(*w));
    w->fiber.suspend();
  }
}

// On the worker, after its thread exited: does what the scheduler would do next (on_exit, draw the
// next runnable thread); if that thread has not started, takes it on this worker and returns true.
// Otherwise the draw is left in pending_ for the scheduler and the worker suspends.
bool Executor::chain_next(Worker &w) {
  if (!fast_path_enabled()) return false;
  on_exit(*w.thread);
  exit_handled_ = true;
  if (ready_.empty()) return false;
  const size_t k = random_below(ready_.size());
  const int id = ready_[k];
  ready_[k] = ready_.back();
  ready_.pop_back();
  EmuThread &t = threads_[id];
  if (t.state != State::Unstarted) {
    pending_ = id;
    return false;
  }
  idle_.pop_back(); // on_exit gave this worker back last
  w.thread = &t;
  t.worker = &w;
  t.state = State::Running;
  g_cur = &t;
  exit_handled_ = false;
  g_stats.chained_threads++;
  return true;
}

void Executor::run(const KernelLaunch &launch) {
  fault_prepare_thread();
  launch_ = &launch;
  g_running_kernel = &launch;
  const dim3 g = launch.grid, b = launch.block;
  n_ = static_cast<int>(b.x * b.y * b.z);
  if (threads_.size() < static_cast<size_t>(n_)) threads_.resize(n_);
  uint3 tid{0, 0, 0}; // linear thread index = x + y * Dx + z * Dx * Dy (Programming Guide, "Thread Hierarchy")
  for (int i = 0; i < n_; i++) {
    EmuThread &t = threads_[i];
    t.tid = tid;
    t.bdim = b;
    t.gdim = g;
    t.index = i;
    t.lane = i % 32;
    t.warp = i / 32;
    if (++tid.x == b.x) {
      tid.x = 0;
      if (++tid.y == b.y) {
        tid.y = 0;
        tid.z++;
      }
    }
  }
  const uint64_t blocks = static_cast<uint64_t>(g.x) * g.y * g.z;
  const BlockOrder order(blocks);
  for (uint64_t k = 0; k < blocks; k++) {
    const uint64_t id = order[k];
    run_block(uint3{static_cast<unsigned>(id % g.x), static_cast<unsigned>(id / g.x % g.y),
                    static_cast<unsigned>(id / (static_cast<uint64_t>(g.x) * g.y))});
  }
  g_stats.kernels++;
  g_stats.blocks += blocks;
  g_stats.threads += blocks * static_cast<uint64_t>(n_);
  g_running_kernel = nullptr;
  launch_ = nullptr;
}

void Executor::run_block(uint3 bid) {
  bid_ = bid;
  for (int i = 0; i < n_; i++) {
    EmuThread &t = threads_[i];
    t.bid = bid;
    t.state = State::Unstarted;
    t.worker = nullptr;
    ready_.push_back(i);
  }
  exited_ = 0;
  first_exited_ = -1;
  pending_ = -1;
  exit_handled_ = false;
  waited_ = false;
  barrier_waiters_.clear();
  warp_waiters_.assign((n_ + 31) / 32, 0);
  collective_waiters_.assign((n_ + 31) / 32, 0);
  shared_.begin_block(launch_->dynamic_shared, launch_->shared_limit);
  while (pending_ >= 0 || !ready_.empty()) {
    int id = pending_;
    if (id >= 0) {
      pending_ = -1;
    } else {
      const size_t k = random_below(ready_.size());
      id = ready_[k];
      ready_[k] = ready_.back();
      ready_.pop_back();
    }
    EmuThread &t = switch_to(threads_[id]); // the thread that stopped: a later one if the worker chained
    if (t.state != State::Exited) waited_ = true;
    switch (t.state) {
    case State::Exited:
      if (!exit_handled_) on_exit(t);
      exit_handled_ = false;
      break;
    case State::AtBarrier: on_barrier(t); break;
    case State::AtWarp: on_warp(t); break;
    case State::Yielded:
      t.state = State::Ready;
      ready_.push_back(t.index);
      break;
    default: fatal("emulated thread stopped in an unexpected state");
    }
  }
  if (exited_ != n_) report_deadlock();
  if (!waited_ && fast_path_enabled()) g_stats.loop_blocks++;
}

EmuThread &Executor::switch_to(EmuThread &t) {
  const bool fresh = t.state == State::Unstarted;
  t.state = State::Running;
  g_cur = &t;
  Worker *w;
  if (!fresh) {
    w = t.worker;
    w->fiber.resume();
  } else if (!idle_.empty()) {
    w = idle_.back();
    idle_.pop_back();
    w->thread = &t;
    t.worker = w;
    w->fiber.resume();
  } else {
    workers_.emplace_back();
    w = &workers_.back();
    w->thread = &t;
    t.worker = w;
    w->fiber.start(stacks_, worker_main, w);
  }
  g_cur = nullptr;
  g_stats.fiber_switches += 2;
  return *w->thread;
}

void Executor::on_exit(EmuThread &t) {
  idle_.push_back(t.worker);
  t.worker = nullptr;
  exited_++;
  if (first_exited_ < 0) first_exited_ = t.index;
  if (!barrier_waiters_.empty()) {
    const EmuThread &w = threads_[barrier_waiters_[0]];
    kernel_error(&t,
                 "this thread returned from the kernel while %zu thread(s) of its block wait at __syncthreads() at "
                 "%s:%d; every thread of a block must reach each __syncthreads (CUDA Programming Guide: "
                 "__syncthreads in conditional code only if the condition is the same in the whole block)",
                 barrier_waiters_.size(), w.file, w.line);
  }
  // lanes in a warp-level function no longer wait for this one (a warp-collective one cannot go on)
  for (int l = 0; l < 32 && warp_waiters_[t.warp] > 0; l++) {
    const int i = t.warp * 32 + l;
    if (i >= n_ || threads_[i].state != State::AtWarp) continue;
    if (threads_[i].op == WarpOp::Collective) {
      try_collective(threads_[i]);
    } else {
      try_complete(t.warp, threads_[i].mask, threads_[i].op);
    }
  }
}

void Executor::on_barrier(EmuThread &t) {
  if (exited_ > 0) {
    const EmuThread &e = threads_[first_exited_];
    kernel_error(&t,
                 "__syncthreads() at %s:%d is reached after %d thread(s) of the block returned from the kernel "
                 "(first: thread (%u,%u,%u)); every thread of a block must reach each __syncthreads (CUDA "
                 "Programming Guide: __syncthreads in conditional code only if the condition is the same in the "
                 "whole block)",
                 t.file, t.line, exited_, e.tid.x, e.tid.y, e.tid.z);
  }
  if (!barrier_waiters_.empty()) {
    const EmuThread &w = threads_[barrier_waiters_[0]];
    if (w.line != t.line || (w.file != t.file && strcmp(w.file, t.file) != 0) || w.barrier != t.barrier)
      kernel_error(&t,
                   "this thread waits at the barrier at %s:%d while thread (%u,%u,%u) waits at the one at %s:%d: "
                   "threads of a block must reach the same __syncthreads (a barrier in divergent code)",
                   t.file, t.line, w.tid.x, w.tid.y, w.tid.z, w.file, w.line);
  }
  barrier_waiters_.push_back(t.index);
  if (static_cast<int>(barrier_waiters_.size()) < n_) return;
  int count = 0;
  for (int i : barrier_waiters_) count += threads_[i].predicate != 0;
  for (int i : barrier_waiters_) {
    EmuThread &u = threads_[i];
    switch (u.barrier) {
    case BarrierKind::Plain: u.barrier_result = 0; break;
    case BarrierKind::Count: u.barrier_result = count; break;
    case BarrierKind::And: u.barrier_result = count == n_; break;
    case BarrierKind::Or: u.barrier_result = count != 0; break;
    }
    u.state = State::Ready;
    ready_.push_back(i);
  }
  barrier_waiters_.clear();
}

void Executor::on_warp(EmuThread &t) {
  if (!(t.mask >> t.lane & 1u))
    kernel_error(&t, "%s at %s:%d with mask 0x%08x, which does not include the calling lane %d", op_name(t.op), t.file,
                 t.line, t.mask, t.lane);
  if (is_shuffle(t.op) && (t.width < 1 || t.width > 32 || (t.width & (t.width - 1)) != 0))
    kernel_error(&t, "%s at %s:%d: width %d is not a power of two in [1, 32]", op_name(t.op), t.file, t.line, t.width);
  warp_waiters_[t.warp]++;
  if (t.op == WarpOp::Collective) {
    collective_waiters_[t.warp]++;
    try_collective(t);
  } else {
    try_complete(t.warp, t.mask, t.op);
  }
  check_collective_divergence(t.warp);
}

// A warp-collective function (device_builtins.h, warp_collective) completes when all 32 lanes of the
// warp wait at the same call site; a lane that returned, or a partial last warp, can never join.
void Executor::try_collective(const EmuThread &t) {
  const int base = t.warp * 32;
  if (base + 32 > n_)
    kernel_error(&t,
                 "%s at %s:%d called by a partial warp: the block has %d threads, so warp %d has only %d lanes; it "
                 "is warp-collective and needs all 32 lanes of the warp (CUDA Programming Guide, \"Warp Matrix "
                 "Functions\")",
                 t.collective, t.file, t.line, n_, t.warp, n_ - base);
  for (int l = 0; l < 32; l++) {
    const EmuThread &u = threads_[base + l];
    if (u.state == State::Exited)
      kernel_error(&t,
                   "%s at %s:%d is waited for by lane %d, which returned from the kernel: it is warp-collective, "
                   "every lane of the warp must call it (CUDA Programming Guide, \"Warp Matrix Functions\")",
                   t.collective, t.file, t.line, l);
    if (u.state != State::AtWarp || u.op != WarpOp::Collective || u.complete != t.complete || u.line != t.line ||
        (u.file != t.file && strcmp(u.file, t.file) != 0))
      return; // still to come (or elsewhere: check_collective_divergence reports it)
  }
  void *args[32];
  for (int l = 0; l < 32; l++) args[l] = threads_[base + l].args;
  if (const char *err = t.complete(args))
    kernel_error(&threads_[base], "%s at %s:%d: %s", t.collective, t.file, t.line, err);
  for (int l = 0; l < 32; l++) {
    EmuThread &u = threads_[base + l];
    u.state = State::Ready;
    ready_.push_back(base + l);
    warp_waiters_[t.warp]--;
  }
  collective_waiters_[t.warp] -= 32;
}

// When every lane of a warp that is still running waits in a warp-level function and some wait in a
// warp-collective one, none of them can go on: lanes called the collective function in divergent code
// (at different call sites, or some in another warp-level function). Reported at once, naming both.
void Executor::check_collective_divergence(int warp) {
  if (collective_waiters_[warp] == 0) return; // (the common case: costs nothing for shuffles)
  const EmuThread *coll = nullptr, *other = nullptr;
  for (int l = 0; l < 32; l++) {
    const int i = warp * 32 + l;
    if (i >= n_) break;
    const EmuThread &u = threads_[i];
    if (u.state == State::Exited) continue;
    if (u.state != State::AtWarp) return; // a lane that can still arrive
    if (u.op == WarpOp::Collective && coll == nullptr) {
      coll = &u;
    } else if (other == nullptr && (coll == nullptr || u.op != WarpOp::Collective || u.line != coll->line ||
                                    strcmp(u.file, coll->file) != 0 || u.complete != coll->complete)) {
      other = &u;
    }
  }
  if (coll == nullptr) return;
  if (other == nullptr) return; // cannot happen: a complete collective was released
  const char *other_name = other->op == WarpOp::Collective ? other->collective : op_name(other->op);
  kernel_error(coll,
               "divergent warp-collective call: lane %d waits in %s at %s:%d while lane %d waits in %s at %s:%d; "
               "every lane of the warp must call it together, at the same place (CUDA Programming Guide, \"Warp "
               "Matrix Functions\")",
               coll->lane, coll->collective, coll->file, coll->line, other->lane, other_name, other->file,
               other->line);
}

void Executor::try_complete(int warp, unsigned mask, WarpOp op) {
  unsigned arrived = 0;
  for (int l = 0; l < 32; l++) {
    if (!(mask >> l & 1u)) continue;
    const int i = warp * 32 + l;
    if (i >= n_) continue; // a lane the (partial) last warp does not have
    const EmuThread &u = threads_[i];
    if (u.state == State::Exited) continue; // exited lanes are not waited for
    if (u.state != State::AtWarp || u.mask != mask || u.op != op) return; // still to come
    arrived |= 1u << l;
  }
  if (arrived == 0) return;
  EmuThread *lanes = &threads_[warp * 32];
  uint64_t ballot = 0;
  for (int l = 0; l < 32; l++)
    if ((arrived >> l & 1u) && lanes[l].value != 0) ballot |= 1ull << l;
  for (int l = 0; l < 32; l++) {
    if (!(arrived >> l & 1u)) continue;
    EmuThread &u = lanes[l];
    switch (op) {
    case WarpOp::SyncWarp: u.result = 0; break;
    case WarpOp::Ballot: u.result = ballot; break;
    case WarpOp::Any: u.result = ballot != 0; break;
    case WarpOp::All: u.result = ballot == arrived; break;
    default: {
      // Reading a lane that does not take part (not in the mask, exited, absent) is undefined: it
      // yields all-ones bytes (NaN / -1) here.
      const int j = shuffle_source(op, l, u.b, u.width);
      u.result = (arrived >> j & 1u) ? lanes[j].value : ~0ull;
    }
    }
  }
  for (int l = 0; l < 32; l++) {
    if (!(arrived >> l & 1u)) continue;
    lanes[l].state = State::Ready;
    ready_.push_back(warp * 32 + l);
    warp_waiters_[warp]--;
  }
}

void Executor::report_deadlock() {
  struct Group {
    const EmuThread *first;
    int count;
  };
  std::vector<Group> groups;
  for (int i = 0; i < n_; i++) {
    const EmuThread &t = threads_[i];
    if (t.state != State::AtBarrier && t.state != State::AtWarp) continue;
    bool found = false;
    for (Group &g : groups) {
      const EmuThread &f = *g.first;
      if (f.state == t.state && f.line == t.line && strcmp(f.file, t.file) == 0 &&
          (t.state == State::AtBarrier || (f.op == t.op && f.mask == t.mask && f.warp == t.warp))) {
        g.count++;
        found = true;
        break;
      }
    }
    if (!found) groups.push_back(Group{&t, 1});
  }
  std::string text;
  char line[512];
  for (size_t k = 0; k < groups.size() && k < 8; k++) {
    const EmuThread &f = *groups[k].first;
    if (f.state == State::AtBarrier)
      snprintf(line, sizeof line, "\n  %d thread(s) (first: thread (%u,%u,%u)) wait at __syncthreads() at %s:%d",
               groups[k].count, f.tid.x, f.tid.y, f.tid.z, f.file, f.line);
    else
      snprintf(line, sizeof line, "\n  %d thread(s) of warp %d (first: lane %d) wait at %s(mask 0x%08x) at %s:%d",
               groups[k].count, f.warp, f.lane, f.op == WarpOp::Collective ? f.collective : op_name(f.op), f.mask,
               f.file, f.line);
    text += line;
  }
  if (exited_ > 0) {
    snprintf(line, sizeof line, "\n  %d thread(s) returned from the kernel", exited_);
    text += line;
  }
  kernel_error(nullptr,
               "deadlock, no thread of the block can continue:%s\n  (__syncthreads waits for every thread of the "
               "block, a warp-level function for every non-exited lane of its mask calling it with the same mask)",
               text.c_str());
}

void Executor::kernel_error(const EmuThread *t, const char *fmt, ...) {
  char msg[6144];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char who[96] = "";
  if (t != nullptr) snprintf(who, sizeof who, ", thread (%u,%u,%u)", t->tid.x, t->tid.y, t->tid.z);
  fatal("error in kernel %s (launched at %s:%d), block (%u,%u,%u)%s: %s", launch_->site.kernel, launch_->site.file,
        launch_->site.line, bid_.x, bid_.y, bid_.z, who, msg);
}

} // namespace

void run_kernel(const KernelLaunch &launch) { executor().run(launch); }

void outside_kernel(const char *what) {
  fatal("%s used outside a kernel: host code has no emulated thread (launch kernels with HS_LAUNCH)", what);
}

int syncthreads(BarrierKind kind, int predicate, const char *file, int line) {
  EmuThread &t = current("__syncthreads");
  t.state = State::AtBarrier;
  t.barrier = kind;
  t.predicate = predicate;
  t.file = file;
  t.line = line;
  executor().wait(t);
  return t.barrier_result;
}

uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, int b, int width, const char *file, int line) {
  EmuThread &t = current(op_name(op));
  t.state = State::AtWarp;
  t.op = op;
  t.mask = mask;
  t.value = value;
  t.b = b;
  t.width = width;
  t.file = file;
  t.line = line;
  executor().wait(t);
  return t.result;
}

void warp_collective(const char *name, CollectiveFn complete, void *args, const char *file, int line) {
  EmuThread &t = current(name);
  t.state = State::AtWarp;
  t.op = WarpOp::Collective;
  t.mask = 0xffffffffu;
  t.collective = name;
  t.complete = complete;
  t.args = args;
  t.file = file;
  t.line = line;
  executor().wait(t);
}

void misaligned_vector(const void *p, size_t size, const char *type, const char *file, int line) {
  const EmuThread &t = current("a vector access");
  executor().kernel_error(&t,
                          "misaligned address %p: the %s access at %s:%d needs an address aligned to %zu bytes; a "
                          "GPU stops the kernel here (cudaErrorMisalignedAddress): take the vector path only where "
                          "every pointer is aligned (kernels/quads.cuh, hs_quads_aligned)",
                          p, type, file, line, size);
}

int collective_arrived() {
  const EmuThread &t = current("a warp-collective function");
  return executor().collective_waiting(t.warp);
}

void yield_point() {
  if (g_cur == nullptr) return; // an atomic in host code
  EmuThread &t = current("yield");
  t.state = State::Yielded;
  executor().wait(t);
}

void *block_shared(const void *key, size_t size, size_t align, const char *name) {
  EmuThread &t = current("HS_SHARED");
  Executor &e = executor();
  void *p = e.shared().static_var(key, size, align);
  if (p == nullptr)
    e.kernel_error(&t,
                   "shared memory variable %s (%zu bytes) does not fit: %zu bytes of static shared memory before it "
                   "and %zu of dynamic; CUDA allows 48 KiB of static shared memory and %zu bytes in all for this "
                   "launch (nvcc or the launch would refuse it)",
                   name, size, e.shared().static_bytes(), e.shared().dynamic_bytes(), e.shared_limit());
  return p;
}

void *dynamic_shared() {
  current("HS_DYNAMIC_SHARED");
  return executor().shared().dynamic_base();
}

} // namespace hs_emu
