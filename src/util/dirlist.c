#include "util/dirlist.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"

static int cmp_paths(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int hs_dir_list(const char *dir, char ***paths, char *err, size_t errlen) {
    *paths = NULL;
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "cannot list %s: %s", dir, strerror(errno));
        return -1;
    }
    size_t dlen = strlen(dir);
    const char *sep = dlen > 0 && dir[dlen - 1] == '/' ? "" : "/";
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            HS_REALLOC(names, cap);
        }
        size_t plen = dlen + strlen(e->d_name) + 2;
        HS_ALLOC(names[n], plen);
        snprintf(names[n], plen, "%s%s%s", dir, sep, e->d_name);
        n++;
    }
    closedir(d);
    /* Every entry shares the directory prefix, so sorting paths sorts names. */
    if (n > 1) qsort(names, (size_t)n, sizeof *names, cmp_paths);
    *paths = names;
    return n;
}

void hs_dir_free(char **paths, int n) {
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
}

void hs_dir_pack(char **paths, int n, char **list, size_t *len) {
    *len = 0;
    for (int i = 0; i < n; i++) *len += strlen(paths[i]) + 1;
    HS_ALLOC(*list, *len ? *len : 1);
    char *p = *list;
    for (int i = 0; i < n; i++) {
        const size_t l = strlen(paths[i]) + 1;
        memcpy(p, paths[i], l);
        p += l;
        free(paths[i]);
    }
    free(paths);
}

char *hs_path_join(const char *dir, const char *name) {
    const size_t n = strlen(dir) + strlen(name) + 2;
    char *p;
    HS_ALLOC(p, n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}
