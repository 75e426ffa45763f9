/* sb_oci: a box's plan (sb_sandbox_plan.c) as an OCI bundle for runsc.
 *
 * The plan's operations map one to one: binds stay binds (read-only
 * unless the plan says otherwise), tmpfs mounts become gVisor's own tmpfs
 * with the same size and mode (pages in the Sentry, charged to the box's
 * cgroup), files the plan writes and its symlinks go into a fresh host
 * rootfs that the box sees read-only, /proc is gVisor's. /dev and its
 * nodes are gVisor's own (null, zero, full, random, urandom, tty, pts,
 * shm). The workspace is a bind of a host tmpfs (sb_gvisor.c) so that the
 * host reaches it; the socket dir is a tmpfs inside gVisor, so that the
 * kernel's sockets are the Sentry's, never the host's. Files for the
 * socket dir wait in SB_GV_BOX_FILES; the relay copies them in. */
#include "sandbox/sb_gvisor.h"

#include "common/xalloc.h"
#include "sandbox/sb_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/sb_sandbox_impl.h"

/* mkdir -p of `path` (absolute host path). */
static int
s_mkdir_p(const char *path)
{
    char *p = xstrdup(path);
    int rc = 0;
    for (char *s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
        if (s)
            *s = '\0';
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            rc = -1;
        if (!s || rc)
            break;
        *s = '/';
    }
    free(p);
    return rc;
}

static int
s_mkdir_parent(const char *path)
{
    char *p = xstrdup(path);
    char *slash = strrchr(p, '/');
    int rc = 0;
    if (slash && slash != p) {
        *slash = '\0';
        rc = s_mkdir_p(p);
    }
    free(p);
    return rc;
}

static int
s_write(const char *path, const char *data, size_t len, mode_t mode)
{
    if (s_mkdir_parent(path) < 0)
        return -1;
    int fd =
        open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, data + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)n;
    }
    fchmod(fd, mode);
    return close(fd);
}

static json_t *
s_mount(const char *dst, const char *type, const char *src)
{
    return json_pack("{s:s, s:s, s:s, s:[]}", "destination", dst, "type", type,
                     "source", src, "options");
}

static void
s_opt(json_t *m, const char *o)
{
    json_array_append_new(json_object_get(m, "options"), json_string(o));
}

/* A tmpfs with the plan's data ("size=N,mode=...,uid=...") and flags. */
static json_t *
s_tmpfs(const char *dst, const char *data, unsigned long flags)
{
    json_t *m = s_mount(dst, "tmpfs", "tmpfs");
    char *d = xstrdup(data ? data : "");
    char *save = NULL;
    for (char *t = strtok_r(d, ",", &save); t; t = strtok_r(NULL, ",", &save))
        s_opt(m, t);
    free(d);
    if (flags & MS_NOSUID)
        s_opt(m, "nosuid");
    if (flags & MS_NODEV)
        s_opt(m, "nodev");
    if (flags & MS_NOEXEC)
        s_opt(m, "noexec");
    return m;
}

static json_t *
s_rlimit(const char *type, uint64_t v)
{
    return json_pack("{s:s, s:I, s:I}", "type", type, "hard", (json_int_t)v,
                     "soft", (json_int_t)v);
}

int
sb_oci_write_bundle(const struct sb_sandbox *sb, const struct s_plan *pl,
                    const sb_oci_args_t *a, err_t *err)
{
    const sb_policy_t *p = &sb->policy;
    char *root = xasprintf("%s/rootfs", a->bundle);
    sb_files_remove_tree(root);
    json_t *mounts = json_array();
    int rc = -1;
    const char *step = "create the rootfs";
    char *tmp = NULL;
    if (s_mkdir_p(root) < 0)
        goto out;
    size_t sock_len = strlen(sb->sock_dir);
    for (size_t i = 0; i < pl->n; i++) {
        const struct s_op *op = &pl->ops[i];
        const char *dst = op->dst + strlen("/newroot");
        free(tmp);
        tmp = xasprintf("%s%s", root, dst);
        step = op->what;
        switch (op->kind) {
        case OP_MKDIR:
            if (s_mkdir_p(tmp) < 0)
                goto out;
            break;
        case OP_SYMLINK:
            if (s_mkdir_parent(tmp) < 0 || symlink(op->src, tmp) < 0)
                goto out;
            break;
        case OP_BIND: {
            const char *src = op->src + strlen("/oldroot");
            /* a bind of a path inside the box: only the workspace has one
             * on the host (home_is_workspace) */
            if (strncmp(op->src, "/newroot", 8) == 0)
                src = strcmp(op->src + 8, SB_WORKSPACE_PATH) == 0 ? a->ws_host
                                                                  : "";
            struct stat st;
            if (stat(src, &st) < 0) {
                if (op->optional)
                    break;
                goto out;
            }
            json_t *m = s_mount(dst, "bind", src);
            s_opt(m, "rbind");
            s_opt(m, op->rw ? "rw" : "ro");
            json_array_append_new(mounts, m);
            if (S_ISDIR(st.st_mode) ? s_mkdir_p(tmp) < 0
                                    : s_write(tmp, "", 0, 0444) < 0)
                goto out;
            break;
        }
        case OP_TMPFS:
            if (strcmp(dst, "/dev") == 0)
                break; /* gVisor's own /dev */
            json_array_append_new(mounts, s_tmpfs(dst, op->data, op->flags));
            if (strncmp(dst, "/dev/", 5) != 0 && s_mkdir_p(tmp) < 0)
                goto out;
            break;
        case OP_SOCKDIR:
            json_array_append_new(mounts, s_tmpfs(dst, op->data, op->flags));
            break;
        case OP_WORKSPACE: {
            json_t *m = s_mount(dst, "bind", a->ws_host);
            s_opt(m, "rbind");
            s_opt(m, "rw");
            s_opt(m, "nosuid");
            s_opt(m, "nodev");
            json_array_append_new(mounts, m);
            if (s_mkdir_p(tmp) < 0)
                goto out;
            break;
        }
        case OP_PROC:
            json_array_append_new(mounts, s_mount("/proc", "proc", "proc"));
            if (s_mkdir_p(tmp) < 0)
                goto out;
            break;
        case OP_WRITE:
            if (strncmp(dst, sb->sock_dir, sock_len) == 0 &&
                dst[sock_len] == '/') {
                /* for the socket dir: the relay copies it in */
                free(tmp);
                tmp =
                    xasprintf("%s" SB_GV_BOX_FILES "%s", root, dst + sock_len);
                if (s_write(tmp, op->src, op->len, 0444) < 0)
                    goto out;
            } else if (s_write(tmp, op->src, op->len, op->exec ? 0555 : 0444) <
                       0) {
                goto out;
            }
            break;
        case OP_DEVNODE:    /* gVisor's /dev has them */
        case OP_PROC_RO:    /* gVisor's /proc/sys is read-only */
        case OP_DEVPTS:     /* gVisor's own */
        case OP_REMOUNT_RO: /* /dev: gVisor's */
            break;
        }
    }
    step = "write the relay";
    free(tmp);
    tmp = xasprintf("%s" SB_GV_BOX_FILES, root);
    if (s_mkdir_p(tmp) < 0)
        goto out;
    free(tmp);
    tmp = xasprintf("%s" SB_GV_DIR "/relay.py", root);
    if (s_write(tmp, a->relay_script, a->relay_len, 0444) < 0)
        goto out;
    free(tmp);
    tmp = xasprintf("%s" SB_GV_RELAY_DIR, root);
    if (s_mkdir_p(tmp) < 0)
        goto out;
    json_t *m = s_mount(SB_GV_RELAY_DIR, "bind", a->relay_dir);
    s_opt(m, "rbind");
    s_opt(m, "ro");
    json_array_append_new(mounts, m);

    json_t *args = json_pack("[sssss]", "/usr/bin/python3", "-I", "-S",
                             SB_GV_DIR "/relay.py", SB_GV_RELAY_DIR "/relay");
    json_array_append_new(args, json_string(sb->sock_dir));
    json_array_append_new(args, json_string(SB_GV_BOX_FILES));
    json_array_append_new(args, json_string(a->merge_stdio ? "--2>&1" : "--"));
    for (char *const *v = a->argv; *v; v++)
        json_array_append_new(args, json_string(*v));
    json_t *env = json_array();
    for (char *const *v = a->envp; *v; v++)
        json_array_append_new(env, json_string(*v));
    json_t *rl = json_pack("[ooo]", s_rlimit("RLIMIT_NOFILE", p->nofile),
                           s_rlimit("RLIMIT_FSIZE", sb_policy_fsize(p)),
                           s_rlimit("RLIMIT_NPROC", p->pids));
    if (!sb_cgroup_limits_memory(sb->cg))
        json_array_append_new(rl, s_rlimit("RLIMIT_DATA", p->memory_bytes));
    json_t *caps =
        json_pack("{s:[], s:[], s:[], s:[], s:[]}", "bounding", "effective",
                  "inheritable", "permitted", "ambient");
    json_t *process = json_pack(
        "{s:b, s:{s:i, s:i}, s:o, s:o, s:s, s:o, s:b, s:o}", "terminal", 0,
        "user", "uid", SB_SANDBOX_UID, "gid", SB_SANDBOX_UID, "args", args,
        "env", env, "cwd", SB_WORKSPACE_PATH, "capabilities", caps,
        "noNewPrivileges", 1, "rlimits", rl);
    json_t *cfg = json_pack(
        "{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:{s:[{s:s}, {s:s}, {s:s}, "
        "{s:s}, {s:s}]}}",
        "ociVersion", "1.0.0", "process", process, "root", "path", "rootfs",
        "readonly", 1, "hostname", "sandbox", "mounts", mounts, "linux",
        "namespaces", "type", "pid", "type", "network", "type", "ipc", "type",
        "uts", "type", "mount");
    mounts = NULL;
    step = "write config.json";
    free(tmp);
    tmp = xasprintf("%s/config.json", a->bundle);
    if (!cfg || json_dump_file(cfg, tmp, JSON_COMPACT) < 0) {
        json_decref(cfg);
        goto out;
    }
    json_decref(cfg);
    rc = 0;
out:
    if (rc < 0)
        err_set(err, ERR_SANDBOX, "sandbox: gVisor bundle: %s: %s", step,
                errno ? strerror(errno) : "failed");
    json_decref(mounts);
    free(tmp);
    free(root);
    return rc;
}
