/* Publishing a finished output file under its final name (the prep commands write "<name>.tmp" first). */
#ifndef HS_UTIL_PUBLISH_H
#define HS_UTIL_PUBLISH_H

/* fsync tmp, then rename it to path: the data reach the disk before the rename makes them visible
 * under the final name, so a crash never leaves a truncated file there. 0, or -1 with errno set (tmp is
 * left in place). */
int hs_publish_file(const char *tmp, const char *path);

#endif
