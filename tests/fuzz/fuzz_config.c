/* Fuzz target: the experiment-file loader and the -o override parser (src/config.c).
 *
 * Input: the experiment file's text, then up to 8 overrides, separated by NUL bytes
 * ("task = \"bert\";\0optimizer.lr=0.5\0seed=7"). A user error is a correct outcome; a crash, UB, a
 * leak or a hang is not. For every configuration that loads, the documented promise is checked: the
 * effective configuration (hs_config_to_string) loads back without error and prints identically.
 * Inputs with @include are skipped: libconfig would read files named by the input. */
#include <string.h>

#include "config.h"
#include "fuzz_common.h"

#define MAX_OVERRIDES 8

static hs_config *g_loaded;

static void load(const char *text, int n, char **ov) { g_loaded = hs_config_load_string(text, "fuzz.cfg", n, ov); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) abort();
    memcpy(buf, data, size);
    buf[size] = '\0';
    if (memmem(buf, size, "@include", 8)) {
        free(buf);
        return -1; /* not added to the corpus */
    }
    /* split at NUL bytes: the file, then the overrides */
    char *ov[MAX_OVERRIDES];
    int n = 0;
    for (char *p = buf + strlen(buf); p < buf + size && n < MAX_OVERRIDES; p += strlen(p)) ov[n++] = ++p;

    int ok;
    g_loaded = NULL;
    HS_FUZZ_GUARDED(ok, load(buf, n, ov));
    if (ok) {
        hs_config *c = g_loaded;
        char *text = hs_config_to_string(c);
        /* unguarded: a user error on the effective configuration aborts (a bug) */
        hs_config *again = hs_config_load_string(text, "effective", 0, NULL);
        char *text2 = hs_config_to_string(again);
        HS_FUZZ_ASSERT(strcmp(text, text2) == 0, "the effective configuration does not round-trip:\n%s\n---\n%s", text,
                       text2);
        free(text);
        free(text2);
        hs_config_free(again);
        hs_config_free(c);
    }
    free(buf);
    return 0;
}
