/*
 * The per-box run dir against a box that tries to fill the host's disk
 * through it, and removal of what a box leaves behind at any depth. Real
 * boxes: /bin/sh and /usr/bin/python3 inside.
 */
#include "sandbox/sb_files.h"
#include "sandbox/sb_policy.h"
#include "sandbox/sb_sandbox.h"
#include "tests/tap.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PY "/usr/bin/python3"

static char **s_env;

/* Run argv in `sb`, output into out (NUL-terminated); the exit status, or
 * -1 when it could not run. */
static int
s_run(sb_sandbox_t *sb, const char *const argv[], char *out, size_t size)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -1;
    err_t err;
    int spawned = sb_sandbox_spawn(sb, (char *const *)argv, s_env, pfd[1],
                                   pfd[1], &err) == 0;
    close(pfd[1]);
    size_t len = 0;
    time_t start = time(NULL);
    while (spawned && len < size - 1) {
        struct pollfd pf = {.fd = pfd[0], .events = POLLIN};
        if (poll(&pf, 1, 200) > 0) {
            ssize_t n = read(pfd[0], out + len, size - 1 - len);
            if (n <= 0)
                break;
            len += (size_t)n;
        }
        if (time(NULL) - start > 120) {
            sb_sandbox_kill(sb);
            break;
        }
    }
    out[len] = '\0';
    for (char *c = out; *c; c++)
        if (*c == '\n')
            *c = ';'; /* one TAP line */
    close(pfd[0]);
    if (!spawned) {
        snprintf(out, size, "spawn: %s", err.text);
        return -1;
    }
    sb_exit_t ex;
    sb_sandbox_wait(sb, -1, &ex);
    return ex.kind == SB_EXITED ? ex.code : 128 + ex.signal;
}

/* Bytes allocated under `path` on the host, not following links. */
static long long
s_du(const char *path)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "du -sxPk '%s' 2>/dev/null", path);
    FILE *f = popen(cmd, "r");
    long long kb = -1;
    if (f) {
        if (fscanf(f, "%lld", &kb) != 1)
            kb = -1;
        pclose(f);
    }
    return kb < 0 ? -1 : kb * 1024;
}

static void
t_no_host_writes(const sb_policy_t *p)
{
    sb_sandbox_t *sb = sb_sandbox_new(p, NULL);
    if (!sb) {
        ok(0, "a sandbox can be created");
        return;
    }
    char *top = strdup(sb_sandbox_run_dir(sb));
    *strrchr(top, '/') = '\0';
    const char *rd = sb_sandbox_run_dir(sb);
    const char *sd = sb_sandbox_sock_dir(sb);
    char script[4096];
    /* Try every way to put bytes on the host: files, a deep tree and
     * thousands of entries in the run dir, then 64 MiB and a deep tree in
     * the socket dir. */
    snprintf(script, sizeof script,
             "import os, sys\n"
             "rd, sd = sys.argv[1], sys.argv[2]\n"
             "def tryit(what, f):\n"
             "    try:\n"
             "        f(); print(what, 'ok')\n"
             "    except OSError as e:\n"
             "        print(what, 'refused', e.errno)\n"
             "def fill(d):\n"
             "    with open(os.path.join(d, 'fill'), 'wb') as f:\n"
             "        for i in range(64):\n"
             "            f.write(b'x' * (1 << 20))\n"
             "def nest(d):\n"
             "    os.chdir(d)\n"
             "    for i in range(200):\n"
             "        os.mkdir('d'); os.chdir('d')\n"
             "def many(d):\n"
             "    for i in range(5000):\n"
             "        open(os.path.join(d, 'f%%d' %% i), 'w').close()\n"
             "tryit('run-write', lambda: open(rd + '/x', 'w').write('x'))\n"
             "tryit('run-fill', lambda: fill(rd))\n"
             "tryit('run-nest', lambda: nest(rd))\n"
             "tryit('run-many', lambda: many(rd))\n"
             "tryit('sock-fill', lambda: fill(sd))\n"
             "tryit('sock-nest', lambda: nest(sd))\n"
             "tryit('sock-many', lambda: many(sd))\n");
    const char *argv[] = {PY, "-c", script, rd, sd, NULL};
    char out[8192];
    int rc = s_run(sb, argv, out, sizeof out);
    ok(rc == 0, "the filler ran in the box (status %d): %.200s", rc, out);
    ok(strstr(out, "run-write refused 30") && strstr(out, "run-fill refused") &&
           strstr(out, "run-nest refused") && strstr(out, "run-many refused"),
       "the box cannot create, fill, nest or multiply files in the run dir "
       "(read-only): %s",
       out);
    ok(strstr(out, "sock-fill refused 28") != NULL,
       "64 MiB into the socket dir stops at its tmpfs cap (ENOSPC)");
    ok(strstr(out, "sock-many refused") != NULL,
       "5000 entries in the socket dir stop at its inode cap");
    long long used = s_du(top);
    ok(used >= 0 && used < 1 << 20,
       "after all that, the run dir holds under 1 MiB of host disk (%lld "
       "bytes)",
       used);
    struct stat st;
    sb_sandbox_destroy(&sb);
    ok(lstat(top, &st) < 0 && errno == ENOENT,
       "nothing of the run dir is left on the host after the session");
    free(top);
}

/* A tree far deeper than any fd or recursion limit, as a box could leave
 * in a directory of ours: removal must not depend on depth. */
static void
t_remove_deep(void)
{
    char dir[] = "/tmp/ja-deep-test-XXXXXX";
    if (!mkdtemp(dir)) {
        ok(0, "mkdtemp");
        return;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    int depth = 0;
    for (; depth < 5000 && fd >= 0; depth++) {
        if (mkdirat(fd, "d", 0700) < 0)
            break;
        int f = openat(fd, "f", O_WRONLY | O_CREAT, 0600);
        if (f >= 0)
            close(f);
        if (depth % 500 == 0 && symlinkat("/etc", fd, "link-to-etc") < 0)
            break;
        int next = openat(fd, "d", O_RDONLY | O_DIRECTORY);
        close(fd);
        fd = next;
    }
    /* The bottom directory denies itself search and write, as box code
     * could leave it. */
    if (fd >= 0) {
        mkdirat(fd, "locked", 0700);
        int l = openat(fd, "locked", O_RDONLY | O_DIRECTORY);
        if (l >= 0) {
            mkdirat(l, "inner", 0700);
            fchmod(l, 0);
            close(l);
        }
        close(fd);
    }
    ok(depth == 5000, "a tree 5000 levels deep was built");
    int rc = sb_files_remove_tree(dir);
    struct stat st;
    ok(rc == 0 && lstat(dir, &st) < 0 && errno == ENOENT,
       "sb_files_remove_tree removes it all, at any depth (rc %d)", rc);
    ok(stat("/etc/passwd", &st) == 0,
       "symlinks in it were removed, never followed (/etc intact)");
}

/* systemd makes $XDG_RUNTIME_DIR (/run/user/UID) mode 0700. As root the
 * box runs as another uid, which cannot pass through root's 0700 dir: the
 * run dir must then go elsewhere, and the box must start either way. */
static void
t_private_runtime_dir(const sb_policy_t *p)
{
    char dir[] = "/tmp/ja-xdg-XXXXXX";
    if (!mkdtemp(dir) || chmod(dir, 0700) < 0) {
        ok(0, "mkdtemp");
        return;
    }
    const char *old = getenv("XDG_RUNTIME_DIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("XDG_RUNTIME_DIR", dir, 1);
    err_t err = {0};
    sb_sandbox_t *sb = sb_sandbox_new(p, &err);
    char out[256] = "";
    const char *argv[] = {"/bin/sh", "-c", "echo started", NULL};
    int rc = sb ? s_run(sb, argv, out, sizeof out) : -1;
    ok(rc == 0 && strcmp(out, "started;") == 0,
       "a box starts when XDG_RUNTIME_DIR is mode 0700 (status %d, %s%s)", rc,
       out, sb ? "" : err.text);
    bool inside = sb && strncmp(sb_sandbox_run_dir(sb), dir, strlen(dir)) == 0;
    if (geteuid() == 0)
        ok(sb && !inside,
           "as root, the run dir is not put where the box's uid cannot go "
           "(%s)",
           sb ? sb_sandbox_run_dir(sb) : "no box");
    else
        ok(inside, "as a user, the run dir stays in XDG_RUNTIME_DIR (%s)",
           sb ? sb_sandbox_run_dir(sb) : "no box");
    sb_sandbox_destroy(&sb);
    if (saved)
        setenv("XDG_RUNTIME_DIR", saved, 1);
    else
        unsetenv("XDG_RUNTIME_DIR");
    free(saved);
    rmdir(dir);
}

int
main(void)
{
    t_remove_deep();
    if (access(PY, X_OK) < 0) {
        skip("%s is not installed", PY);
        return done_testing();
    }
    sb_policy_t p;
    sb_policy_init_default(&p);
    char e0[] = "TERM=dumb";
    char *host_env[] = {e0, NULL};
    s_env = sb_policy_build_env(&p, host_env, NULL);
    t_no_host_writes(&p);
    t_private_runtime_dir(&p);
    strv_free(s_env);
    sb_policy_release(&p);
    return done_testing();
}
