/* The one privilege drop (see sb_drop.h). Also built alone as a shared
 * object (Makefile: sb_drop.so) that the kernel factory loads with ctypes:
 * so this file calls nothing but libc. */
#include "sandbox/sb_drop.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int
sb_drop_caps(int keep)
{
    return sb_drop_caps_mask(keep ? 1ull << keep : 0);
}

int
sb_drop_caps_mask(unsigned long long keep)
{
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) > 0 &&
            prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
            return -1;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
        errno != EINVAL)
        return -1;
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    data[0].effective = data[0].permitted = (uint32_t)keep;
    data[1].effective = data[1].permitted = (uint32_t)(keep >> 32);
    return (int)syscall(SYS_capset, &hdr, data);
}

int
sb_drop_to_user(unsigned id, const char **step)
{
    *step = "drop the capability bounding set";
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) > 0 &&
            prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
            return -1;
    *step = "drop supplementary groups";
    if (syscall(SYS_setgroups, 0, NULL) < 0 && errno != EPERM)
        return -1;
    /* Raw calls: glibc's set*id would signal threads that a forked copy
     * of a multi-threaded process does not have. */
    *step = "setresgid 1000";
    if (syscall(SYS_setresgid, id, id, id) < 0)
        return -1;
    *step = "setresuid 1000";
    if (syscall(SYS_setresuid, id, id, id) < 0)
        return -1;
    *step = "drop capabilities";
    if (sb_drop_caps(0) < 0)
        return -1;
    *step = "set no_new_privs";
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    *step = NULL;
    return 0;
}
