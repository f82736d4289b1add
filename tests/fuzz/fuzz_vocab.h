/* The committed fuzz vocabulary (tests/fuzz/vocab.txt), loaded once. Its path is compiled in by
 * test_fuzz.sh (HS_FUZZ_VOCAB); the environment variable HS_FUZZ_VOCAB overrides it. */
#ifndef HS_FUZZ_VOCAB_H
#define HS_FUZZ_VOCAB_H

#include <stdlib.h>

#include "fuzz_common.h"
#include "prep/wordpiece.h"

#ifndef HS_FUZZ_VOCAB
#define HS_FUZZ_VOCAB "tests/fuzz/vocab.txt"
#endif

static hs_vocab *fuzz_vocab(void) {
    static hs_vocab *v;
    if (!v) {
        const char *path = getenv("HS_FUZZ_VOCAB") ? getenv("HS_FUZZ_VOCAB") : HS_FUZZ_VOCAB;
        int ok;
        HS_FUZZ_GUARDED(ok, v = hs_vocab_load(path));
        if (!ok) {
            fprintf(stderr, "hetseq (fuzz): cannot load the fuzz vocabulary: %s\n", hs_fuzz_last_error);
            abort();
        }
    }
    return v;
}

#endif
