#include "util/publish.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int hs_publish_file(const char *tmp, const char *path) {
    const int fd = open(tmp, O_RDONLY);
    if (fd < 0) return -1;
    const int synced = fsync(fd);
    const int saved = errno;
    close(fd);
    if (synced != 0) {
        errno = saved;
        return -1;
    }
    return rename(tmp, path);
}
