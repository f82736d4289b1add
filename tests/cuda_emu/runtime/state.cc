// Process-wide state of the emulated CUDA device: see state.h.
#include "state.h"
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hs_emu {

hs_emu_stats g_stats;

static uint64_t env_u64(const char *name, uint64_t fallback) {
  const char *s = getenv(name);
  if (s == nullptr || *s == '\0') return fallback;
  char *end = nullptr;
  const unsigned long long v = strtoull(s, &end, 0);
  if (*end != '\0') {
    fprintf(stderr, "hs_cuda_emu: %s=%s is not a number\n", name, s);
    abort();
  }
  return v;
}

const Config &config() {
  static const Config c = [] {
    Config k;
    k.seed = env_u64("HS_CUDA_EMU_SEED", 1);
    k.mem_bytes = static_cast<size_t>(env_u64("HS_CUDA_EMU_MEM_MB", 4096)) << 20;
    k.stack_bytes = static_cast<size_t>(env_u64("HS_CUDA_EMU_STACK_KB", 64)) << 10;
    k.devices = static_cast<int>(env_u64("HS_CUDA_EMU_DEVICES", 1));
    k.trace = env_u64("HS_CUDA_EMU_TRACE", 0) != 0;
    k.fast_path = env_u64("HS_CUDA_EMU_FAST_PATH", 1) != 0;
    const char *layout = getenv("HS_CUDA_EMU_WMMA_LAYOUT");
    k.wmma_shuffled = layout != nullptr && strcmp(layout, "shuffled") == 0;
    if (layout != nullptr && *layout != '\0' && !k.wmma_shuffled && strcmp(layout, "rowmajor") != 0) {
      fprintf(stderr, "hs_cuda_emu: HS_CUDA_EMU_WMMA_LAYOUT=%s: the fragment layouts are rowmajor (the default) or "
              "shuffled (docs/gpu-emulation.md)\n", layout);
      abort();
    }
    if (k.devices > kMaxDevices) {
      fprintf(stderr, "hs_cuda_emu: HS_CUDA_EMU_DEVICES=%d: the emulated node has at most %d GPUs\n", k.devices,
              kMaxDevices);
      k.devices = kMaxDevices;
    }
    if (k.stack_bytes < (16u << 10)) k.stack_bytes = 16u << 10;
    return k;
  }();
  return c;
}

} // namespace hs_emu

// mma.h's question, answered once: the fragments' layouts
namespace nvcuda {
namespace wmma {
namespace emu {
bool wmma_layout_shuffled() {
  static const bool shuffled = hs_emu::config().wmma_shuffled;
  return shuffled;
}
} // namespace emu
} // namespace wmma
} // namespace nvcuda

namespace hs_emu {

static int g_fast_path = -1; // -1: config().fast_path
bool fast_path_enabled() {
  if (g_fast_path < 0) g_fast_path = config().fast_path ? 1 : 0;
  return g_fast_path != 0;
}

static int g_current_device = 0;
int current_device() { return g_current_device; }
void set_current_device(int device) { g_current_device = device; }

std::recursive_mutex &device_mutex() {
  static std::recursive_mutex m;
  return m;
}

// splitmix64 (Steele, Lea, Flood 2014): small, fast, and every seed gives a full-period stream.
static uint64_t g_seed_used = 0;
static uint64_t g_rng_state = 0;
static bool g_rng_ready = false;

static void seed_rng(uint64_t seed) {
  g_seed_used = seed;
  g_rng_state = seed;
  g_rng_ready = true;
}

uint64_t random_below(uint64_t n) {
  if (!g_rng_ready) seed_rng(config().seed);
  uint64_t z = (g_rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return n <= 1 ? 0 : static_cast<uint64_t>((static_cast<unsigned __int128>(z) * n) >> 64);
}

uint64_t current_seed() {
  if (!g_rng_ready) seed_rng(config().seed);
  return g_seed_used;
}

static thread_local cudaError_t t_last_error = cudaSuccess;

cudaError_t record_error(cudaError_t e) {
  if (e != cudaSuccess) t_last_error = e;
  return e;
}
cudaError_t take_last_error() {
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}
cudaError_t peek_last_error() { return t_last_error; }

void fatal(const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "hs_cuda_emu: %s [HS_CUDA_EMU_SEED=%llu]\n", msg, static_cast<unsigned long long>(current_seed()));
  fflush(stderr);
  abort();
}

} // namespace hs_emu

extern "C" void hs_emu_set_seed(uint64_t seed) {
  std::lock_guard<std::recursive_mutex> lock(hs_emu::device_mutex());
  hs_emu::seed_rng(seed);
}

extern "C" void hs_emu_set_fast_path(int on) {
  std::lock_guard<std::recursive_mutex> lock(hs_emu::device_mutex());
  hs_emu::g_fast_path = on != 0;
}

extern "C" int hs_emu_fast_path(void) {
  std::lock_guard<std::recursive_mutex> lock(hs_emu::device_mutex());
  return hs_emu::fast_path_enabled() ? 1 : 0;
}

extern "C" uint64_t hs_emu_seed(void) {
  std::lock_guard<std::recursive_mutex> lock(hs_emu::device_mutex());
  return hs_emu::current_seed();
}

extern "C" void hs_emu_get_stats(struct hs_emu_stats *out) {
  std::lock_guard<std::recursive_mutex> lock(hs_emu::device_mutex());
  *out = hs_emu::g_stats;
}
