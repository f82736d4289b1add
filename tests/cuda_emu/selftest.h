// Helpers of the emulated device's self-tests (tests/cuda_emu/test_*.cc): checks that stop the test
// with the location, and death tests that run a case in a child process and check how it ended.
#ifndef HS_EMU_SELFTEST_H
#define HS_EMU_SELFTEST_H
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <cuda_runtime.h>

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#define CUDA_OK(call)                                                                                   \
  do {                                                                                                  \
    const cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                            \
      fprintf(stderr, "%s:%d: %s returned %s (%s)\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_), \
              cudaGetErrorString(e_));                                                                  \
      exit(1);                                                                                          \
    }                                                                                                   \
  } while (0)

#define CHECK_ERR(call, expected)                                                                     \
  do {                                                                                                \
    const cudaError_t e_ = (call);                                                                    \
    if (e_ != (expected)) {                                                                           \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__, #call,              \
              cudaGetErrorName(e_), cudaGetErrorName(expected));                                      \
      exit(1);                                                                                        \
    }                                                                                                 \
  } while (0)

struct ChildEnd {
  int status;
  std::string stderr_text;
};

// Runs fn in a child process (no core file) and collects its stderr and wait status.
inline ChildEnd run_in_child(const std::function<void()> &fn) {
  fflush(stdout);
  fflush(stderr);
  int fds[2];
  CHECK(pipe(fds) == 0);
  const pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    const struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    fn();
    fflush(stderr);
    _exit(0);
  }
  close(fds[1]);
  ChildEnd end{0, ""};
  char buf[4096];
  ssize_t k;
  while ((k = read(fds[0], buf, sizeof buf)) > 0) end.stderr_text.append(buf, static_cast<size_t>(k));
  close(fds[0]);
  CHECK(waitpid(pid, &end.status, 0) == pid);
  return end;
}

// The case must end with signal sig and print every needle (nullptr-terminated list).
inline void expect_death(const char *name, const std::function<void()> &fn, int sig,
                         std::initializer_list<const char *> needles) {
  const ChildEnd end = run_in_child(fn);
  bool ok = WIFSIGNALED(end.status) && WTERMSIG(end.status) == sig;
  for (const char *n : needles) ok = ok && end.stderr_text.find(n) != std::string::npos;
  if (!ok) {
    fprintf(stderr, "FAIL %s: expected death by signal %d with", name, sig);
    for (const char *n : needles) fprintf(stderr, " \"%s\"", n);
    if (WIFSIGNALED(end.status))
      fprintf(stderr, "; got signal %d", WTERMSIG(end.status));
    else
      fprintf(stderr, "; got exit status %d", WEXITSTATUS(end.status));
    fprintf(stderr, ", stderr:\n%s\n", end.stderr_text.c_str());
    exit(1);
  }
  const size_t eol = end.stderr_text.find('\n');
  printf("ok   %s caught: %s\n", name, end.stderr_text.substr(0, eol).c_str());
}

inline bool all_bytes_ff(const void *p, size_t n) {
  const unsigned char *b = static_cast<const unsigned char *>(p);
  for (size_t i = 0; i < n; i++)
    if (b[i] != 0xFF) return false;
  return true;
}

#endif
