// Streams and events of the emulated CUDA device: see streams.h.
#include "streams.h"
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include "graphs.h"
#include "memory.h"
#include "state.h"

namespace hs_emu {
namespace {

struct Registry {
  std::vector<CUstream_st *> streams; // with queued work possible (the legacy stream first)
  std::set<const void *> known_streams, known_events;
  CUstream_st *legacy = nullptr;
  int next_id = 0;
};

Registry &registry() {
  static Registry *r = [] {
    Registry *g = new Registry; // never freed, like the objects it lists
    g->legacy = new CUstream_st{g->next_id++, true, false, false, 0, 0, {}, nullptr};
    g->streams.push_back(g->legacy);
    return g;
  }();
  return *r;
}

bool head_runnable(const CUstream_st *s) {
  if (s->queue.empty()) return false;
  for (const Dep &d : s->queue.front().deps)
    if (!complete(d)) return false;
  return true;
}

void run_head(CUstream_st *s) {
  WorkItem item = std::move(s->queue.front());
  s->queue.pop_front();
  if (config().trace)
    fprintf(stderr, "hs_cuda_emu: run stream %d #%" PRIu64 ": %s\n", s->id, item.seq, item.label.c_str());
  item.run(); // inside the caller's DeviceAccess
  s->done = item.seq;
  g_stats.work_items++;
}

// 1: HS_CUDA_EMU_SCHEDULE = "priority" (streams.h); read once, changed by hs_emu_set_schedule.
int &schedule_priority() {
  static int priority = [] {
    const char *s = getenv("HS_CUDA_EMU_SCHEDULE");
    if (s == nullptr || *s == 0 || strcmp(s, "random") == 0) return 0;
    if (strcmp(s, "priority") == 0) return 1;
    fatal("HS_CUDA_EMU_SCHEDULE must be \"random\" or \"priority\"");
  }();
  return priority;
}

} // namespace

CUstream_st *resolve_stream(cudaStream_t s, cudaError_t *err) {
  Registry &r = registry();
  *err = cudaSuccess;
  if (s == nullptr || s == cudaStreamLegacy) return r.legacy;
  if (s == cudaStreamPerThread) {
    *err = cudaErrorNotSupported;
    return nullptr;
  }
  if (r.known_streams.count(s) == 0 || s->destroyed) {
    *err = cudaErrorInvalidResourceHandle;
    return nullptr;
  }
  return s;
}

CUstream_st *new_stream(unsigned flags) {
  Registry &r = registry();
  CUstream_st *s = new CUstream_st{r.next_id++, false, (flags & cudaStreamNonBlocking) == 0, false, 0, 0, {}, nullptr};
  r.streams.push_back(s);
  r.known_streams.insert(s);
  return s;
}

CUevent_st *resolve_event(cudaEvent_t e) {
  Registry &r = registry();
  if (e == nullptr || r.known_events.count(e) == 0 || e->destroyed) return nullptr;
  return e;
}

CUevent_st *new_event(unsigned flags) {
  CUevent_st *e = new CUevent_st{flags, false, nullptr, 0, 0, false, {}, nullptr, nullptr, 0};
  registry().known_events.insert(e);
  return e;
}

uint64_t enqueue(CUstream_st *s, std::string label, std::function<void()> run, std::vector<Dep> deps) {
  Registry &r = registry();
  if (s->capture) { // recorded, not run: the capture's order stands for the dependencies
    capture_node(s, std::move(label), std::move(run));
    return 0;
  }
  if (s->legacy) { // waits for all earlier work of every blocking stream
    for (CUstream_st *t : r.streams)
      if (t != s && t->blocking && t->enqueued > t->done) deps.push_back(Dep{t, t->enqueued});
  } else if (s->blocking && r.legacy->enqueued > r.legacy->done) { // waits for earlier legacy-stream work
    deps.push_back(Dep{r.legacy, r.legacy->enqueued});
  }
  const uint64_t seq = ++s->enqueued;
  s->queue.push_back(WorkItem{seq, std::move(deps), std::move(label), std::move(run)});
  return seq;
}

bool complete(const Dep &d) { return d.stream->done >= d.seq; }

void run_one() {
  Registry &r = registry();
  std::vector<CUstream_st *> runnable;
  for (CUstream_st *s : r.streams)
    if (head_runnable(s)) runnable.push_back(s);
  if (!runnable.empty() && schedule_priority()) { // only the earliest-created stream's head
    CUstream_st *first = runnable[0];
    for (CUstream_st *s : runnable) first = s->id < first->id ? s : first;
    runnable.assign(1, first);
  }
  if (!runnable.empty()) {
    DeviceAccess access;
    run_head(runnable[random_below(runnable.size())]);
  }
  // forget destroyed streams once drained
  for (size_t i = 0; i < r.streams.size();) {
    CUstream_st *s = r.streams[i];
    if (s->destroyed && s->queue.empty()) {
      r.streams[i] = r.streams.back();
      r.streams.pop_back();
    } else {
      i++;
    }
  }
}

void run_until(const std::function<bool()> &done) {
  // Every dependency points at work issued earlier, so the oldest queued item is always runnable:
  // while work is queued, run_one makes progress.
  if (done()) return;
  DeviceAccess access; // one pair of mprotect calls for the whole synchronisation
  while (!done()) {
    if (device_idle()) fatal("internal: waiting for work that was never queued");
    run_one();
  }
}

bool device_idle() {
  for (const CUstream_st *s : registry().streams)
    if (!s->queue.empty()) return false;
  return true;
}

} // namespace hs_emu

extern "C" void hs_emu_set_schedule(int priority) {
  std::lock_guard<std::recursive_mutex> lock(hs_emu::device_mutex());
  hs_emu::schedule_priority() = priority != 0;
}
