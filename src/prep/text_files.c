#include "prep/text_files.h"

#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/dirlist.h"

/* ---- the files of a corpus ------------------------------------------------------------------------ */

void hs_text_files_add(hs_text_files *fl, char *path, const struct stat *st) {
    for (int i = 0; i < fl->n; i++)
        if (fl->dev[i] == st->st_dev && fl->ino[i] == st->st_ino) {
            free(path);
            return;
        }
    if (fl->n == fl->cap) {
        fl->cap = fl->cap ? 2 * fl->cap : 64;
        HS_REALLOC(fl->path, fl->cap);
        HS_REALLOC(fl->bytes, fl->cap);
        HS_REALLOC(fl->dev, fl->cap);
        HS_REALLOC(fl->ino, fl->cap);
    }
    fl->path[fl->n] = path;
    fl->bytes[fl->n] = (long long)st->st_size;
    fl->dev[fl->n] = st->st_dev;
    fl->ino[fl->n] = st->st_ino;
    fl->n++;
}

void hs_text_files_free(hs_text_files *fl) {
    for (int i = 0; i < fl->n; i++) free(fl->path[i]);
    free(fl->path);
    free(fl->bytes);
    free(fl->dev);
    free(fl->ino);
    memset(fl, 0, sizeof *fl);
}

int hs_text_files_walk(const char *dir, int strict, hs_text_files *fl, hs_binary_skips *skips, char *err,
                       size_t errlen) {
    char **names;
    int n = hs_dir_list(dir, &names, err, errlen);
    if (n < 0) return -1;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        char *full = names[i];
        struct stat lst, st;
        long long nul_at;
        if (rc != 0 || lstat(full, &lst) != 0) {
            free(full);
        } else if (S_ISDIR(lst.st_mode)) {
            rc = hs_text_files_walk(full, strict, fl, skips, err, errlen);
            free(full);
        } else if (stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
            if (!strict && hs_corpus_looks_binary(full, &nul_at)) {
                hs_binary_skips_add(skips, full, nul_at);
                free(full);
            } else {
                hs_text_files_add(fl, full, &st);
            }
        } else {
            free(full); /* a dangling link, a socket, a symlinked directory */
        }
    }
    free(names);
    return rc;
}
