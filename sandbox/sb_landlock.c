/*
 * sb_landlock: the plan (host side) and its application (box side).
 *
 * Reading guide: s_box_paths is the whole filesystem policy; the rest
 * maps kinds to rights per ABI. The uapi header on older systems lacks
 * the newer constants, so they are spelled here (stable kernel ABI).
 */
#include "sandbox/sb_landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

/* Filesystem rights, by the ABI that introduced them. */
#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_REMOVE_DIR (1ULL << 4)
#define LL_FS_REMOVE_FILE (1ULL << 5)
#define LL_FS_MAKE_CHAR (1ULL << 6)
#define LL_FS_MAKE_DIR (1ULL << 7)
#define LL_FS_MAKE_REG (1ULL << 8)
#define LL_FS_MAKE_SOCK (1ULL << 9)
#define LL_FS_MAKE_FIFO (1ULL << 10)
#define LL_FS_MAKE_BLOCK (1ULL << 11)
#define LL_FS_MAKE_SYM (1ULL << 12)
#define LL_FS_ABI1 ((1ULL << 13) - 1)
#define LL_FS_REFER (1ULL << 13)     /* ABI 2 */
#define LL_FS_TRUNCATE (1ULL << 14)  /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
/* The rights that apply to a file (Landlock refuses others on one). */
#define LL_FS_FILE_RIGHTS                                                      \
    (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE |     \
     LL_FS_IOCTL_DEV)
/* Network rights (ABI 4) and scopes (ABI 6). */
#define LL_NET_BIND_TCP (1ULL << 0)
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_RULE_NET_PORT 2

struct s_net_port {
    uint64_t allowed_access;
    uint64_t port;
} __attribute__((packed));

/* struct landlock_ruleset_attr as of ABI 6; older kernels get a prefix. */
struct s_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

struct s_path_beneath {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

/* The filesystem policy of a box. Paths missing inside are skipped.
 * Mirrors what sb_sandbox.c's s_plan_build mounts: a bind added there
 * outside these trees stays unreadable until it has a row here. */
static const struct {
    const char *path;
    sb_landlock_kind_t kind;
} s_box_paths[] = {
    {"/", SB_LL_LIST},
    {"/usr", SB_LL_READ_EXEC},
    {"/bin", SB_LL_READ_EXEC},
    {"/sbin", SB_LL_READ_EXEC},
    {"/lib", SB_LL_READ_EXEC},
    {"/lib64", SB_LL_READ_EXEC},
    {"/lib32", SB_LL_READ_EXEC},
    {"/libx32", SB_LL_READ_EXEC},
    {"/etc", SB_LL_READ_EXEC},
    {SB_BIN_PATH, SB_LL_READ_EXEC}, /* python and pip (sb_sandbox_plan.c) */
    {"/var/cache/fontconfig", SB_LL_READ_EXEC},
    {"/proc", SB_LL_READ_EXEC},
    {"/dev/null", SB_LL_DEVICE},
    {"/dev/zero", SB_LL_DEVICE},
    {"/dev/full", SB_LL_DEVICE},
    {"/dev/random", SB_LL_DEVICE},
    {"/dev/urandom", SB_LL_DEVICE},
    {"/dev/tty", SB_LL_DEVICE},
    {"/dev/pts", SB_LL_DEVICE},
    {SB_WORKSPACE_PATH, SB_LL_READ_WRITE},
    {"/tmp", SB_LL_READ_WRITE},
    {SB_HOME_PATH, SB_LL_READ_WRITE},
    {"/dev/shm", SB_LL_READ_WRITE},
};

int
sb_landlock_abi(void)
{
    static int abi = -1;
    if (abi < 0) {
        long v = syscall(SYS_landlock_create_ruleset, NULL, 0,
                         LANDLOCK_CREATE_RULESET_VERSION);
        abi = v > 0 ? (int)v : 0;
    }
    return abi;
}

static uint64_t
s_handled_fs(int abi)
{
    uint64_t fs = LL_FS_ABI1;
    if (abi >= 2)
        fs |= LL_FS_REFER;
    if (abi >= 3)
        fs |= LL_FS_TRUNCATE;
    if (abi >= 5)
        fs |= LL_FS_IOCTL_DEV;
    return fs;
}

static void
s_add(sb_landlock_plan_t *pl, const char *path, sb_landlock_kind_t kind)
{
    if (pl->n == SB_LANDLOCK_MAX_RULES ||
        strlen(path) >= sizeof pl->rules[0].path)
        return; /* left out: the path stays closed, never more open */
    snprintf(pl->rules[pl->n].path, sizeof pl->rules[pl->n].path, "%s", path);
    pl->rules[pl->n].kind = kind;
    pl->n++;
}

void
sb_landlock_plan_box(sb_landlock_plan_t *pl, int abi, const sb_policy_t *p,
                     const char *run_dir)
{
    memset(pl, 0, sizeof *pl);
    pl->abi = abi;
    if (abi <= 0)
        return;
    pl->handled_fs = s_handled_fs(abi);
    if (abi >= 4)
        pl->handled_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
    if (abi >= 4 && p && p->allow_net)
        pl->net_port = SB_EGRESS_PORT;
    if (abi >= 6)
        pl->scoped = LL_SCOPE_ABSTRACT_UNIX;
    for (size_t i = 0; i < sizeof s_box_paths / sizeof s_box_paths[0]; i++)
        s_add(pl, s_box_paths[i].path, s_box_paths[i].kind);
    if (run_dir)
        s_add(pl, run_dir, SB_LL_READ_WRITE);
    for (size_t i = 0; p && i < p->n_binds; i++)
        s_add(pl, p->binds[i].inside, SB_LL_READ_EXEC);
}

uint64_t
sb_landlock_rule_access(const sb_landlock_plan_t *pl,
                        const sb_landlock_rule_t *r)
{
    uint64_t a = 0;
    switch (r->kind) {
    case SB_LL_LIST:
        a = LL_FS_READ_DIR;
        break;
    case SB_LL_READ_EXEC:
        a = LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR;
        break;
    case SB_LL_READ_WRITE:
        a = s_handled_fs(pl->abi) &
            ~(LL_FS_MAKE_CHAR | LL_FS_MAKE_BLOCK | LL_FS_IOCTL_DEV);
        break;
    case SB_LL_DEVICE:
        a = LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_TRUNCATE |
            LL_FS_IOCTL_DEV;
        break;
    }
    return a & pl->handled_fs;
}

int
sb_landlock_prepare(const sb_landlock_plan_t *pl)
{
    if (pl->abi <= 0)
        return -2;
    struct s_ruleset_attr attr = {.handled_access_fs = pl->handled_fs,
                                  .handled_access_net = pl->handled_net,
                                  .scoped = pl->scoped};
    size_t size = pl->abi >= 6   ? sizeof attr
                  : pl->abi >= 4 ? 2 * sizeof(uint64_t)
                                 : sizeof(uint64_t);
    int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (rs < 0)
        return -1;
    for (size_t i = 0; i < pl->n; i++) {
        const sb_landlock_rule_t *r = &pl->rules[i];
        int fd = open(r->path, O_PATH | O_CLOEXEC);
        if (fd < 0)
            continue; /* not in this box: nothing to allow */
        struct stat st;
        struct s_path_beneath pb = {
            .allowed_access = sb_landlock_rule_access(pl, r), .parent_fd = fd};
        bool dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
        if (!dir) /* a bound file (--bind of a single file) */
            pb.allowed_access &= LL_FS_FILE_RIGHTS;
        else if (r->kind == SB_LL_DEVICE) /* /dev/pts: list it too */
            pb.allowed_access |= LL_FS_READ_DIR;
        long rc =
            syscall(SYS_landlock_add_rule, rs, LL_RULE_PATH_BENEATH, &pb, 0);
        int e = errno;
        close(fd);
        if (rc < 0) {
            close(rs);
            errno = e;
            return -1;
        }
    }
    if (pl->net_port) {
        struct s_net_port np = {.allowed_access = LL_NET_CONNECT_TCP,
                                .port = pl->net_port};
        if (syscall(SYS_landlock_add_rule, rs, LL_RULE_NET_PORT, &np, 0) < 0) {
            int e = errno;
            close(rs);
            errno = e;
            return -1;
        }
    }
    return rs;
}

int
sb_landlock_enforce(int fd)
{
    return (int)syscall(SYS_landlock_restrict_self, fd, 0);
}

json_t *
sb_landlock_plan_json(const sb_landlock_plan_t *pl)
{
    json_t *rules = json_array();
    for (size_t i = 0; i < pl->n; i++)
        json_array_append_new(
            rules,
            json_pack("[s, I, b]", pl->rules[i].path,
                      (json_int_t)sb_landlock_rule_access(pl, &pl->rules[i]),
                      pl->rules[i].kind == SB_LL_DEVICE));
    size_t size = pl->abi >= 6   ? sizeof(struct s_ruleset_attr)
                  : pl->abi >= 4 ? 2 * sizeof(uint64_t)
                                 : sizeof(uint64_t);
    return json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "abi",
                     pl->abi, "handled_fs", (json_int_t)pl->handled_fs,
                     "handled_net", (json_int_t)pl->handled_net, "scoped",
                     (json_int_t)pl->scoped, "attr_size", (json_int_t)size,
                     "net_port", (json_int_t)pl->net_port, "read_dir",
                     (json_int_t)LL_FS_READ_DIR, "file_rights",
                     (json_int_t)LL_FS_FILE_RIGHTS, "rules", rules);
}

const char *
sb_landlock_describe(const sb_landlock_plan_t *pl, char *buf, size_t size)
{
    if (pl->abi <= 0) {
        snprintf(buf, size, "Landlock: not available on this kernel");
        return buf;
    }
    size_t at =
        (size_t)snprintf(buf, size, "Landlock ABI %d: files (", pl->abi);
    static const struct {
        sb_landlock_kind_t kind;
        const char *words;
    } groups[] = {{SB_LL_READ_EXEC, "read-only"},
                  {SB_LL_READ_WRITE, "read-write"},
                  {SB_LL_DEVICE, "devices"}};
    bool first_group = true;
    for (size_t g = 0; g < 3; g++) {
        bool first = true;
        for (size_t i = 0; i < pl->n && at < size; i++) {
            if (pl->rules[i].kind != groups[g].kind)
                continue;
            if (first)
                at +=
                    (size_t)snprintf(buf + at, size - at, "%s%s ",
                                     first_group ? "" : "; ", groups[g].words);
            else if (at < size)
                at += (size_t)snprintf(buf + at, size - at, ", ");
            if (at < size)
                at += (size_t)snprintf(buf + at, size - at, "%s",
                                       pl->rules[i].path);
            first = first_group = false;
        }
    }
    if (at < size)
        at += (size_t)snprintf(
            buf + at, size - at, ")%s%s",
            pl->handled_net
                ? (pl->net_port ? ", TCP bind denied, TCP connect only to "
                                  "the egress proxy's port"
                                : ", TCP bind and connect denied")
                : ", TCP not restricted (needs ABI 4)",
            pl->scoped ? ", abstract unix sockets scoped to the box" : "");
    return buf;
}

const char *
sb_landlock_gap(int abi)
{
    if (abi <= 0)
        return "Landlock is not available (Linux < 5.13, or not in the "
               "kernel's lsm= list): files and network rest on the "
               "namespaces and seccomp alone";
    if (abi < 4)
        return "Landlock ABI < 4 (Linux < 6.7): TCP bind and connect are "
               "not restricted by Landlock, only by the network namespace";
    return NULL;
}
