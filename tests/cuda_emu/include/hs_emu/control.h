// Emulator-only controls for tests (tests only; tests/cuda_emu/). Not part of CUDA: code that must
// also build with nvcc never includes this header.
#ifndef HS_EMU_CONTROL_H
#define HS_EMU_CONTROL_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Reseeds the generator that orders threads between barriers, blocks of a grid and runnable
// stream heads (the environment variable HS_CUDA_EMU_SEED sets the first seed; default 1).
void hs_emu_set_seed(uint64_t seed);
uint64_t hs_emu_seed(void);
// The order of runnable stream heads: 0 = drawn at random (default), 1 = the earliest-created stream
// first (HS_CUDA_EMU_SCHEDULE = "random" | "priority"; runtime/streams.h says why).
void hs_emu_set_schedule(int priority);
// The fast path for threads that never wait (runtime/block.cc): 1 = on (default), 0 = off
// (HS_CUDA_EMU_FAST_PATH sets the first value). Results are the same either way.
void hs_emu_set_fast_path(int on);
int hs_emu_fast_path(void);

// Counters since the start of the process, for measurements.
struct hs_emu_stats {
  uint64_t kernels;        // kernels executed
  uint64_t blocks;         // blocks executed
  uint64_t threads;        // emulated threads executed
  uint64_t fiber_switches; // switches into an emulated thread and back count as two
  uint64_t loop_blocks;    // blocks run on the fast path as a loop, no thread of them having waited
  uint64_t chained_threads; // threads started by the fiber of the thread that exited before them
  uint64_t work_items;     // stream work items executed (kernels, copies, memsets, records, waits)
  uint64_t graph_launches; // cudaGraphLaunch calls
  uint64_t graph_nodes;    // work items those launches enqueued
  uint64_t graph_captures; // capture sequences ended with a graph (cudaStreamEndCapture)
  uint64_t kernel_launches; // kernels launched by the host outside a capture (graphs' kernels: graph_nodes)
};
void hs_emu_get_stats(struct hs_emu_stats *out);

// The fiber layer alone: n round trips into a fiber and back; returns nanoseconds per round trip.
double hs_emu_measure_fiber_round_trip(long n);

#ifdef __cplusplus
}
#endif
#endif
