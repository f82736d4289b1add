// NCCL stand-in of the emulated CUDA device, mapped onto MPI (tests only; tests/cuda_emu/): see
// include/nccl.h. Follows NVIDIA's NCCL documentation ("Communicator Creation and Management
// Functions", "Collective Communication Functions", "Group Calls", "Types"):
//   - ncclGetUniqueId makes a new random id at every call (random bytes from the system, not the
//     emulator's seed, so two ranks never invent the same id).
//   - ncclCommInitRank is collective over MPI_COMM_WORLD: every rank gathers every rank's arguments,
//     so all ranks agree on the answer. nranks must be the world size and rank the world rank (one
//     communicator of all ranks is what this stand-in offers), the id must come from ncclGetUniqueId,
//     and every rank must pass the same id bytes: a rank that made its own id instead of receiving rank
//     0's (MPI_Bcast) is reported on stderr and every rank gets ncclInvalidArgument. An id already used
//     for a communicator of this process is ncclInvalidUsage (NCCL: one ncclGetUniqueId per
//     communicator). Two ranks on one GPU (the same host name and the same PCI bus id of their current
//     device) are refused as NCCL 2.28 refuses them: each such rank logs, with NCCL_DEBUG=WARN (or INFO,
//     TRACE), "<host>:<pid>:<tid> [<dev>] init.cc:NNN NCCL WARN Duplicate GPU detected : rank R and rank S
//     both on CUDA device <bus id as hex>" and ncclGetLastError says the same; every rank gets
//     ncclInvalidUsage (a rank whose GPU is its own too: on NCCL it would fail or hang in the next
//     bootstrap step, here it fails at once). On success the communicator owns an MPI_Comm_dup of
//     MPI_COMM_WORLD.
//   - ncclAllReduce (sum, prod, max, min, avg) and ncclBroadcast of int8/uint8/int32/uint32/int64/
//     uint64/float16/bfloat16/float32/float64 are queued on the stream as one work item each. When the item runs (the
//     host synchronises) it reads the device buffer, runs the blocking MPI collective on the
//     duplicate communicator and writes the device buffer: sendbuff == recvbuff works in place. The
//     all-reduce is MPI_Reduce to rank 0 then MPI_Bcast, so every rank gets the same bits, as with NCCL.
//     float16/bfloat16 reduce pairwise as NCCL's device code does (__hadd, __hmul, __hmax, __hmin): each
//     partial result is the exact sum (product, max, min) of two 16-bit values rounded once to 16 bits
//     (nearest, ties to even; fp16 overflows to infinity); avg divides the 16-bit sum by the rank count
//     and rounds again. With 2 ranks that is one rounding of g0 + g1; the order of more ranks' partial
//     sums is MPI's (NCCL's depends on its ring/tree and chunking: neither promises one).
//     count == 0 queues nothing.
//   - Statuses: a communicator that is NULL, unknown, destroyed or aborted, a NULL or non-device buffer
//     (sendbuff on the root only, for a broadcast), an invalid type, operation or root are
//     ncclInvalidArgument, with the reason in ncclGetLastError; an invalid stream is
//     ncclUnhandledCudaError; ncclGroupEnd without ncclGroupStart is ncclInvalidUsage; MPI not
//     initialised is ncclInvalidUsage.
//   - ncclGroupStart / ncclGroupEnd only count nesting: each call is queued when it is made, which
//     NCCL allows (it promises nothing about when grouped work starts before ncclGroupEnd).
//   - ncclCommDestroy first runs the communicator's queued collectives (NCCL: it flushes them, as
//     ncclCommFinalize does), then frees the duplicate communicator. ncclCommAbort drops them: items
//     still queued do nothing when they run.
//   - Deadlock rule of the emulator (not of NCCL): a queued collective runs, and blocks in MPI, when
//     this rank synchronises, so the host must synchronise the device before any blocking MPI call of
//     its own while collectives are queued (otherwise the other rank's collective waits for this one,
//     which waits in the host's MPI call).
// A buffer range that is not inside one device allocation is reported and the process aborts (on a
// GPU the kernel would fault).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>
#include "graphs.h"
#include "memory.h"
#include "nccl.h"
#include "state.h"
#include "streams.h"

struct ncclComm {
  MPI_Comm mpi;
  int nranks, rank;
  bool destroyed, aborted;
  uint64_t pending; // queued collectives not run yet
};

namespace {

using namespace hs_emu;

constexpr char kIdMagic[8] = {'h', 's', 'N', 'C', 'C', 'L', 'i', 'd'};

struct Registry {
  std::set<const void *> comms; // never freed: a destroyed handle stays recognisable
  std::set<std::string> used_ids;
};

Registry &reg() {
  static Registry *r = new Registry;
  return *r;
}

thread_local std::string t_last_error;
thread_local int t_group_depth = 0;

#define NCCL_ENTER std::lock_guard<std::recursive_mutex> hs_emu_lock(::hs_emu::device_mutex())

ncclResult_t fail(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ncclResult_t fail(ncclResult_t r, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  t_last_error = msg;
  return r;
}

ncclComm *live_comm(ncclComm_t c) {
  if (c == nullptr || reg().comms.count(c) == 0 || c->destroyed) return nullptr;
  return c;
}

bool mpi_ready() {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  return inited && !finalized;
}

const char *type_name(ncclDataType_t t) {
  static const char *names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64",
                                "bfloat16"};
  return t >= 0 && t < ncclNumTypes ? names[t] : "?";
}

const char *op_name(ncclRedOp_t op) {
  static const char *names[] = {"sum", "prod", "max", "min", "avg"};
  return op >= 0 && op < ncclNumOps ? names[op] : "?";
}

// The MPI type of an NCCL type and its size, or MPI_DATATYPE_NULL when not implemented here.
MPI_Datatype mpi_type(ncclDataType_t t, size_t *size) {
  switch (t) {
  case ncclInt8: *size = 1; return MPI_INT8_T;
  case ncclUint8: *size = 1; return MPI_UINT8_T;
  case ncclInt32: *size = 4; return MPI_INT32_T;
  case ncclUint32: *size = 4; return MPI_UINT32_T;
  case ncclInt64: *size = 8; return MPI_INT64_T;
  case ncclUint64: *size = 8; return MPI_UINT64_T;
  case ncclFloat16: *size = 2; return MPI_UINT16_T; // the bits; reductions use the 16-bit ops below
  case ncclBfloat16: *size = 2; return MPI_UINT16_T;
  case ncclFloat32: *size = 4; return MPI_FLOAT;
  case ncclFloat64: *size = 8; return MPI_DOUBLE;
  default: *size = 0; return MPI_DATATYPE_NULL;
  }
}

// ---- 16-bit floating point, written here independently of hetseq's kernels ------------------------
// A value of a 16-bit format as a double (exact).
double half_value(uint16_t h, bool bf16) {
  if (bf16) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
  }
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 31) return m ? NAN : sign * INFINITY;
  return sign * (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
}

// x rounded once to the format: nearest, ties to even (significand 8 bits bf16, 11 bits fp16 with
// subnormals from 2^-24; fp16 from 65520 on is infinity). x is exact in double here: the sum, product,
// max or min of two 16-bit values (a bf16 sum of very different magnitudes rounds in double first, far
// below half a bf16 unit: the same result).
uint16_t half_bits(double x, bool bf16) {
  if (std::isnan(x)) return bf16 ? 0x7fc0 : 0x7e00;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  if (a == 0.0) return sign;
  if (std::isinf(a)) return sign | (bf16 ? 0x7f80 : 0x7c00);
  int e;
  std::frexp(a, &e); // a in [2^(e-1), 2^e)
  const int p = bf16 ? 8 : 11, emin = bf16 ? -126 : -14;
  const double q = std::ldexp(1.0, std::max(e - p, emin - p + 1)); // the unit in the last place
  const double r = std::nearbyint(a / q) * q;
  if (bf16) {
    const float f = static_cast<float>(r); // exact, or infinity past the range
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return static_cast<uint16_t>(sign | (u >> 16));
  }
  if (r > 65504.0) return sign | 0x7c00;
  if (r < std::ldexp(1.0, -14)) return static_cast<uint16_t>(sign | static_cast<uint16_t>(r * std::ldexp(1.0, 24)));
  int re;
  const double fr = std::frexp(r, &re); // r = fr·2^re, fr in [0.5, 1)
  const uint16_t mant = static_cast<uint16_t>(std::ldexp(fr, 11) - 1024.0);
  return static_cast<uint16_t>(sign | ((re - 1 + 15) << 10) | mant);
}

template <bool BF16, int OP> void half_reduce(void *in, void *inout, int *len, MPI_Datatype *) {
  const uint16_t *a = static_cast<const uint16_t *>(in);
  uint16_t *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; i++) {
    const double x = half_value(a[i], BF16), y = half_value(b[i], BF16);
    const double r = OP == ncclProd ? x * y : OP == ncclMax ? std::fmax(x, y) : OP == ncclMin ? std::fmin(x, y) : x + y;
    b[i] = half_bits(r, BF16);
  }
}

// The MPI reduction of a 16-bit type (made once; MPI_Op_create is local).
MPI_Op half_op(ncclDataType_t t, ncclRedOp_t op) {
  static MPI_Op ops[2][ncclNumOps];
  static bool made = false;
  if (!made) {
    MPI_Op_create(half_reduce<false, ncclSum>, 1, &ops[0][ncclSum]);
    MPI_Op_create(half_reduce<false, ncclProd>, 1, &ops[0][ncclProd]);
    MPI_Op_create(half_reduce<false, ncclMax>, 1, &ops[0][ncclMax]);
    MPI_Op_create(half_reduce<false, ncclMin>, 1, &ops[0][ncclMin]);
    MPI_Op_create(half_reduce<true, ncclSum>, 1, &ops[1][ncclSum]);
    MPI_Op_create(half_reduce<true, ncclProd>, 1, &ops[1][ncclProd]);
    MPI_Op_create(half_reduce<true, ncclMax>, 1, &ops[1][ncclMax]);
    MPI_Op_create(half_reduce<true, ncclMin>, 1, &ops[1][ncclMin]);
    ops[0][ncclAvg] = ops[0][ncclSum];
    ops[1][ncclAvg] = ops[1][ncclSum];
    made = true;
  }
  return ops[t == ncclBfloat16 ? 1 : 0][op];
}

ncclResult_t check_type(ncclDataType_t t, MPI_Datatype *mt, size_t *size) {
  if (t < 0 || t >= ncclNumTypes) return fail(ncclInvalidArgument, "invalid datatype %d", static_cast<int>(t));
  *mt = mpi_type(t, size);
  if (*mt == MPI_DATATYPE_NULL)
    return fail(ncclInvalidArgument, "datatype %s is not implemented by the emulator's NCCL stand-in", type_name(t));
  return ncclSuccess;
}

// A buffer must be device memory (NCCL checks the pointer); a range past its allocation is fatal.
ncclResult_t check_buffer(const char *call, const char *what, const void *p, size_t bytes) {
  if (p == nullptr) return fail(ncclInvalidArgument, "%s: %s is NULL", call, what);
  if (classify(p) != MemKind::Device)
    return fail(ncclInvalidArgument, "%s: %s %p is not a device pointer", call, what, p);
  if (!range_valid(MemKind::Device, p, bytes))
    fatal("%s: %s at %p (%zu bytes) is not inside one live device allocation; on a GPU the kernel would fault "
          "with an illegal address",
          call, what, p, bytes);
  return ncclSuccess;
}

// Each MPI call moves at most INT_MAX elements.
template <typename F> void in_chunks(size_t count, size_t elem, char *buf, F f) {
  const size_t step = static_cast<size_t>(INT_MAX);
  for (size_t off = 0; off < count; off += step) f(buf + off * elem, static_cast<int>(std::min(step, count - off)));
}

template <typename T> void divide(char *buf, size_t count, int n) {
  T *v = reinterpret_cast<T *>(buf);
  for (size_t i = 0; i < count; i++) v[i] = static_cast<T>(v[i] / static_cast<T>(n));
}

void run_allreduce(ncclComm *c, const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op) {
  size_t elem;
  const MPI_Datatype mt = mpi_type(t, &elem);
  std::vector<char> buf(count * elem);
  memcpy(buf.data(), send, buf.size());
  const bool half = t == ncclFloat16 || t == ncclBfloat16;
  const MPI_Op mop = half ? half_op(t, op)
                          : op == ncclProd ? MPI_PROD : op == ncclMax ? MPI_MAX : op == ncclMin ? MPI_MIN : MPI_SUM;
  in_chunks(count, elem, buf.data(), [&](char *p, int n) {
    // reduce to rank 0, then broadcast: every rank gets the same bits
    if (c->rank == 0)
      MPI_Reduce(MPI_IN_PLACE, p, n, mt, mop, 0, c->mpi);
    else
      MPI_Reduce(p, nullptr, n, mt, mop, 0, c->mpi);
    MPI_Bcast(p, n, mt, 0, c->mpi);
  });
  if (op == ncclAvg) {
    switch (t) {
    case ncclInt8: divide<int8_t>(buf.data(), count, c->nranks); break;
    case ncclUint8: divide<uint8_t>(buf.data(), count, c->nranks); break;
    case ncclInt32: divide<int32_t>(buf.data(), count, c->nranks); break;
    case ncclUint32: divide<uint32_t>(buf.data(), count, c->nranks); break;
    case ncclInt64: divide<int64_t>(buf.data(), count, c->nranks); break;
    case ncclUint64: divide<uint64_t>(buf.data(), count, c->nranks); break;
    case ncclFloat32: divide<float>(buf.data(), count, c->nranks); break;
    case ncclFloat64: divide<double>(buf.data(), count, c->nranks); break;
    case ncclFloat16:
    case ncclBfloat16: {
      uint16_t *v = reinterpret_cast<uint16_t *>(buf.data());
      const bool bf16 = t == ncclBfloat16;
      for (size_t i = 0; i < count; i++) v[i] = half_bits(half_value(v[i], bf16) / c->nranks, bf16);
      break;
    }
    default: break;
    }
  }
  memcpy(recv, buf.data(), buf.size());
}

void run_broadcast(ncclComm *c, const void *send, void *recv, size_t count, ncclDataType_t t, int root) {
  size_t elem;
  const MPI_Datatype mt = mpi_type(t, &elem);
  std::vector<char> buf(count * elem);
  if (c->rank == root) memcpy(buf.data(), send, buf.size());
  in_chunks(count, elem, buf.data(), [&](char *p, int n) { MPI_Bcast(p, n, mt, root, c->mpi); });
  memcpy(recv, buf.data(), buf.size());
}

// Queues a collective; the item does nothing if the communicator was aborted meanwhile.
void enqueue_collective(CUstream_st *s, ncclComm *c, const std::string &label, std::function<void()> run) {
  if (s->capture) { // a node of a graph: counted as queued at each launch (ncclCommDestroy flushes them)
    enqueue(s, label, [c, run] {
      if (!c->aborted) run();
      c->pending--;
    });
    capture_launch_hook(s, [c] { c->pending++; });
    return;
  }
  c->pending++;
  enqueue(s, label, [c, run] {
    if (!c->aborted) run();
    c->pending--;
  });
}

// NCCL's busIdToInt64: the hexadecimal digits of "0000:01:00.0", the separators skipped (0x1000).
int64_t bus_id_int64(int device) {
  char id[32];
  snprintf(id, sizeof id, "%04x:%02x:%02x.%x", 0, pci_bus(device), 0, 0);
  int64_t v = 0;
  for (const char *c = id; *c; c++) {
    const int ch = static_cast<unsigned char>(*c);
    if (isxdigit(ch)) v = v * 16 + (isdigit(ch) ? ch - '0' : tolower(ch) - 'a' + 10);
  }
  return v;
}

// NCCL_DEBUG at WARN or a more detailed level prints NCCL's warnings (unset: nothing is printed).
bool nccl_warns() {
  const char *d = getenv("NCCL_DEBUG");
  return d && (strcasecmp(d, "WARN") == 0 || strcasecmp(d, "INFO") == 0 || strcasecmp(d, "TRACE") == 0 ||
               strcasecmp(d, "ABORT") == 0);
}

} // namespace

extern "C" ncclResult_t ncclGetVersion(int *version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

extern "C" const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "unhandled cuda error";
  case ncclSystemError: return "unhandled system error";
  case ncclInternalError: return "internal error";
  case ncclInvalidArgument: return "invalid argument";
  case ncclInvalidUsage: return "invalid usage";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  default: return "unknown result code";
  }
}

extern "C" const char *ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return t_last_error.c_str();
}

extern "C" ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
  NCCL_ENTER;
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  static std::random_device rd;
  static uint64_t counter = 0;
  std::seed_seq seq{rd(), rd(), rd(), rd(), static_cast<unsigned>(getpid()), static_cast<unsigned>(++counter),
                    static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count())};
  std::mt19937_64 gen(seq);
  memcpy(uniqueId->internal, kIdMagic, sizeof kIdMagic);
  for (size_t i = sizeof kIdMagic; i < NCCL_UNIQUE_ID_BYTES; i += 8) {
    const uint64_t v = gen();
    memcpy(uniqueId->internal + i, &v, std::min<size_t>(8, NCCL_UNIQUE_ID_BYTES - i));
  }
  return ncclSuccess;
}

extern "C" ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  NCCL_ENTER;
  if (config().devices == 0) return fail(ncclUnhandledCudaError, "ncclCommInitRank: no CUDA device");
  if (!mpi_ready())
    return fail(ncclInvalidUsage, "ncclCommInitRank: the emulator's NCCL stand-in runs on MPI: call MPI_Init first");
  int world_size, world_rank;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  enum { kNullComm = 1, kBadRank = 2, kNotWorldSize = 4, kNotWorldRank = 8, kNotAnId = 16, kReused = 32 };
  struct Entry {
    char id[NCCL_UNIQUE_ID_BYTES];
    int nranks, rank, flags;
    char host[256]; // the node (NCCL: a hash of the host name)
    int64_t bus;    // the PCI bus id of the rank's current device, as NCCL compares it
  } mine;
  memset(&mine, 0, sizeof mine);
  memcpy(mine.id, commId.internal, NCCL_UNIQUE_ID_BYTES);
  gethostname(mine.host, sizeof mine.host - 1);
  mine.bus = bus_id_int64(current_device());
  mine.nranks = nranks;
  mine.rank = rank;
  mine.flags = (comm == nullptr ? kNullComm : 0) | (nranks < 1 || rank < 0 || rank >= nranks ? kBadRank : 0) |
               (nranks != world_size ? kNotWorldSize : 0) | (rank != world_rank ? kNotWorldRank : 0) |
               (memcmp(commId.internal, kIdMagic, sizeof kIdMagic) != 0 ? kNotAnId : 0) |
               (reg().used_ids.count(std::string(commId.internal, NCCL_UNIQUE_ID_BYTES)) ? kReused : 0);
  // collective: every rank learns every rank's arguments, so all give the same answer
  std::vector<Entry> all(static_cast<size_t>(world_size));
  MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
  std::string report;
  bool invalid = false, reused = false;
  for (int r = 0; r < world_size; r++) {
    const Entry &e = all[static_cast<size_t>(r)];
    std::vector<std::string> why;
    char line[256];
    if (e.flags & kNullComm) why.push_back("comm is NULL");
    if (e.flags & kBadRank) {
      snprintf(line, sizeof line, "rank %d is not in [0, nranks = %d)", e.rank, e.nranks);
      why.push_back(line);
    }
    if (e.flags & (kNotWorldSize | kNotWorldRank)) {
      snprintf(line, sizeof line,
               "nranks %d and rank %d are not MPI_COMM_WORLD's size %d and rank %d (the stand-in's only communicator)",
               e.nranks, e.rank, world_size, r);
      why.push_back(line);
    }
    if (e.flags & kNotAnId)
      why.push_back("the ncclUniqueId was not made by ncclGetUniqueId");
    else if (memcmp(e.id, all[0].id, NCCL_UNIQUE_ID_BYTES) != 0)
      why.push_back("passed a different ncclUniqueId than rank 0: it made its own with ncclGetUniqueId instead of "
                    "receiving rank 0's (e.g. by MPI_Bcast)");
    if (!why.empty()) invalid = true;
    if (why.empty() && (e.flags & kReused)) {
      why.push_back("this ncclUniqueId was already used for a communicator (one ncclGetUniqueId per communicator)");
      reused = true;
    }
    for (const std::string &w : why) report += "  rank " + std::to_string(r) + ": " + w + "\n";
  }
  // NCCL 2.28 (init.cc, after the peers' information is gathered): a rank that finds another rank on
  // its own host with its own GPU warns and returns ncclInvalidUsage.
  std::string duplicate;
  bool any_duplicate = false;
  if (!invalid) {
    for (int r = 0; r < world_size; r++)
      for (int q = 0; q < world_size; q++) {
        const Entry &a = all[static_cast<size_t>(r)], &b = all[static_cast<size_t>(q)];
        if (q == r || a.bus != b.bus || strcmp(a.host, b.host) != 0) continue;
        char line[160];
        snprintf(line, sizeof line, "Duplicate GPU detected : rank %d and rank %d both on CUDA device %llx", r, q,
                 static_cast<unsigned long long>(a.bus));
        if (!any_duplicate || r == world_rank) duplicate = line; // mine if I share, else the first pair
        if (r == world_rank && nccl_warns()) {
          fprintf(stderr, "%s:%d:%ld [%d] init.cc:%d NCCL WARN %s\n", mine.host, static_cast<int>(getpid()),
                  static_cast<long>(syscall(SYS_gettid)), current_device(), __LINE__, line);
          fflush(stderr);
        }
        any_duplicate = true;
        break;
      }
    if (any_duplicate) return fail(ncclInvalidUsage, "%s", duplicate.c_str());
  }
  if (invalid || reused) {
    if (world_rank == 0) {
      fprintf(stderr, "hs_cuda_emu: ncclCommInitRank failed on every rank:\n%s", report.c_str());
      fflush(stderr);
    }
    return fail(invalid ? ncclInvalidArgument : ncclInvalidUsage, "ncclCommInitRank:\n%s", report.c_str());
  }
  ncclComm *c = new ncclComm{MPI_COMM_NULL, nranks, rank, false, false, 0};
  MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi);
  reg().comms.insert(c);
  reg().used_ids.insert(std::string(commId.internal, NCCL_UNIQUE_ID_BYTES));
  *comm = c;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  NCCL_ENTER;
  ncclComm *c = live_comm(comm);
  if (c == nullptr) return fail(ncclInvalidArgument, "ncclCommDestroy: comm is not a live communicator");
  run_until([c] { return c->pending == 0; }); // flush the queued collectives (and what they wait for)
  c->destroyed = true;
  if (mpi_ready()) MPI_Comm_free(&c->mpi);
  return ncclSuccess;
}

extern "C" ncclResult_t ncclCommAbort(ncclComm_t comm) {
  NCCL_ENTER;
  if (comm == nullptr) return ncclSuccess;
  if (reg().comms.count(comm) == 0 || comm->destroyed)
    return fail(ncclInvalidArgument, "ncclCommAbort: comm is not a live communicator");
  comm->aborted = true; // queued collectives do nothing; the MPI communicator is left (others may still use it)
  comm->destroyed = true;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  NCCL_ENTER;
  const ncclComm *c = live_comm(comm);
  if (c == nullptr || count == nullptr) return fail(ncclInvalidArgument, "ncclCommCount: invalid comm or count");
  *count = c->nranks;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  NCCL_ENTER;
  const ncclComm *c = live_comm(comm);
  if (c == nullptr || rank == nullptr) return fail(ncclInvalidArgument, "ncclCommUserRank: invalid comm or rank");
  *rank = c->rank;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  NCCL_ENTER;
  const char *call = "ncclAllReduce";
  ncclComm *c = live_comm(comm);
  if (c == nullptr) return fail(ncclInvalidArgument, "%s: comm is not a live communicator", call);
  if (config().devices == 0) return fail(ncclUnhandledCudaError, "%s: no CUDA device", call);
  MPI_Datatype mt;
  size_t elem;
  ncclResult_t r = check_type(datatype, &mt, &elem);
  if (r != ncclSuccess) return r;
  if (op < 0 || op >= ncclNumOps) return fail(ncclInvalidArgument, "%s: invalid reduction operation %d", call, static_cast<int>(op));
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return fail(ncclUnhandledCudaError, "%s: invalid stream (%s)", call, cudaGetErrorName(err));
  if (count == 0) return ncclSuccess;
  if ((r = check_buffer(call, "sendbuff", sendbuff, count * elem)) != ncclSuccess) return r;
  if ((r = check_buffer(call, "recvbuff", recvbuff, count * elem)) != ncclSuccess) return r;
  if (!mpi_ready()) return fail(ncclInvalidUsage, "%s: MPI is not initialised", call);
  char label[128];
  snprintf(label, sizeof label, "ncclAllReduce %zu x %s %s", count, type_name(datatype), op_name(op));
  enqueue_collective(s, c, label, [c, sendbuff, recvbuff, count, datatype, op] {
    run_allreduce(c, sendbuff, recvbuff, count, datatype, op);
  });
  return ncclSuccess;
}

extern "C" ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                      int root, ncclComm_t comm, cudaStream_t stream) {
  NCCL_ENTER;
  const char *call = "ncclBroadcast";
  ncclComm *c = live_comm(comm);
  if (c == nullptr) return fail(ncclInvalidArgument, "%s: comm is not a live communicator", call);
  if (config().devices == 0) return fail(ncclUnhandledCudaError, "%s: no CUDA device", call);
  MPI_Datatype mt;
  size_t elem;
  ncclResult_t r = check_type(datatype, &mt, &elem);
  if (r != ncclSuccess) return r;
  if (root < 0 || root >= c->nranks) return fail(ncclInvalidArgument, "%s: root %d is not in [0, %d)", call, root, c->nranks);
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return fail(ncclUnhandledCudaError, "%s: invalid stream (%s)", call, cudaGetErrorName(err));
  if (count == 0) return ncclSuccess;
  if (c->rank == root && (r = check_buffer(call, "sendbuff", sendbuff, count * elem)) != ncclSuccess) return r;
  if ((r = check_buffer(call, "recvbuff", recvbuff, count * elem)) != ncclSuccess) return r;
  if (!mpi_ready()) return fail(ncclInvalidUsage, "%s: MPI is not initialised", call);
  char label[128];
  snprintf(label, sizeof label, "ncclBroadcast %zu x %s from rank %d", count, type_name(datatype), root);
  enqueue_collective(s, c, label, [c, sendbuff, recvbuff, count, datatype, root] {
    run_broadcast(c, sendbuff, recvbuff, count, datatype, root);
  });
  return ncclSuccess;
}

extern "C" ncclResult_t ncclGroupStart(void) {
  t_group_depth++;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclGroupEnd(void) {
  if (t_group_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  t_group_depth--;
  return ncclSuccess;
}
