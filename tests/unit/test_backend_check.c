/* A backend table with a forgotten entry is a named error, not a call through a NULL pointer: the
 * maintainer who adds an op to src/backend/ops.def and misses one backend's entry is told which op of
 * which backend (hs_backend_check, called where a backend is made). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend/backend.h"

static void test_whole_tables_pass(void **unused) {
    (void)unused;
    assert_null(hs_backend_missing_op(hs_backend_cpu()));
    hs_backend_check(hs_backend_cpu()); /* returns */
}

static void test_missing_op_is_named(void **unused) {
    (void)unused;
    hs_backend t = *hs_backend_cpu();
    t.gelu_forward = NULL;
    assert_string_equal(hs_backend_missing_op(&t), "gelu_forward");
    t = *hs_backend_cpu();
    t.alloc = NULL; /* the first op of the list */
    assert_string_equal(hs_backend_missing_op(&t), "alloc");
    t = *hs_backend_cpu();
    t.rel_attention_backward = NULL; /* the last */
    assert_string_equal(hs_backend_missing_op(&t), "rel_attention_backward");
}

/* The device collectives may be NULL only where memory is host memory (comm/ then runs MPI). */
static void test_optional_ops(void **unused) {
    (void)unused;
    hs_backend t = *hs_backend_cpu();
    assert_null(t.allreduce_sum_async);
    assert_null(hs_backend_missing_op(&t));
    t.memory_is_host = 0;
    assert_string_equal(hs_backend_missing_op(&t), "collectives_init");
}

/* hs_backend_check ends the process with exit status 2 and a message naming the backend and the op. */
static void test_check_ends_the_run_naming_the_op(void **unused) {
    (void)unused;
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], STDERR_FILENO);
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        hs_backend t = *hs_backend_cpu();
        t.layernorm_backward = NULL;
        hs_backend_check(&t);
        _exit(0); /* not reached when the check works */
    }
    close(fd[1]);
    char out[4096] = "";
    size_t len = 0;
    ssize_t got;
    while (len < sizeof out - 1 && (got = read(fd[0], out + len, sizeof out - 1 - len)) > 0) len += (size_t)got;
    out[len] = '\0';
    close(fd[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 2);
    assert_non_null(strstr(out, "cpu backend"));
    assert_non_null(strstr(out, "\"layernorm_backward\""));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_tables_pass),
        cmocka_unit_test(test_missing_op_is_named),
        cmocka_unit_test(test_optional_ops),
        cmocka_unit_test(test_check_ends_the_run_naming_the_op),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
