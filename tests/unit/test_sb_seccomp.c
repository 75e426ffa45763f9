/* Unit tests: the seccomp table (allow list + deny rows) and its filter. */
#include "sandbox/sb_seccomp.h"
#include "tests/tap.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int
s_in_table(const sb_seccomp_rule_info_t *rows, size_t n, const char *name,
           const char *when_part)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(rows[i].syscall, name) == 0 &&
            (!when_part || strstr(rows[i].when, when_part)))
            return 1;
    return 0;
}

int
main(void)
{
    const sb_seccomp_rule_info_t *rows;
    size_t n = sb_seccomp_table(&rows);
    ok(n > 50, "the table has %zu rows", n);

    static const char *const required[] = {"ptrace",
                                           "process_vm_readv",
                                           "process_vm_writev",
                                           "kcmp",
                                           "pidfd_getfd",
                                           "mount",
                                           "umount2",
                                           "mount_setattr",
                                           "move_mount",
                                           "open_tree",
                                           "fsopen",
                                           "fsconfig",
                                           "fsmount",
                                           "fspick",
                                           "chroot",
                                           "pivot_root",
                                           "setns",
                                           "unshare",
                                           "clone",
                                           "clone3",
                                           "keyctl",
                                           "add_key",
                                           "request_key",
                                           "bpf",
                                           "perf_event_open",
                                           "userfaultfd",
                                           "io_uring_setup",
                                           "io_uring_enter",
                                           "io_uring_register",
                                           "kexec_load",
                                           "kexec_file_load",
                                           "init_module",
                                           "finit_module",
                                           "delete_module",
                                           "reboot",
                                           "swapon",
                                           "swapoff",
                                           "acct",
                                           "quotactl",
                                           "settimeofday",
                                           "clock_settime",
                                           "clock_adjtime",
                                           "adjtimex",
                                           "iopl",
                                           "ioperm",
                                           "modify_ldt",
                                           "personality",
                                           "fanotify_init",
                                           "ioctl",
                                           "socket"};
    int missing = 0;
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!s_in_table(rows, n, required[i], NULL)) {
            diag("missing from the deny table: %s", required[i]);
            missing++;
        }
    is_int(missing, 0, "every required system call is in the deny table");
    ok(s_in_table(rows, n, "clone", "CLONE_NEWUSER") &&
           s_in_table(rows, n, "clone", "CLONE_NEWNET") &&
           s_in_table(rows, n, "clone", "CLONE_NEWNS"),
       "clone is denied when it asks for new namespaces");
    ok(s_in_table(rows, n, "ioctl", "TIOCSTI") &&
           s_in_table(rows, n, "ioctl", "TIOCLINUX"),
       "terminal injection ioctls are denied");
    ok(s_in_table(rows, n, "socket", "AF_NETLINK") &&
           s_in_table(rows, n, "socket", "SOCK_RAW") &&
           s_in_table(rows, n, "socket", "SOCK_PACKET") &&
           s_in_table(rows, n, "socket", "AF_UNIX"),
       "socket families and types are limited");
    int clone3_enosys = 0, others_eperm = 1, n_allow = 0, conflicts = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(rows[i].action, "ALLOW") == 0) {
            n_allow++;
            if (*rows[i].when)
                others_eperm = 0; /* allow rows are unconditional */
            for (size_t j = 0; j < n; j++)
                if (j != i && strcmp(rows[j].syscall, rows[i].syscall) == 0 &&
                    !*rows[j].when) {
                    diag("%s is both allowed and always denied",
                         rows[i].syscall);
                    conflicts++;
                }
        } else if (strcmp(rows[i].syscall, "clone3") == 0)
            clone3_enosys = strcmp(rows[i].action, "ENOSYS") == 0;
        else if (strcmp(rows[i].action, "EPERM") != 0)
            others_eperm = 0;
        if (!rows[i].reason || !*rows[i].reason) {
            diag("row %zu (%s) has no reason", i, rows[i].syscall);
            others_eperm = 0;
        }
    }
    ok(n_allow > 150, "the allow list names %d system calls", n_allow);
    is_int(conflicts, 0, "no system call is both allowed and always denied");
    static const char *const needed[] = {
        "read",  "write",  "openat",     "mmap",         "futex",
        "clone", "execve", "socket",     "epoll_wait",   "ioctl",
        "poll",  "getpid", "exit_group", "rt_sigaction", "getrandom"};
    missing = 0;
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
        int found = 0;
        for (size_t j = 0; j < n; j++)
            found |= strcmp(rows[j].syscall, needed[i]) == 0 &&
                     strcmp(rows[j].action, "ALLOW") == 0;
        if (!found) {
            diag("not on the allow list: %s", needed[i]);
            missing++;
        }
    }
    is_int(missing, 0, "what every Python process needs is on the allow list");
    ok(!s_in_table(rows, n, "sysfs", NULL) &&
           !s_in_table(rows, n, "mbind", NULL),
       "calls nothing here needs (sysfs, mbind) are not in the table: the "
       "default refuses them");
    ok(clone3_enosys, "clone3 fails with ENOSYS so glibc falls back to clone");
    ok(others_eperm, "every other deny row returns EPERM, allow rows have no "
                     "condition, and every row states its reason");

    json_t *j = sb_seccomp_table_json();
    ok(json_array_size(j) == n + 3,
       "the JSON table has every row plus the EPERM, ENOSYS and "
       "architecture defaults");
    json_t *last = json_array_get(j, json_array_size(j) - 1);
    is_str(json_string_value(json_object_get(last, "action")), "KILL_PROCESS",
           "foreign architectures are killed");
    json_decref(j);

    sb_seccomp_prog_t prog;
    err_t err;
    ok(sb_seccomp_build(&prog, &err) == 0, "the filter compiles");
    ok(prog.len > 20 && prog.insns != NULL && prog.first_len < prog.len,
       "...into %zu BPF instructions (%zu in the allow list)", prog.len,
       prog.first_len);
    sb_seccomp_prog_t audit;
    ok(sb_seccomp_build_mode(&audit, true, &err) == 0 && audit.audit,
       "the audit variant compiles");
    sb_seccomp_prog_release(&audit);
    diag("%d rows name system calls this architecture lacks", prog.n_skipped);
    sb_seccomp_prog_release(&prog);

    /* The compiled program, as libseccomp prints it, mentions them all. */
    int fd = memfd_create("pfc", MFD_CLOEXEC);
    ok(fd >= 0 && sb_seccomp_export_pfc(fd, &err) == 0,
       "the filter exports as pseudo filter code");
    off_t size = lseek(fd, 0, SEEK_END);
    char *pfc = calloc(1, (size_t)size + 1);
    ok(pread(fd, pfc, (size_t)size, 0) == size, "...which reads back");
    close(fd);
    missing = 0;
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        char needle[64];
        snprintf(needle, sizeof needle, "\"%s\"", required[i]);
        if (!strstr(pfc, needle)) {
            diag("not in the exported filter: %s", required[i]);
            missing++;
        }
    }
    is_int(missing, 0,
           "the exported filter has a rule for every required "
           "system call");
    ok(strstr(pfc, "ERRNO(1)") != NULL, "the exported filter returns EPERM");
    ok(strstr(pfc, "ERRNO(38)") != NULL,
       "the exported filter returns ENOSYS (for clone3)");
    ok(strstr(pfc, "invalid architecture action") &&
           strstr(pfc, "KILL_PROCESS"),
       "the exported filter kills foreign architectures");
    ok(strstr(pfc, "0x40000000") || strstr(pfc, "1073741824"),
       "the exported filter checks the x32 system call bit");
    free(pfc);
    return done_testing();
}
