/* The sandbox launcher: kb_launcher ops over an sb_sandbox_t. */
#include "kb_launch_sandbox.h"

#include "common/xalloc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

static const char *
s_run_dir(void *self)
{
    return sb_sandbox_run_dir(self);
}

static int
s_spawn(void *self, char *const argv[], char *const envp[], int out_fd,
        err_t *err)
{
    return sb_sandbox_spawn(self, argv, envp, out_fd, out_fd, err);
}

static int
s_pidfd(void *self)
{
    return sb_sandbox_pidfd(self);
}

static int
s_signal(void *self, int sig)
{
    return sb_sandbox_signal(self, sig);
}

static int
s_kill(void *self)
{
    return sb_sandbox_kill(self);
}

static int
s_reap(void *self, int timeout_ms, char *why, size_t why_len)
{
    sb_exit_t e;
    int rc = sb_sandbox_wait(self, timeout_ms, &e);
    if (rc == 1)
        return 0;
    if (rc < 0) {
        snprintf(why, why_len, "not running");
        return 1;
    }
    sb_exit_describe(&e, sb_sandbox_policy(self), why, why_len);
    return 1;
}

static char **
s_build_env(void *self, char *const extra[])
{
    return sb_policy_build_env(sb_sandbox_policy(self), environ,
                               (const char *const *)extra);
}

static int
s_adopt_file(void *self, const char *path, err_t *err)
{
    if (chown(path, sb_sandbox_host_uid(self), sb_sandbox_host_gid(self)) ||
        chmod(path, 0600))
        return err_set(err, ERR_SANDBOX,
                       "cannot hand %s to the sandbox user: %s", path,
                       strerror(errno));
    return 0;
}

static void
s_destroy(void *self)
{
    sb_sandbox_t *sb = self;
    sb_sandbox_destroy(&sb);
}

static const kb_launcher_ops_t s_ops = {
    .name = "sandbox",
    .run_dir = s_run_dir,
    .spawn = s_spawn,
    .pidfd = s_pidfd,
    .signal = s_signal,
    .kill = s_kill,
    .reap = s_reap,
    .build_env = s_build_env,
    .adopt_file = s_adopt_file,
    .destroy = s_destroy,
};

kb_launcher_t *
kb_launcher_sandbox_new(const sb_policy_t *policy, err_t *err)
{
    sb_policy_t defaults;
    sb_policy_init_default(&defaults);
    sb_sandbox_t *sb = sb_sandbox_new(policy ? policy : &defaults, err);
    sb_policy_release(&defaults);
    if (!sb)
        return NULL;
    kb_launcher_t *l = xcalloc(1, sizeof *l);
    l->ops = &s_ops;
    l->self = sb;
    return l;
}

sb_sandbox_t *
kb_launcher_sandbox_box(kb_launcher_t *l)
{
    return l && l->ops == &s_ops ? l->self : NULL;
}
