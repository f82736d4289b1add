/* The files of a text corpus (prep vocab, prep lm): what to read, found once on rank 0. */
#ifndef HS_PREP_TEXT_FILES_H
#define HS_PREP_TEXT_FILES_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "prep/corpus.h" /* hs_binary_skips */

/* The text files of a corpus, in the order they were found: directories walked in name order (hidden
 * entries and symlinked directories skipped: no cycles), binary files skipped into a hs_binary_skips
 * unless strict, and a file reached twice (a symlink such as the fortunes' *.u8, a repeated path)
 * counted once. */
typedef struct hs_text_files {
    char **path;      /* malloc'd */
    long long *bytes;
    dev_t *dev;
    ino_t *ino;
    int n, cap;
} hs_text_files;
/* Takes ownership of path (freed at once when the file is already listed). */
void hs_text_files_add(hs_text_files *fl, char *path, const struct stat *st);
/* The regular files under dir, recursively. Returns 0, or -1 with a message in err. */
int hs_text_files_walk(const char *dir, int strict, hs_text_files *fl, hs_binary_skips *skips, char *err,
                       size_t errlen);
void hs_text_files_free(hs_text_files *fl);

#endif
