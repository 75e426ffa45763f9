/*
 * sb_seccomp: the deny table and its compilation with libseccomp.
 *
 * Reading guide: s_rules is the whole policy. Every row is one denial with
 * its reason; the compiler below only translates the `cond` column into
 * libseccomp comparisons. Argument checks on 32-bit kernel arguments
 * (ioctl request, socket family) compare in a way that high garbage bits
 * cannot sneak past (masked compare, or "greater than" catching them).
 */
#include "sandbox/sb_seccomp.h"

#include "common/xalloc.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SOCK_PACKET
#define SOCK_PACKET 10
#endif
#ifndef AF_NETLINK
#define AF_NETLINK 16
#endif

enum s_cond {
    C_ALWAYS,        /* deny every call */
    C_A0_HAS_BIT,    /* deny when (arg0 & value) == value */
    C_A0_NOT,        /* deny when arg0 != value */
    C_A1_IS32,       /* deny when (arg1 & 0xffffffff) == value */
    C_FAMILY_NOT_OK, /* socket(): deny families but UNIX/INET/INET6/NETLINK */
    C_NETLINK_NOT_ROUTE, /* socket(AF_NETLINK, *, proto != NETLINK_ROUTE) */
    C_INET_SOCKTYPE_IS   /* socket(AF_INET[6], (arg1 & 0xf) == value) */
};

struct s_rule {
    const char *name;   /* system call */
    enum s_cond cond;   /* when to deny */
    uint64_t value;     /* the condition's constant */
    int errnum;         /* errno returned */
    const char *when;   /* the condition in words ("" = always) */
    const char *reason; /* why */
};

#define ALWAYS(n, why)                                                         \
    {                                                                          \
        n, C_ALWAYS, 0, EPERM, "", why                                         \
    }
#define CLONE_NS(bit, words)                                                   \
    {                                                                          \
        "clone", C_A0_HAS_BIT, bit, EPERM, "flags include " words,             \
            "new namespaces would escape the sandbox's view"                   \
    }

/* The policy. Keep it sorted by theme; one row per denial. */
static const struct s_rule s_rules[] = {
    /* Looking into or controlling other processes. */
    ALWAYS("ptrace", "debugging other processes can read or change them"),
    ALWAYS("process_vm_readv", "reads another process's memory"),
    ALWAYS("process_vm_writev", "writes another process's memory"),
    ALWAYS("kcmp", "compares kernel objects of other processes"),
    ALWAYS("pidfd_getfd", "steals file descriptors from other processes"),
    /* The filesystem view. */
    ALWAYS("mount", "changes the filesystem view"),
    ALWAYS("umount2", "could uncover what the sandbox hides"),
    ALWAYS("mount_setattr", "could make read-only mounts writable"),
    ALWAYS("move_mount", "changes the filesystem view"),
    ALWAYS("open_tree", "clones mounts"),
    ALWAYS("fsopen", "new mount API"),
    ALWAYS("fsconfig", "new mount API"),
    ALWAYS("fsmount", "new mount API"),
    ALWAYS("fspick", "new mount API"),
    ALWAYS("chroot", "changes the filesystem root"),
    ALWAYS("pivot_root", "changes the filesystem root"),
    ALWAYS("open_by_handle_at", "opens files by handle, bypassing paths"),
    ALWAYS("name_to_handle_at", "pairs with open_by_handle_at"),
    ALWAYS("quotactl", "filesystem quota administration"),
    ALWAYS("quotactl_fd", "filesystem quota administration"),
    /* Namespaces. */
    ALWAYS("setns", "joins other namespaces"),
    ALWAYS("unshare", "new namespaces would escape the sandbox's view"),
    CLONE_NS(CLONE_NEWNS, "CLONE_NEWNS"),
    CLONE_NS(CLONE_NEWUTS, "CLONE_NEWUTS"),
    CLONE_NS(CLONE_NEWIPC, "CLONE_NEWIPC"),
    CLONE_NS(CLONE_NEWUSER, "CLONE_NEWUSER"),
    CLONE_NS(CLONE_NEWPID, "CLONE_NEWPID"),
    CLONE_NS(CLONE_NEWNET, "CLONE_NEWNET"),
    CLONE_NS(CLONE_NEWCGROUP, "CLONE_NEWCGROUP"),
    {"clone3", C_ALWAYS, 0, ENOSYS, "",
     "its flags live in memory a filter cannot read; ENOSYS makes glibc "
     "fall back to clone"},
    /* Kernel attack surface rarely needed by Python. */
    ALWAYS("keyctl", "kernel keyrings are not namespaced"),
    ALWAYS("add_key", "kernel keyrings are not namespaced"),
    ALWAYS("request_key", "kernel keyrings are not namespaced"),
    ALWAYS("bpf", "eBPF programs: large kernel attack surface"),
    ALWAYS("perf_event_open", "performance counters leak and attack"),
    ALWAYS("userfaultfd", "widely used to win kernel races"),
    ALWAYS("io_uring_setup", "io_uring: large kernel attack surface"),
    ALWAYS("io_uring_enter", "io_uring: large kernel attack surface"),
    ALWAYS("io_uring_register", "io_uring: large kernel attack surface"),
    ALWAYS("fanotify_init", "watches filesystem activity"),
    ALWAYS("lookup_dcookie", "kernel profiling interface"),
    ALWAYS("syslog", "reads the kernel log"),
    ALWAYS("uselib", "obsolete loader interface"),
    ALWAYS("vhangup", "hangs up terminals"),
    /* Machine administration. */
    ALWAYS("kexec_load", "replaces the running kernel"),
    ALWAYS("kexec_file_load", "replaces the running kernel"),
    ALWAYS("init_module", "loads kernel modules"),
    ALWAYS("finit_module", "loads kernel modules"),
    ALWAYS("delete_module", "unloads kernel modules"),
    ALWAYS("reboot", "reboots the machine"),
    ALWAYS("swapon", "changes swap"),
    ALWAYS("swapoff", "changes swap"),
    ALWAYS("acct", "process accounting"),
    ALWAYS("settimeofday", "sets the clock"),
    ALWAYS("clock_settime", "sets the clock"),
    ALWAYS("clock_adjtime", "adjusts the clock"),
    ALWAYS("adjtimex", "adjusts the clock"),
    ALWAYS("sethostname", "the host name is fixed"),
    ALWAYS("setdomainname", "the domain name is fixed"),
    ALWAYS("iopl", "raw I/O port access"),
    ALWAYS("ioperm", "raw I/O port access"),
    ALWAYS("modify_ldt", "segment descriptors: old exploit surface"),
    {"personality", C_A0_NOT, 0, EPERM, "persona is not 0 (PER_LINUX)",
     "ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC and friends weaken hardening"},
    /* Terminals. */
    {"ioctl", C_A1_IS32, TIOCSTI, EPERM, "request is TIOCSTI",
     "pushes keystrokes into the user's terminal"},
    {"ioctl", C_A1_IS32, TIOCLINUX, EPERM, "request is TIOCLINUX",
     "console control, can also inject input"},
    /* Sockets: the network namespace has only loopback; keep it that way. */
    {"socket", C_FAMILY_NOT_OK, 0, EPERM,
     "family is not AF_UNIX, AF_INET, AF_INET6 or AF_NETLINK",
     "packet, bluetooth, vsock, alg, ... reach hardware or the kernel"},
    {"socket", C_NETLINK_NOT_ROUTE, 0, EPERM,
     "AF_NETLINK with protocol other than NETLINK_ROUTE",
     "audit, uevent, netfilter, ... talk to the kernel (libzmq needs ROUTE)"},
    {"socket", C_INET_SOCKTYPE_IS, SOCK_RAW, EPERM,
     "AF_INET or AF_INET6 with type SOCK_RAW",
     "raw packets bypass the protocol stack (netlink needs SOCK_RAW: allowed)"},
    {"socket", C_INET_SOCKTYPE_IS, SOCK_PACKET, EPERM,
     "AF_INET or AF_INET6 with type SOCK_PACKET", "link-level packets"},
    {"socketpair", C_A0_NOT, AF_UNIX, EPERM, "family is not AF_UNIX",
     "only local pairs are needed"},
};

size_t
sb_seccomp_table(const sb_seccomp_rule_info_t **rows)
{
    enum { N = sizeof s_rules / sizeof s_rules[0] };
    static sb_seccomp_rule_info_t info[N];
    static const char *const errnames[] = {
        [EPERM] = "EPERM", [ENOSYS] = "ENOSYS"};
    for (size_t i = 0; i < N; i++) {
        info[i].syscall = s_rules[i].name;
        info[i].when = s_rules[i].when;
        info[i].action = errnames[s_rules[i].errnum];
        info[i].reason = s_rules[i].reason;
    }
    if (rows)
        *rows = info;
    return N;
}

json_t *
sb_seccomp_table_json(void)
{
    const sb_seccomp_rule_info_t *rows;
    size_t n = sb_seccomp_table(&rows);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(
            arr, json_pack("{s:s, s:s, s:s, s:s}", "syscall", rows[i].syscall,
                           "when", rows[i].when, "action", rows[i].action,
                           "reason", rows[i].reason));
    json_array_append_new(
        arr, json_pack("{s:s, s:s, s:s, s:s}", "syscall", "*", "when",
                       "architecture is not the native one (i386, x32)",
                       "action", "KILL_PROCESS", "reason",
                       "foreign system call tables bypass this filter"));
    return arr;
}

static int
s_add(scmp_filter_ctx ctx, const struct s_rule *r, int nr)
{
    uint32_t act = SCMP_ACT_ERRNO((uint32_t)r->errnum);
    switch (r->cond) {
    case C_ALWAYS:
        return seccomp_rule_add(ctx, act, nr, 0);
    case C_A0_HAS_BIT:
        return seccomp_rule_add(
            ctx, act, nr, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, r->value, r->value));
    case C_A0_NOT:
        return seccomp_rule_add(ctx, act, nr, 1,
                                SCMP_A0(SCMP_CMP_NE, r->value));
    case C_A1_IS32:
        return seccomp_rule_add(
            ctx, act, nr, 1,
            SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, r->value));
    case C_FAMILY_NOT_OK: {
        /* libseccomp allows one comparison per argument and rule, so
         * "not in {1,2,10,16}" becomes one rule per other family below 64
         * and one for everything above (which also catches high bits). */
        for (uint64_t fam = 0; fam < 64; fam++) {
            if (fam == AF_UNIX || fam == AF_INET || fam == AF_INET6 ||
                fam == AF_NETLINK)
                continue;
            int rc =
                seccomp_rule_add(ctx, act, nr, 1, SCMP_A0(SCMP_CMP_EQ, fam));
            if (rc < 0)
                return rc;
        }
        return seccomp_rule_add(ctx, act, nr, 1, SCMP_A0(SCMP_CMP_GT, 63));
    }
    case C_NETLINK_NOT_ROUTE:
        return seccomp_rule_add(ctx, act, nr, 2,
                                SCMP_A0(SCMP_CMP_EQ, AF_NETLINK),
                                SCMP_A2(SCMP_CMP_NE, 0 /* NETLINK_ROUTE */));
    case C_INET_SOCKTYPE_IS: {
        int rc =
            seccomp_rule_add(ctx, act, nr, 2, SCMP_A0(SCMP_CMP_EQ, AF_INET),
                             SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, r->value));
        if (rc < 0)
            return rc;
        return seccomp_rule_add(ctx, act, nr, 2, SCMP_A0(SCMP_CMP_EQ, AF_INET6),
                                SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, r->value));
    }
    }
    return -EINVAL;
}

/* A filter context with the table loaded, except the rows for the system
 * call `allow` (NULL: none); NULL on failure. */
static scmp_filter_ctx
s_ctx_new(int *n_skipped, const char *allow, err_t *err)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        err_set(err, ERR_SANDBOX, "seccomp: cannot initialise libseccomp");
        return NULL;
    }
    int rc =
        seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (rc == 0) /* we set NO_NEW_PRIVS ourselves, earlier */
        rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
    if (rc < 0) {
        err_set(err, ERR_SANDBOX, "seccomp: setting filter attributes: %s",
                strerror(-rc));
        seccomp_release(ctx);
        return NULL;
    }
    *n_skipped = 0;
    for (size_t i = 0; i < sizeof s_rules / sizeof s_rules[0]; i++) {
        if (allow && strcmp(s_rules[i].name, allow) == 0)
            continue;
        int nr = seccomp_syscall_resolve_name(s_rules[i].name);
        if (nr == __NR_SCMP_ERROR || nr < 0) {
            (*n_skipped)++; /* not a system call on this architecture */
            continue;
        }
        rc = s_add(ctx, &s_rules[i], nr);
        if (rc < 0) {
            err_set(err, ERR_SANDBOX, "seccomp: adding the rule for %s: %s",
                    s_rules[i].name, strerror(-rc));
            seccomp_release(ctx);
            return NULL;
        }
    }
    return ctx;
}

int
sb_seccomp_build(sb_seccomp_prog_t *out, err_t *err)
{
    return sb_seccomp_build_allowing(out, NULL, err);
}

int
sb_seccomp_build_allowing(sb_seccomp_prog_t *out, const char *syscall_name,
                          err_t *err)
{
    int rc = -1, fd = -1;
    memset(out, 0, sizeof *out);
    int skipped = 0;
    scmp_filter_ctx ctx = s_ctx_new(&skipped, syscall_name, err);
    if (!ctx)
        return -1;
    fd = memfd_create("ja-seccomp", MFD_CLOEXEC);
    if (fd < 0) {
        err_set(err, ERR_SANDBOX, "seccomp: memfd_create: %s", strerror(errno));
        goto out;
    }
    int e = seccomp_export_bpf(ctx, fd);
    if (e < 0) {
        err_set(err, ERR_SANDBOX, "seccomp: exporting BPF: %s", strerror(-e));
        goto out;
    }
    off_t size = lseek(fd, 0, SEEK_END);
    if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
        size > (off_t)(BPF_MAXINSNS * sizeof(struct sock_filter))) {
        err_set(err, ERR_SANDBOX, "seccomp: exported program has bad size %lld",
                (long long)size);
        goto out;
    }
    out->insns = xmalloc((size_t)size);
    if (pread(fd, out->insns, (size_t)size, 0) != size) {
        err_set(err, ERR_SANDBOX, "seccomp: reading BPF back: %s",
                strerror(errno));
        free(out->insns);
        out->insns = NULL;
        goto out;
    }
    out->len = (size_t)size / sizeof(struct sock_filter);
    out->n_skipped = skipped;
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    seccomp_release(ctx);
    return rc;
}

void
sb_seccomp_prog_release(sb_seccomp_prog_t *prog)
{
    if (!prog)
        return;
    free(prog->insns);
    memset(prog, 0, sizeof *prog);
}

int
sb_seccomp_install(const sb_seccomp_prog_t *prog)
{
    struct sock_fprog fprog = {.len = (unsigned short)prog->len,
                               .filter = (struct sock_filter *)prog->insns};
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0);
}

int
sb_seccomp_export_pfc(int fd, err_t *err)
{
    int skipped = 0;
    scmp_filter_ctx ctx = s_ctx_new(&skipped, NULL, err);
    if (!ctx)
        return -1;
    int rc = seccomp_export_pfc(ctx, fd);
    seccomp_release(ctx);
    if (rc < 0)
        return err_set(err, ERR_SANDBOX, "seccomp: exporting PFC: %s",
                       strerror(-rc));
    return 0;
}
