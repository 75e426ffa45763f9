/* sb_sandbox_plan: the mounts a box gets, planned by the parent before
 * clone and carried out by pid 1 (sb_sandbox_child.c). */
#include "sandbox/sb_sandbox.h"

#include "common/buf.h"
#include "common/fileio.h"
#include "common/xalloc.h"
#include "sandbox/sb_cgroup.h"
#include "sandbox/sb_drop.h"
#include "sandbox/sb_files.h"
#include "sandbox/sb_landlock.h"
#include "sandbox/sb_seccomp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/sb_sandbox_impl.h"

static struct s_op *
s_plan_add(struct s_plan *pl, enum s_op_kind kind, const char *dst,
           const char *what)
{
    pl->ops = xrealloc(pl->ops, (pl->n + 1) * sizeof *pl->ops);
    struct s_op *op = &pl->ops[pl->n++];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->dst = xasprintf("/newroot%s", dst);
    op->what = xstrdup(what);
    return op;
}

void
sb_box_plan_release(struct s_plan *pl)
{
    for (size_t i = 0; i < pl->n; i++) {
        free(pl->ops[i].src);
        free(pl->ops[i].dst);
        free(pl->ops[i].data);
        free(pl->ops[i].what);
    }
    free(pl->ops);
    pl->ops = NULL;
    pl->n = 0;
}

static void
s_plan_bind(struct s_plan *pl, const char *host, const char *inside, bool rw,
            bool optional)
{
    struct stat st;
    bool have = stat(host, &st) == 0;
    if (!have && optional)
        return;
    char *what =
        xasprintf("bind %s%s%s", host, strcmp(host, inside) ? " to " : "",
                  strcmp(host, inside) ? inside : "");
    char *what2 = xasprintf("%s %s", what, rw ? "read-write" : "read-only");
    struct s_op *op = s_plan_add(pl, OP_BIND, inside, what2);
    free(what);
    free(what2);
    op->src = xasprintf("/oldroot%s", host);
    op->src_is_dir = have && S_ISDIR(st.st_mode);
    op->rw = rw;
    op->optional = optional;
}

static void
s_plan_write(struct s_plan *pl, const char *inside, const char *content)
{
    char *what = xasprintf("write %s", inside);
    struct s_op *op = s_plan_add(pl, OP_WRITE, inside, what);
    free(what);
    op->src = xstrdup(content);
    op->len = strlen(content);
}

static void
s_plan_symlink(struct s_plan *pl, const char *target, const char *inside)
{
    char *what = xasprintf("symlink %s -> %s", inside, target);
    struct s_op *op = s_plan_add(pl, OP_SYMLINK, inside, what);
    free(what);
    op->src = xstrdup(target);
}

/* SB_BIN_PATH, first on the box's PATH: notebooks and model-written code
 * call `python` (and `pip`), which Debian's /usr lacks. `python` is the
 * box's python3; `pip` answers that there is no network and where
 * packages come from, and passes the read-only subcommands to pip. */
static const char s_pip_script[] =
    "#!/bin/sh\n"
    "# jupyter-agent: the sandbox has no network, so pip cannot download.\n"
    "case \"$1\" in\n"
    "list|show|freeze|check|--version|-V)\n"
    "    exec /usr/bin/python3 -m pip \"$@\" ;;\n"
    "esac\n"
    "cat >&2 <<'EOF'\n"
    "pip: this sandbox has no network, so pip cannot download packages.\n"
    "Packages come only from a directory of wheels signed with\n"
    "'jupyter-agent manifest sign': start the session with\n"
    "  --packages DIR --install NAME[==VERSION]\n"
    "(in 'ask' the model may also call its install_packages tool, which\n"
    "installs from that directory). What is installed: pip list.\n"
    "EOF\n"
    "exit 1\n";

static void
s_plan_bin(struct s_plan *pl)
{
    if (access("/usr/bin/python3", X_OK) == 0)
        s_plan_symlink(pl, "/usr/bin/python3", SB_BIN_PATH "/python");
    const char *names[] = {SB_BIN_PATH "/pip", SB_BIN_PATH "/pip3"};
    for (size_t i = 0; i < 2; i++) {
        char *what = xasprintf("write %s", names[i]);
        struct s_op *op = s_plan_add(pl, OP_WRITE, names[i], what);
        free(what);
        op->src = xstrdup(s_pip_script);
        op->len = strlen(s_pip_script);
        op->exec = true;
    }
}

static void
s_plan_tmpfs(struct s_plan *pl, enum s_op_kind kind, const char *inside,
             uint64_t size, const char *mode_opts, unsigned long flags)
{
    char sz[64];
    char *what = xasprintf("mount tmpfs on %s (%s)", inside,
                           sb_policy_format_bytes(size, sz, sizeof sz));
    struct s_op *op = s_plan_add(pl, kind, inside, what);
    free(what);
    op->data = xasprintf("size=%llu,%s", (unsigned long long)size, mode_opts);
    op->flags = flags;
}

/* /bin, /lib, ...: the same symlink as on the host, or a read-only bind. */
static void
s_plan_top_link(struct s_plan *pl, const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return;
    if (S_ISLNK(st.st_mode)) {
        char target[4096];
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n <= 0)
            return;
        target[n] = '\0';
        s_plan_symlink(pl, target, path);
    } else if (S_ISDIR(st.st_mode)) {
        s_plan_bind(pl, path, path, false, true);
    }
}

/* Landlock (sb_landlock.c, s_box_paths) allows only the trees it lists:
 * a new bind outside /usr, /etc and /proc needs a row there too. */
void
sb_box_plan_build(const sb_sandbox_t *sb, struct s_plan *pl)
{
    const sb_policy_t *p = &sb->policy;
    memset(pl, 0, sizeof *pl);
    s_plan_bind(pl, "/usr", "/usr", false, false);
    static const char *const tops[] = {"/bin",   "/sbin",  "/lib",
                                       "/lib64", "/lib32", "/libx32"};
    for (size_t i = 0; i < sizeof tops / sizeof tops[0]; i++)
        s_plan_top_link(pl, tops[i]);

    s_plan_add(pl, OP_MKDIR, "/etc", "create /etc");
    s_plan_write(
        pl, "/etc/passwd",
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        "user:x:1000:1000:sandbox user:" SB_HOME_PATH ":/bin/sh\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
    s_plan_write(pl, "/etc/group",
                 "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n");
    s_plan_write(pl, "/etc/hosts",
                 "127.0.0.1\tlocalhost sandbox\n"
                 "::1\tlocalhost ip6-localhost ip6-loopback\n");
    s_plan_write(pl, "/etc/hostname", "sandbox\n");
    s_plan_write(pl, "/etc/nsswitch.conf",
                 "passwd: files\ngroup: files\nshadow: files\n"
                 "hosts: files\nnetworks: files\nprotocols: files\n"
                 "services: files\n");
    s_plan_write(pl, "/etc/resolv.conf",
                 "# no network in the sandbox: names resolve from /etc/hosts "
                 "only\noptions attempts:1 timeout:1\n");
    static const char *const etc[] = {
        "/etc/ld.so.cache",  "/etc/ld.so.conf", "/etc/ld.so.conf.d",
        "/etc/alternatives", "/etc/fonts",      "/etc/matplotlibrc",
        "/etc/mime.types",   "/etc/ssl",        "/etc/ca-certificates",
        "/etc/protocols",    "/etc/services",   "/etc/host.conf",
        "/etc/gai.conf",     "/etc/python3",    "/etc/python3.11",
        "/etc/timezone",     "/etc/magic",      "/etc/papersize"};
    for (size_t i = 0; i < sizeof etc / sizeof etc[0]; i++)
        s_plan_bind(pl, etc[i], etc[i], false, true);
    struct stat st;
    if (lstat("/etc/localtime", &st) == 0 && S_ISLNK(st.st_mode))
        s_plan_top_link(pl, "/etc/localtime");
    else
        s_plan_bind(pl, "/etc/localtime", "/etc/localtime", false, true);
    s_plan_bind(pl, "/var/cache/fontconfig", "/var/cache/fontconfig", false,
                true);
    /* --net-secret / --net-ca: the box's CA bundle, also over the system
     * bundle (what certifi and OpenSSL's default file name on Debian). */
    size_t blen = 0;
    char *bundle = sb_box_egress_bundle(sb, &blen);
    if (bundle) {
        struct s_op *op = s_plan_add(pl, OP_WRITE, SB_EGRESS_CA_BUNDLE,
                                     "write " SB_EGRESS_CA_BUNDLE);
        op->src = bundle;
        op->len = blen;
        if (stat(SB_SYSTEM_CA_BUNDLE, &st) == 0) {
            op = s_plan_add(pl, OP_BIND, SB_SYSTEM_CA_BUNDLE,
                            "bind " SB_EGRESS_CA_BUNDLE
                            " over " SB_SYSTEM_CA_BUNDLE " read-only");
            op->src = xstrdup("/newroot" SB_EGRESS_CA_BUNDLE);
        }
    }

    /* /dev: a read-only tmpfs with a few host nodes bound in. */
    s_plan_tmpfs(pl, OP_TMPFS, "/dev", 65536, "mode=0755",
                 MS_NOSUID | MS_NOEXEC);
    static const char *const nodes[] = {"null",   "zero",    "full",
                                        "random", "urandom", "tty"};
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
        char host[64], what[96];
        snprintf(host, sizeof host, "/dev/%s", nodes[i]);
        snprintf(what, sizeof what, "bind device %s", host);
        struct s_op *op = s_plan_add(pl, OP_DEVNODE, host, what);
        op->src = xasprintf("/oldroot%s", host);
        op->optional = strcmp(nodes[i], "tty") == 0;
    }
    s_plan_symlink(pl, "/proc/self/fd", "/dev/fd");
    s_plan_symlink(pl, "/proc/self/fd/0", "/dev/stdin");
    s_plan_symlink(pl, "/proc/self/fd/1", "/dev/stdout");
    s_plan_symlink(pl, "/proc/self/fd/2", "/dev/stderr");
    s_plan_tmpfs(pl, OP_TMPFS, "/dev/shm", p->shm_bytes, "mode=1777",
                 MS_NOSUID | MS_NODEV);
    struct s_op *pts = s_plan_add(pl, OP_DEVPTS, "/dev/pts", "mount devpts");
    pts->optional = true;
    s_plan_symlink(pl, "pts/ptmx", "/dev/ptmx");
    s_plan_add(pl, OP_REMOUNT_RO, "/dev", "remount /dev read-only");

    s_plan_add(pl, OP_PROC, "/proc", "mount /proc");
    static const char *const proc_ro[] = {"/proc/sys", "/proc/sysrq-trigger",
                                          "/proc/irq", "/proc/bus"};
    for (size_t i = 0; i < sizeof proc_ro / sizeof proc_ro[0]; i++) {
        char what[96];
        snprintf(what, sizeof what, "make %s read-only", proc_ro[i]);
        s_plan_add(pl, OP_PROC_RO, proc_ro[i], what)->optional = true;
    }

    s_plan_tmpfs(pl, OP_TMPFS, "/tmp", p->tmp_bytes, "mode=1777",
                 MS_NOSUID | MS_NODEV);
    if (!p->home_is_workspace)
        s_plan_tmpfs(pl, OP_TMPFS, SB_HOME_PATH, p->tmp_bytes,
                     "mode=0700,uid=1000,gid=1000", MS_NOSUID | MS_NODEV);
    s_plan_tmpfs(pl, OP_WORKSPACE, SB_WORKSPACE_PATH, p->workspace_bytes,
                 "mode=0755,uid=1000,gid=1000", MS_NOSUID | MS_NODEV);
    if (p->home_is_workspace) { /* one tmpfs at both paths */
        struct s_op *op = s_plan_add(pl, OP_BIND, SB_HOME_PATH,
                                     "bind " SB_WORKSPACE_PATH
                                     " to " SB_HOME_PATH " read-write");
        op->src = xstrdup("/newroot" SB_WORKSPACE_PATH);
        op->src_is_dir = true;
        op->rw = true;
    }
    /* The run dir is host storage: read-only inside. What the box must
     * write there (the kernel's sockets) goes to the socket dir, a small
     * tmpfs (SB_SOCK_DIR_BYTES, SB_SOCK_DIR_INODES) the host reaches
     * through a symlink (see s_link_sock_dir). */
    s_plan_bind(pl, sb->run_dir, sb->run_dir, false, false);
    char opts[96];
    snprintf(opts, sizeof opts, "nr_inodes=%d,mode=0700,uid=%d,gid=%d",
             SB_SOCK_DIR_INODES, SB_SANDBOX_UID, SB_SANDBOX_UID);
    s_plan_tmpfs(pl, OP_SOCKDIR, sb->sock_dir, SB_SOCK_DIR_BYTES, opts,
                 MS_NOSUID | MS_NODEV | MS_NOEXEC);
    /* Files the host hands the box to use in place (a connection file
     * ipykernel rewrites, matplotlib's cache): copied in at each spawn,
     * as read now. */
    for (size_t i = 0; i < sb->n_box_files; i++) {
        char *data = NULL;
        size_t len = 0;
        if (file_read_small(sb->box_files[i].host, SB_SOCK_DIR_BYTES / 4, true,
                            &data, &len) < 0)
            continue;
        char *inside = xasprintf("%s/%s", sb->sock_dir, sb->box_files[i].name);
        char *what = xasprintf("copy %s to %s", sb->box_files[i].host, inside);
        struct s_op *op = s_plan_add(pl, OP_WRITE, inside, what);
        op->src = data;
        op->len = len;
        op->own = true;
        free(what);
        free(inside);
    }
    s_plan_bin(pl);
    for (size_t i = 0; i < p->n_binds; i++)
        s_plan_bind(pl, p->binds[i].host, p->binds[i].inside, false, false);
    const sb_unsafe_test_knobs_t *k = sb_box_knobs();
    if (k->rw_bind_host && k->rw_bind_inside)
        s_plan_bind(pl, k->rw_bind_host, k->rw_bind_inside, true, false);
}
