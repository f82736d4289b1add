/* Listing a directory the way every hetseq reader does: the non-hidden entries, as full paths, sorted
 * by plain strcmp (HetSeq's sorted(), so x_10 comes before x_2). Callers filter by type or name. */
#ifndef HS_UTIL_DIRLIST_H
#define HS_UTIL_DIRLIST_H

#include <stddef.h>

/* On success returns the number of entries and sets *paths (malloc'd array of malloc'd strings, free
 * with hs_dir_free); on failure returns -1 with "cannot list DIR: reason" in err. */
int hs_dir_list(const char *dir, char ***paths, char *err, size_t errlen);
void hs_dir_free(char **paths, int n);

/* "DIR/NAME", malloc'd. */
char *hs_path_join(const char *dir, const char *name);

/* paths[0..n) packed into one buffer of NUL-terminated strings in order (*list, *len bytes; malloc'd,
 * one broadcast hands it to every rank); the paths and the array are freed. */
void hs_dir_pack(char **paths, int n, char **list, size_t *len);

#endif
