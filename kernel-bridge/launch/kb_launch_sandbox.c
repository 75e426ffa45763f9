/* The sandbox launcher: kb_launcher ops over an sb_sandbox_t. */
#include "kb_launch_sandbox.h"

#include "common/xalloc.h"
#include "kernel-bridge/pool/kb_mpl_cache.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* The launcher's state: the box, and environment it adds for the kernel. */
typedef struct boxed {
    sb_sandbox_t *box; /* owned */
    char *mpl_env;     /* owned "MPLCONFIGDIR=..." or NULL */
} boxed_t;

#define BOX(self) (((boxed_t *)(self))->box)

static const char *
s_run_dir(void *self)
{
    return sb_sandbox_run_dir(BOX(self));
}

static const char *
s_sock_dir(void *self)
{
    return sb_sandbox_sock_dir(BOX(self));
}

int
kb_sandbox_check_program(sb_sandbox_t *box, const char *prog, err_t *err)
{
    if (!prog || prog[0] != '/' || sb_sandbox_shows_host_path(box, prog))
        return 0; /* sb_sandbox_spawn explains a relative path */
    char *dir = xstrdup(prog);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir)
        *slash = '\0';
    /* Advice that works when followed: a directory on the way that lets
     * no other user through cannot be bound (the box is another user);
     * else the whole installation, as an interpreter needs its lib/ too. */
    char *closed = NULL;
    for (size_t i = 1, n = strlen(dir); i <= n && !closed; i++) {
        if (dir[i] != '/' && dir[i] != '\0')
            continue;
        char *upto = xstrndup(dir, i);
        struct stat st;
        if (stat(upto, &st) == 0 && S_ISDIR(st.st_mode) &&
            !(st.st_mode & S_IXOTH))
            closed = upto;
        else
            free(upto);
    }
    if (closed) {
        err_set(err, ERR_SANDBOX,
                "the kernel program %s is not visible inside the sandbox, "
                "and --bind cannot show it: %s lets no other user through, "
                "and the box runs as another user; install the kernel where "
                "every user can read it (e.g. python3 -m venv "
                "/opt/kernels/NAME, then NAME's ipykernel install), or use "
                "--no-sandbox",
                prog, closed);
        free(closed);
        free(dir);
        return -1;
    }
    size_t n = strlen(dir);
    if (n > 4 && strcmp(dir + n - 4, "/bin") == 0)
        dir[n - 4] = '\0'; /* the installation's prefix */
    err_set(err, ERR_SANDBOX,
            "the kernel program %s is not visible inside the sandbox (it "
            "sees /usr, /bin, /lib and --bind paths); add --bind %s (the "
            "whole installation, read-only), or use --no-sandbox",
            prog, dir);
    free(dir);
    return -1;
}

/* Show the kernel's runtime files (kb_kernelspec_runtime_paths) that the
 * box does not show yet, read-only at the same path; paths a bind cannot
 * take (under /tmp or another place the box manages) are left out. */
static int
s_prepare(void *self, const kb_kernelspec_t *spec, err_t *err)
{
    (void)err;
    char **paths = kb_kernelspec_runtime_paths(spec);
    for (char **p = paths; *p; p++) {
        err_t skip = {0}; /* best effort: a path under /tmp cannot be bound */
        if (!sb_sandbox_shows_host_path(BOX(self), *p))
            (void)sb_sandbox_add_bind(BOX(self), *p, &skip);
    }
    strv_free(paths);
    return 0;
}

static int
s_spawn(void *self, char *const argv[], char *const envp[], int out_fd,
        err_t *err)
{
    if (kb_sandbox_check_program(BOX(self), argv ? argv[0] : NULL, err))
        return -1;
    return sb_sandbox_spawn(BOX(self), argv, envp, out_fd, out_fd, err);
}

static int
s_pidfd(void *self)
{
    return sb_sandbox_pidfd(BOX(self));
}

static int
s_signal(void *self, int sig)
{
    return sb_sandbox_signal(BOX(self), sig);
}

static int
s_kill(void *self)
{
    return sb_sandbox_kill(BOX(self));
}

int
kb_sandbox_reap(sb_sandbox_t *box, int timeout_ms, char *why, size_t why_len)
{
    sb_exit_t e;
    int rc = sb_sandbox_wait(box, timeout_ms, &e);
    if (rc == 1)
        return 0;
    if (rc < 0) {
        snprintf(why, why_len, "not running");
        return 1;
    }
    sb_exit_describe(&e, sb_sandbox_policy(box), why, why_len);
    return 1;
}

static int
s_reap(void *self, int timeout_ms, char *why, size_t why_len)
{
    return kb_sandbox_reap(BOX(self), timeout_ms, why, why_len);
}

static char **
s_build_env(void *self, char *const extra[])
{
    boxed_t *b = self;
    /* Ours first, so the kernelspec and the caller may override it. */
    size_t n = 0;
    while (extra && extra[n])
        n++;
    const char **all = xcalloc(n + 2, sizeof *all);
    size_t k = 0;
    if (b->mpl_env)
        all[k++] = b->mpl_env;
    for (size_t i = 0; i < n; i++)
        all[k++] = extra[i];
    char **env = sb_policy_build_env(sb_sandbox_policy(b->box), environ, all);
    free(all);
    return env;
}

int
kb_sandbox_adopt_file(sb_sandbox_t *box, const char *path, err_t *err)
{
    if (chown(path, sb_sandbox_host_uid(box), sb_sandbox_host_gid(box)) ||
        chmod(path, 0600))
        return err_errno(err, ERR_SANDBOX, "cannot hand %s to the sandbox user",
                         path);
    /* The run dir is read-only inside: the kernel gets its own copy in
     * the socket dir, where it may rewrite it (ipykernel does). */
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    return sb_sandbox_add_box_file(box, path, base, err);
}

static int
s_adopt_file(void *self, const char *path, err_t *err)
{
    return kb_sandbox_adopt_file(BOX(self), path, err);
}

static void
s_destroy(void *self)
{
    boxed_t *b = self;
    sb_sandbox_destroy(&b->box);
    free(b->mpl_env);
    free(b);
}

static int
s_hand_off(void *self)
{
    boxed_t *b = self;
    if (sb_sandbox_policy(b->box)->keep_workspace_dir)
        return -1; /* copied out after a graceful shutdown */
    sb_sandbox_hand_off(&b->box);
    return 0;
}

static int
s_finish(void *self, err_t *err)
{
    return sb_sandbox_finish(BOX(self), err);
}

_Static_assert(KB_PAUSE_KEY_BYTES == SB_SEAL_KEY_BYTES, "one key size");

static int
s_pause(void *self, const char *dir, const unsigned char *key, err_t *err)
{
    return sb_sandbox_pause(BOX(self), dir, key, err);
}

static int
s_resume(void *self, const char *dir, const unsigned char *key, err_t *err)
{
    return sb_sandbox_resume(BOX(self), dir, key, err);
}

static const kb_launcher_ops_t s_ops = {
    .name = "sandbox",
    .run_dir = s_run_dir,
    .sock_dir = s_sock_dir,
    .prepare = s_prepare,
    .spawn = s_spawn,
    .pidfd = s_pidfd,
    .signal = s_signal,
    .kill = s_kill,
    .reap = s_reap,
    .build_env = s_build_env,
    .adopt_file = s_adopt_file,
    .destroy = s_destroy,
    .hand_off = s_hand_off,
    .finish = s_finish,
    .pause = s_pause,
    .resume = s_resume,
};

/* Matplotlib's font cache, built once per host and copied into the run
 * dir, which is read-only inside; matplotlib wants a writable config
 * dir, so it gets the socket dir (a tmpfs) with the cache files bound
 * into it read-only. "MPLCONFIGDIR=..." or NULL. */
static char *
s_seed_mpl(sb_sandbox_t *sb)
{
    char *entry =
        kb_mpl_cache_seed(sb_sandbox_run_dir(sb), sb_sandbox_host_uid(sb),
                          sb_sandbox_host_gid(sb));
    if (!entry)
        return NULL;
    free(entry);
    char *dir = xasprintf("%s/matplotlib", sb_sandbox_run_dir(sb));
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.' || de->d_type != DT_REG)
            continue;
        char *host = xasprintf("%s/%s", dir, de->d_name);
        if (sb_sandbox_add_box_file(sb, host, de->d_name, NULL) == 0)
            n++;
        free(host);
    }
    if (d)
        closedir(d);
    free(dir);
    return n ? xasprintf("MPLCONFIGDIR=%s", sb_sandbox_sock_dir(sb)) : NULL;
}

kb_launcher_t *
kb_launcher_sandbox_new(const sb_policy_t *policy, err_t *err)
{
    sb_policy_t defaults;
    sb_policy_init_default(&defaults);
    sb_sandbox_t *sb = sb_sandbox_new(policy ? policy : &defaults, err);
    sb_policy_release(&defaults);
    if (!sb)
        return NULL;
    boxed_t *b = xcalloc(1, sizeof *b);
    b->box = sb;
    b->mpl_env = s_seed_mpl(sb);
    kb_launcher_t *l = xcalloc(1, sizeof *l);
    l->ops = &s_ops;
    l->self = b;
    return l;
}

sb_sandbox_t *
kb_launcher_sandbox_box(kb_launcher_t *l)
{
    return l && l->ops == &s_ops ? BOX(l->self) : NULL;
}
