/* hs_fuzz_file (fuzz_common.h): one memfd per process, truncated and rewritten for every input. */
#include "fuzz_common.h"

#include <sys/mman.h>
#include <unistd.h>

const char *hs_fuzz_file(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("hetseq-fuzz", 0);
        if (fd < 0) {
            perror("hetseq (fuzz): memfd_create");
            abort();
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) {
        perror("hetseq (fuzz): ftruncate");
        abort();
    }
    for (size_t done = 0; done < size;) {
        ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
        if (w <= 0) {
            perror("hetseq (fuzz): pwrite");
            abort();
        }
        done += (size_t)w;
    }
    return path;
}
