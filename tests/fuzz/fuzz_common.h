/* Shared by the fuzz targets (libFuzzer, clang -fsanitize=fuzzer,address,undefined); see
 * tests/fuzz/test_fuzz.sh, which builds and runs them. */
#ifndef HS_FUZZ_COMMON_H
#define HS_FUZZ_COMMON_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Where a user error (hs_die*) returns to, and its message (check_stub.c). */
extern jmp_buf *hs_fuzz_env;
extern char hs_fuzz_last_error[4096];

/* Runs `call` (a function call statement); evaluates to 1 if it completed, 0 if it ended in a user
 * error. The call must be a whole statement whose locals nothing reads after a user error. */
#define HS_FUZZ_GUARDED(ok, call)                                                                   \
    do {                                                                                            \
        jmp_buf hs_fuzz_jb_;                                                                        \
        if (setjmp(hs_fuzz_jb_) == 0) {                                                             \
            hs_fuzz_env = &hs_fuzz_jb_;                                                             \
            call;                                                                                   \
            hs_fuzz_env = NULL;                                                                     \
            (ok) = 1;                                                                               \
        } else {                                                                                    \
            (ok) = 0;                                                                               \
        }                                                                                           \
    } while (0)

/* A property of the output that must hold: a failure is a bug, reported as a crash. */
#define HS_FUZZ_ASSERT(cond, ...)                                                                   \
    do {                                                                                            \
        if (!(cond)) {                                                                              \
            fprintf(stderr, "hetseq (fuzz): property violated at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                           \
            fputc('\n', stderr);                                                                    \
            abort();                                                                                \
        }                                                                                           \
    } while (0)

/* The readers take file names: the input goes into an in-memory file (memfd) named by a
 * /proc/self/fd path, rewritten for every input. Returns the path (static). */
const char *hs_fuzz_file(const uint8_t *data, size_t size);

#endif
