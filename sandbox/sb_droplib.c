/* sb_drop.c as a shared object, for the kernel factory (sb_drop.h). */
#include "sandbox/sb_drop.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* $(BUILD)/sandbox/sb_drop.so, built in by the Makefile (tools/embed). */
extern const char sb_drop_so[];
extern const size_t sb_drop_so_len;

int
sb_drop_lib_memfd(err_t *err)
{
    int fd = memfd_create("sb_drop.so", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    size_t at = 0;
    while (fd >= 0 && at < sb_drop_so_len) {
        ssize_t n = write(fd, sb_drop_so + at, sb_drop_so_len - at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        at += (size_t)n;
    }
    if (fd < 0 || at != sb_drop_so_len ||
        fcntl(fd, F_ADD_SEALS,
              F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
        err_errno(err, ERR_SANDBOX, "sandbox: building the drop library");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}
