/* Preloaded (LD_PRELOAD) into every process of a test by tests/sanitizers/san_check.sh in the ASan +
 * UBSan build, so that an UndefinedBehaviorSanitizer report fails the test even when the test itself
 * swallows the process's output and exit status (a bad-input test expects a non-zero exit).
 *
 * Why: GCC links ASan and UBSan as two runtimes (libasan, libubsan), each with its own copy of the
 * sanitizer's report file; libubsan's call that sets its log_path binds to libasan's copy, so UBSan
 * reports always go to stderr, never to UBSAN_OPTIONS=log_path. libubsan calls the weak hook
 * __ubsan_on_report() on every report; this definition takes its place and appends a line to
 * $HS_SAN_REPORTS/ubsan.<pid>, the directory san_check.sh looks at after the test.
 *
 * Built without sanitizers and without MPI, so it loads into any process (the shells, mpirun, python);
 * in those nothing calls it. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void __ubsan_get_current_report_data(const char **kind, const char **message, const char **file, unsigned *line,
                                     unsigned *column, char **address) __attribute__((weak));
void __ubsan_on_report(void);

void __ubsan_on_report(void) {
    const char *dir = getenv("HS_SAN_REPORTS");
    if (!dir || !*dir) return;
    const char *kind = "unknown", *message = "(no report data)", *file = "?";
    unsigned line = 0, column = 0;
    char *address = NULL;
    if (__ubsan_get_current_report_data)
        __ubsan_get_current_report_data(&kind, &message, &file, &line, &column, &address);
    char path[4096], text[4096];
    snprintf(path, sizeof path, "%s/ubsan.%ld", dir, (long)getpid());
    int n = snprintf(text, sizeof text, "%s:%u:%u: runtime error: %s [-fsanitize=%s]\n", file ? file : "?", line,
                     column, message ? message : "?", kind ? kind : "?");
    if (n < 0) return;
    if ((size_t)n >= sizeof text) n = (int)sizeof text - 1;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ssize_t w = write(fd, text, (size_t)n);
    (void)w;
    close(fd);
}
