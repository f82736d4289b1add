/* Device side of the per-update scalars' slots (src/backend/cuda/cuda_slots.h): a kernel launched
 * inside a graph region reads such a value from its slot, an eager launch takes its argument. */
#ifndef HS_KERNELS_SLOTS_CUH
#define HS_KERNELS_SLOTS_CUH

#include "backend/cuda/cuda_slots.h"

template <class T> __device__ __forceinline__ T hs_slot(const T *slot, T value) { return slot ? *slot : value; }

/* key and first_sample from the dropout slot when there is one */
__device__ __forceinline__ void hs_dropout_slot_read(const hs_dropout_slot *s, uint64_t &key, int64_t &first_sample) {
  if (s) {
    key = s->key;
    first_sample = s->first_sample;
  }
}

/* A kernel's argument struct with fields key, first_sample and slot (the fused dropouts'): the slot's
 * values into the kernel's copy, at its start, so the per-element draws read registers */
template <class S> __device__ __forceinline__ void hs_dropout_slot_resolve(S &s) {
  hs_dropout_slot_read(s.slot, s.key, s.first_sample);
  s.slot = nullptr;
}

#endif
