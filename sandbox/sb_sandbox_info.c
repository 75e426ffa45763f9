/* sb_sandbox_info: what a box is and holds, for its owner: accessors,
 * files queued in, how the program ended, files read, listed and copied
 * out of /mnt/data (the host side; see sb_sandbox_impl.h). */
#include "sandbox/sb_sandbox.h"

#include "common/buf.h"
#include "common/xalloc.h"
#include "sandbox/sb_cgroup.h"
#include "sandbox/sb_drop.h"
#include "sandbox/sb_engine.h"
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

const sb_policy_t *
sb_sandbox_policy(const sb_sandbox_t *sb)
{
    return &sb->policy;
}

const char *
sb_sandbox_run_dir(const sb_sandbox_t *sb)
{
    return sb->run_dir;
}

uid_t
sb_sandbox_host_uid(const sb_sandbox_t *sb)
{
    return sb->host_uid;
}

gid_t
sb_sandbox_host_gid(const sb_sandbox_t *sb)
{
    return sb->host_gid;
}

const char *
sb_sandbox_workspace(const sb_sandbox_t *sb)
{
    return sb->ws_fd >= 0 ? sb->ws_path : NULL;
}

int
sb_sandbox_workspace_fd(const sb_sandbox_t *sb)
{
    return sb->ws_fd;
}

char *
sb_sandbox_seccomp_audit_report(sb_sandbox_t *sb)
{
    if (!sb->policy.seccomp_audit)
        return NULL;
    char *calls = sb->audit ? sb_seccomp_audit_report(sb->audit) : NULL;
    char *out =
        xasprintf("seccomp audit: %s%s", calls ? "the allow list lacks " : "",
                  calls ? calls : "every system call was on the allow list");
    free(calls);
    return out;
}

const char *
sb_sandbox_warnings(const sb_sandbox_t *sb)
{
    return sb->warnings.len ? buf_cstr(&sb->warnings) : NULL;
}

int
sb_sandbox_set_cpu_weight(sb_sandbox_t *sb, unsigned weight)
{
    return sb_cgroup_set_cpu_weight(sb->cg, weight);
}

const char *
sb_sandbox_cgroup_dir(const sb_sandbox_t *sb, const char *controller)
{
    return sb_cgroup_dir(sb->cg, controller);
}

pid_t
sb_sandbox_pid(const sb_sandbox_t *sb)
{
    return sb->pid;
}

int
sb_sandbox_pidfd(const sb_sandbox_t *sb)
{
    return sb->pidfd;
}

void
sb_sandbox_nest_in(sb_sandbox_t *sb, const sb_sandbox_t *outer)
{
    sb->nest = outer;
}

void
sb_sandbox_allow_setns(sb_sandbox_t *sb)
{
    sb->allow_setns = true;
}

void
sb_sandbox_set_stdin(sb_sandbox_t *sb, int fd)
{
    sb->stdin_fd = fd;
}

void
sb_sandbox_set_stdin_ctty(sb_sandbox_t *sb, bool on)
{
    sb->stdin_ctty = on;
}

int
sb_sandbox_add_file(sb_sandbox_t *sb, const char *host_path,
                    const char *name_or_null, err_t *err)
{
    if (sb->state == ST_RUNNING)
        return err_set(err, ERR_USAGE,
                       "sandbox: files can only be added while no box runs");
    const char *name = name_or_null;
    char base[256];
    if (!name) {
        const char *end = host_path + strlen(host_path);
        while (end > host_path && end[-1] == '/')
            end--;
        const char *start = end;
        while (start > host_path && start[-1] != '/')
            start--;
        size_t n = (size_t)(end - start);
        if (n == 0 || n >= sizeof base)
            return err_set(err, ERR_USAGE, "--file '%s': no usable file name",
                           host_path);
        memcpy(base, start, n);
        base[n] = '\0';
        name = base;
    }
    if (sb_files_check_name(name, err) < 0)
        return err_prefix(err, "--file '%s'", host_path);
    for (size_t i = 0; i < sb->n_files; i++)
        if (strcmp(sb->files[i].name, name) == 0)
            return err_set(err, ERR_USAGE,
                           "--file '%s': /mnt/data/%s is already taken by '%s'",
                           host_path, name, sb->files[i].host);
    struct stat st;
    if (stat(host_path, &st) < 0)
        return err_errno(err, ERR_USAGE, "--file '%s'", host_path);
    if (!S_ISREG(st.st_mode))
        return err_set(err, ERR_USAGE, "--file '%s': not a regular file",
                       host_path);
    if ((uint64_t)st.st_size > sb->policy.workspace_bytes)
        return err_set(err, ERR_USAGE,
                       "--file '%s': %lld bytes do not fit in /mnt/data; "
                       "raise --disk",
                       host_path, (long long)st.st_size);
    sb->files = xrealloc(sb->files, (sb->n_files + 1) * sizeof *sb->files);
    sb->files[sb->n_files].host = xstrdup(host_path);
    sb->files[sb->n_files].name = xstrdup(name);
    sb->n_files++;
    return 0;
}

const char *
sb_exit_describe(const sb_exit_t *e, const sb_policy_t *p, char *buf,
                 size_t size)
{
    char lim[64];
    const char *name = NULL;
    switch (e->kind) {
    case SB_EXITED:
        snprintf(buf, size, "exited with status %d", e->code);
        break;
    case SB_OOM_KILLED:
        snprintf(
            buf, size, "killed: out of memory (limit %s)",
            sb_policy_format_bytes(p ? p->memory_bytes : 0, lim, sizeof lim));
        break;
    case SB_SIGNALED:
        if (e->pids_limit) {
            snprintf(buf, size,
                     "killed: the gVisor sandbox reached its host thread "
                     "limit (192 + 6 x --pids %u, for gVisor's own threads) "
                     "and everything in it ended; raise --pids",
                     p ? p->pids : 0);
            break;
        }
        name = sigabbrev_np(e->signal);
        snprintf(buf, size, "killed by signal %d (SIG%s)%s", e->signal,
                 name ? name : "?",
                 e->signal == SIGSYS ? ": a forbidden system call" : "");
        break;
    default:
        snprintf(buf, size, "has not ended");
    }
    return buf;
}

int
sb_exit_status(const sb_exit_t *e)
{
    return e->kind == SB_EXITED ? e->code : 128 + e->signal;
}

int
sb_sandbox_read_file(sb_sandbox_t *sb, const char *relpath, size_t max_bytes,
                     char **data, size_t *len, err_t *err)
{
    if (sb->ws_fd < 0)
        return err_set(err, ERR_USAGE, "sandbox: no workspace yet");
    return sb_files_read(sb->ws_fd, relpath, max_bytes, data, len, err);
}

int
sb_sandbox_copy_out(sb_sandbox_t *sb, const char *rel_dir,
                    const char *host_dest_dir, const sb_files_out_opts_t *o,
                    size_t *n_copied, err_t *err)
{
    if (n_copied)
        *n_copied = 0;
    if (sb->ws_fd < 0)
        return err_set(err, ERR_USAGE, "sandbox: no workspace yet");
    return sb_files_copy_out(sb->ws_fd, rel_dir, host_dest_dir, o, n_copied,
                             err);
}

int
sb_sandbox_mkdir(sb_sandbox_t *sb, const char *name, err_t *err)
{
    if (sb->ws_fd < 0)
        return err_set(err, ERR_SANDBOX,
                       "sandbox: /mnt/data exists only while the box runs");
    return sb_files_mkdir(sb->ws_fd, name,
                          sb->root_mode ? sb->host_uid : (uid_t)-1,
                          sb->host_gid, err);
}

int
sb_sandbox_copy_in_fd(sb_sandbox_t *sb, int in, const char *shown,
                      const char *name, err_t *err)
{
    if (sb->ws_fd < 0)
        return err_set(err, ERR_SANDBOX,
                       "sandbox: /mnt/data exists only while the box runs");
    return sb_files_copy_in_fd(
        sb->ws_fd, in, shown, name, sb->policy.workspace_bytes,
        sb->root_mode ? sb->host_uid : (uid_t)-1, sb->host_gid, err);
}

json_t *
sb_sandbox_list_files(sb_sandbox_t *sb, size_t max_entries)
{
    if (sb->ws_fd < 0)
        return json_array();
    return sb_files_list(sb->ws_fd, max_entries);
}

bool
sb_sandbox_shows_host_path(const sb_sandbox_t *sb, const char *host_path)
{
    char *real = realpath(host_path, NULL);
    if (!real)
        return false;
    struct s_plan plan;
    sb_box_plan_build(sb, &plan);
    bool shown = false;
    for (size_t i = 0; i < plan.n && !shown; i++) {
        const struct s_op *op = &plan.ops[i];
        /* src is "/oldroot" + host path, dst "/newroot" + inside path. */
        if (op->kind != OP_BIND || strncmp(op->src, "/oldroot", 8) ||
            strcmp(op->src + 8, op->dst + 8))
            continue; /* only binds that keep the host path */
        const char *host = op->src + 8;
        size_t n = strlen(host);
        shown = !strncmp(real, host, n) && (real[n] == '/' || !real[n]);
    }
    sb_box_plan_release(&plan);
    free(real);
    return shown;
}

int
sb_sandbox_add_bind(sb_sandbox_t *sb, const char *host, err_t *err)
{
    return sb_policy_add_bind(&sb->policy, host, NULL, err);
}

json_t *
sb_sandbox_engine_info(const sb_policy_t *p)
{
    if (p->engine == SB_ENGINE_GVISOR)
        return sb_gvisor_info();
    json_t *j = json_pack(
        "{s:s, s:[ssss]}", "engine", sb_engine_name(p->engine), "in_force",
        "user, pid, network (loopback only), mount, IPC, UTS and cgroup "
        "namespaces",
        "seccomp allow list (sandbox --seccomp-table)",
        "Landlock (sandbox --landlock-rules)",
        "cgroup (memory, cpu, pids), rlimits, uid 1000, no capabilities, "
        "no_new_privs");
    if (p->engine == SB_ENGINE_BAD)
        json_object_set_new(
            j, "error",
            json_string("JUPYTER_AGENT_ENGINE names no engine (namespaces, "
                        "gvisor)"));
    return j;
}
