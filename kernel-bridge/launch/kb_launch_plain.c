/* The plain launcher: the kernel as an ordinary child process. Used only
 * with --no-sandbox; it isolates nothing. */
#include "kb_launcher.h"

#include "common/strv.h"
#include "common/xalloc.h"
#include "sandbox/sb_sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct plain {
    char *run_dir; /* owned path; removed on destroy */
    pid_t pid;     /* kernel pid (its own session leader); 0 if none */
    int pidfd;     /* owned; -1 if none */
} plain_t;

static const char *
s_run_dir(void *self)
{
    return ((plain_t *)self)->run_dir;
}

static int
s_spawn(void *self, char *const argv[], char *const envp[], int out_fd,
        err_t *err)
{
    plain_t *p = self;
    pid_t parent = getpid();
    /* Ctrl-C in our terminal must not reach the kernel: we interrupt it
     * ourselves, once (sb_detach_block()). */
    sigset_t mask;
    sb_detach_block(&mask);
    pid_t pid = fork();
    if (pid != 0)
        sb_detach_restore(&mask);
    if (pid < 0)
        return err_errno(err, ERR_KERNEL, "fork");
    if (pid == 0) {
        sb_detach_child(&mask);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        if (out_fd >= 0) {
            dup2(out_fd, 1);
            dup2(out_fd, 2);
        }
        execve(argv[0], argv, envp);
        dprintf(2, "cannot execute %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    p->pid = pid;
    p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (p->pidfd < 0)
        return err_errno(err, ERR_KERNEL, "pidfd_open");
    return 0;
}

static int
s_pidfd(void *self)
{
    return ((plain_t *)self)->pidfd;
}

static int
s_signal(void *self, int sig)
{
    plain_t *p = self;
    if (p->pidfd < 0)
        return -1;
    return (int)syscall(SYS_pidfd_send_signal, p->pidfd, sig, NULL, 0);
}

static int
s_kill(void *self)
{
    plain_t *p = self;
    if (p->pid <= 0)
        return 0;
    kill(-p->pid, SIGKILL); /* the whole session the kernel leads */
    return s_signal(self, SIGKILL);
}

static int
s_reap(void *self, int timeout_ms, char *why, size_t why_len)
{
    plain_t *p = self;
    if (p->pid <= 0) {
        snprintf(why, why_len, "not running");
        return 1;
    }
    struct pollfd pfd = {p->pidfd, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) <= 0)
        return 0;
    int status = 0;
    if (waitpid(p->pid, &status, 0) < 0)
        status = 0;
    if (WIFSIGNALED(status))
        snprintf(why, why_len, "killed by signal %d (%s)", WTERMSIG(status),
                 sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status))
                                                : "?");
    else
        snprintf(why, why_len, "exited with status %d", WEXITSTATUS(status));
    close(p->pidfd);
    p->pidfd = -1;
    p->pid = 0;
    return 1;
}

static int
s_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void
s_destroy(void *self)
{
    plain_t *p = self;
    char why[128];
    if (p->pid > 0) {
        s_kill(p);
        s_reap(p, 2000, why, sizeof why);
    }
    if (p->run_dir)
        nftw(p->run_dir, s_rm, 16, FTW_DEPTH | FTW_PHYS);
    free(p->run_dir);
    free(p);
}

/* Host variables a plain kernel may see: nothing that can hold a secret. */
static const char *const s_env_allow[] = {"PATH",   "HOME", "LANG", "LANGUAGE",
                                          "TZ",     "TERM", "USER", "LOGNAME",
                                          "TMPDIR", NULL};

static bool
s_env_allowed(const char *entry)
{
    if (strncmp(entry, "LC_", 3) == 0)
        return true;
    for (int i = 0; s_env_allow[i]; i++) {
        size_t n = strlen(s_env_allow[i]);
        if (strncmp(entry, s_env_allow[i], n) == 0 && entry[n] == '=')
            return true;
    }
    return false;
}

/* Set "K=V" in a NULL-terminated owned array, replacing the same key. */
static void
s_env_put(char ***env, size_t *n, const char *entry)
{
    const char *eq = strchr(entry, '=');
    if (!eq)
        return;
    size_t klen = (size_t)(eq - entry) + 1;
    for (size_t i = 0; i < *n; i++)
        if (strncmp((*env)[i], entry, klen) == 0) {
            free((*env)[i]);
            (*env)[i] = xstrdup(entry);
            return;
        }
    *env = xrealloc(*env, (*n + 2) * sizeof **env);
    (*env)[(*n)++] = xstrdup(entry);
    (*env)[*n] = NULL;
}

static char **
s_build_env(void *self, char *const extra[])
{
    (void)self;
    char **env = xcalloc(1, sizeof *env);
    size_t n = 0;
    for (char **e = environ; *e; e++)
        if (s_env_allowed(*e))
            s_env_put(&env, &n, *e);
    for (char *const *e = extra; e && *e; e++)
        s_env_put(&env, &n, *e);
    return env;
}

static int
s_adopt_file(void *self, const char *path, err_t *err)
{
    (void)self;
    if (chmod(path, 0600) != 0)
        return err_errno(err, ERR_IO, "chmod %s", path);
    return 0;
}

static const kb_launcher_ops_t s_ops = {
    .name = "plain",
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
kb_launcher_plain_new(err_t *err)
{
    const char *base = getenv("XDG_RUNTIME_DIR");
    if (!base || access(base, W_OK) != 0)
        base = "/tmp";
    char *dir = xasprintf("%s/ja-XXXXXX", base);
    if (!mkdtemp(dir)) {
        err_errno(err, ERR_IO, "cannot create a run dir in %s", base);
        free(dir);
        return NULL;
    }
    plain_t *p = xcalloc(1, sizeof *p);
    p->run_dir = dir;
    p->pidfd = -1;
    kb_launcher_t *l = xcalloc(1, sizeof *l);
    l->ops = &s_ops;
    l->self = p;
    return l;
}

void
kb_launcher_destroy(kb_launcher_t **pl)
{
    if (!pl || !*pl)
        return;
    (*pl)->ops->destroy((*pl)->self);
    free(*pl);
    *pl = NULL;
}
