/*
 * Integration tests: the sandbox library with the real Python stack
 * (/usr/bin/python3 with numpy, pandas, matplotlib, ipykernel) inside.
 */
#include "common/strv.h"
#include "sandbox/sb_cgroup.h"
#include "sandbox/sb_policy.h"
#include "sandbox/sb_sandbox.h"
#include "tests/tap.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define PY "/usr/bin/python3"

static char **s_env;

struct run {
    int spawned;     /* spawn returned 0 */
    err_t err;       /* spawn error */
    sb_exit_t ex;    /* how it ended */
    char out[65536]; /* stdout + stderr */
};

/* Spawn argv in `sb`, collect output until the box ends (max `secs`). */
static void
s_run_in(sb_sandbox_t *sb, const char *const argv[], int secs, struct run *r)
{
    memset(r, 0, sizeof *r);
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return;
    r->spawned = sb_sandbox_spawn(sb, (char *const *)argv, s_env, pfd[1],
                                  pfd[1], &r->err) == 0;
    close(pfd[1]);
    size_t len = 0;
    time_t start = time(NULL);
    while (r->spawned && len < sizeof r->out - 1) {
        struct pollfd pf = {.fd = pfd[0], .events = POLLIN};
        if (poll(&pf, 1, 200) > 0) {
            ssize_t n = read(pfd[0], r->out + len, sizeof r->out - 1 - len);
            if (n <= 0)
                break;
            len += (size_t)n;
        }
        if (time(NULL) - start > secs) {
            sb_sandbox_kill(sb);
            break;
        }
    }
    r->out[len] = '\0';
    close(pfd[0]);
    if (r->spawned)
        sb_sandbox_wait(sb, -1, &r->ex);
}

static int
s_exited(const struct run *r, int code)
{
    return r->spawned && r->ex.kind == SB_EXITED && r->ex.code == code;
}

static void
t_python_stack(const sb_policy_t *p)
{
    sb_sandbox_t *sb = sb_sandbox_new(p, NULL);
    struct run r;
    const char *argv[] = {PY, "-c",
                          "import numpy, pandas, matplotlib\n"
                          "matplotlib.use('Agg')\n"
                          "import matplotlib.pyplot as plt\n"
                          "df = pandas.DataFrame({'x': numpy.arange(5), 'y': "
                          "numpy.arange(5)**2})\n"
                          "df.plot(x='x', y='y')\n"
                          "plt.savefig('/mnt/data/plot.png')\n"
                          "print('rows', len(df))\n",
                          NULL};
    s_run_in(sb, argv, 120, &r);
    ok(s_exited(&r, 0) && strstr(r.out, "rows 5"),
       "python3 inside imports numpy, pandas and matplotlib (Agg) and plots");
    if (!s_exited(&r, 0))
        diag("%s %s", r.err.text, r.out);
    char *png = NULL;
    size_t len = 0;
    err_t err;
    int rc = sb_sandbox_read_file(sb, "plot.png", 10 << 20, &png, &len, &err);
    ok(rc == 0 && len > 1000 && memcmp(png, "\x89PNG", 4) == 0,
       "the PNG saved in /mnt/data comes out (%zu bytes)", len);
    free(png);
    json_t *list = sb_sandbox_list_files(sb, 100);
    json_t *first = json_array_get(list, 0);
    ok(json_array_size(list) == 1 &&
           strcmp(json_string_value(json_object_get(first, "path")),
                  "plot.png") == 0,
       "listing /mnt/data shows the plot");
    json_decref(list);
    sb_sandbox_destroy(&sb);

    sb = sb_sandbox_new(p, NULL);
    const char *argv2[] = {PY, "-m", "ipykernel_launcher", "--help", NULL};
    s_run_in(sb, argv2, 120, &r);
    ok(s_exited(&r, 0) && strstr(r.out, "IPython"),
       "ipykernel_launcher starts inside (--help)");
    sb_sandbox_destroy(&sb);
}

/* The run dir and socket dir are the same paths inside: a socket made
 * inside the socket dir is reachable from the host at the same path. */
static void
t_run_dir(const sb_policy_t *p)
{
    sb_sandbox_t *sb = sb_sandbox_new(p, NULL);
    const char *rd = sb_sandbox_run_dir(sb);
    struct stat st;
    ok(rd && strlen(rd) < 60 && stat(rd, &st) == 0 &&
           (st.st_mode & 0777) == 0700 && st.st_uid == sb_sandbox_host_uid(sb),
       "the run dir is private (0700), owned by the sandbox user, short (%s)",
       rd);
    char sock[100];
    snprintf(sock, sizeof sock, "%.80s/test.sock", sb_sandbox_sock_dir(sb));
    const char *argv[] = {
        PY, "-c",
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.bind(sys.argv[1]); s.listen(1)\n"
        "print('listening', flush=True)\n"
        "c, _ = s.accept(); c.sendall(b'hello from inside')\n",
        sock, NULL};
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return;
    err_t err;
    int spawned =
        sb_sandbox_spawn(sb, (char *const *)argv, s_env, pfd[1], 2, &err) == 0;
    close(pfd[1]);
    char buf[64] = "";
    int got = 0;
    for (int i = 0; spawned && i < 300 && !got; i++) {
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
        if (connect(s, (struct sockaddr *)&sa, sizeof sa) == 0) {
            ssize_t n = read(s, buf, sizeof buf - 1);
            buf[n > 0 ? n : 0] = '\0';
            got = 1;
        } else {
            usleep(50 * 1000);
        }
        close(s);
    }
    ok(got && strcmp(buf, "hello from inside") == 0,
       "a unix socket bound inside at <sock dir>/test.sock answers the host "
       "at the same path");
    close(pfd[0]);
    sb_exit_t ex;
    sb_sandbox_wait(sb, 10000, &ex);
    char run_copy[256];
    snprintf(run_copy, sizeof run_copy, "%s", rd);
    sb_sandbox_destroy(&sb);
    ok(stat(run_copy, &st) < 0 && errno == ENOENT,
       "destroying the sandbox removes its run dir");
}

static void
t_lifecycle(const sb_policy_t *p)
{
    char in[] = "/tmp/ja-sb-test-in-XXXXXX";
    int fd = mkstemp(in);
    if (fd >= 0) {
        if (write(fd, "quarter,revenue\nQ1,100\n", 23) != 23)
            diag("short write");
        close(fd);
    }
    sb_sandbox_t *sb = sb_sandbox_new(p, NULL);
    err_t err;
    ok(sb_sandbox_add_file(sb, in, "sales.csv", &err) == 0,
       "a host file is queued for /mnt/data/sales.csv");
    ok(sb_sandbox_add_file(sb, in, "sales.csv", &err) < 0,
       "the same name cannot be taken twice");
    ok(sb_sandbox_workspace(sb) == NULL,
       "before spawn there is no workspace path yet");
    struct run r;
    const char *argv[] = {
        PY, "-c",
        "import pandas, os\n"
        "print(os.getcwd(), pandas.read_csv('sales.csv').revenue.sum())\n"
        "open('/mnt/data/keep.txt', 'w').write('kept')\n"
        "raise SystemExit(3)\n",
        NULL};
    s_run_in(sb, argv, 60, &r);
    ok(s_exited(&r, 3) && strstr(r.out, "/mnt/data 100"),
       "the file is readable inside from the working directory /mnt/data");
    char how[128];
    is_str(sb_exit_describe(&r.ex, p, how, sizeof how), "exited with status 3",
           "the exit is described");
    is_int(sb_exit_status(&r.ex), 3, "the shell status is the exit code");
    ok(sb_sandbox_workspace(sb) &&
           strncmp(sb_sandbox_workspace(sb), "/proc/self/fd/", 14) == 0,
       "after spawn the host reaches /mnt/data at %s",
       sb_sandbox_workspace(sb) ? sb_sandbox_workspace(sb) : "(null)");
    char path[256], data[16] = "";
    snprintf(path, sizeof path, "%s/keep.txt",
             sb_sandbox_workspace(sb) ? sb_sandbox_workspace(sb) : "/none");
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(data, sizeof data, f))
            data[0] = '\0';
        fclose(f);
    }
    is_str(data, "kept",
           "files written inside are readable through that path "
           "after the box ended");

    /* Restart: a new box, same run dir, the workspace carried over. */
    const char *rd_before = sb_sandbox_run_dir(sb);
    const char *argv2[] = {
        PY, "-c",
        "print(open('keep.txt').read(), sorted(__import__('os').listdir('.')))",
        NULL};
    s_run_in(sb, argv2, 60, &r);
    ok(s_exited(&r, 0) && strstr(r.out, "kept") && strstr(r.out, "sales.csv"),
       "spawning again starts a fresh box that still has /mnt/data's files");
    ok(sb_sandbox_run_dir(sb) == rd_before, "...and the same run dir");
    sb_sandbox_destroy(&sb);
    unlink(in);
}

static void
t_signals(const sb_policy_t *p)
{
    sb_sandbox_t *sb = sb_sandbox_new(p, NULL);
    const char *argv[] = {
        PY, "-c",
        "import sys, time\n"
        "print('ready', flush=True)\n"
        "try:\n"
        "    time.sleep(60)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True); sys.exit(42)\n",
        NULL};
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return;
    err_t err;
    int spawned =
        sb_sandbox_spawn(sb, (char *const *)argv, s_env, pfd[1], 2, &err) == 0;
    close(pfd[1]);
    char buf[256] = "";
    ssize_t n = spawned ? read(pfd[0], buf, sizeof buf - 1) : 0;
    buf[n > 0 ? n : 0] = '\0';
    sb_exit_t ex;
    ok(spawned && strstr(buf, "ready") && sb_sandbox_wait(sb, 200, &ex) == 1,
       "waiting with a timeout on a running box says it still runs");
    ok(sb_sandbox_signal(sb, SIGINT) == 0, "SIGINT is delivered");
    ok(sb_sandbox_wait(sb, 20000, &ex) == 0 && ex.kind == SB_EXITED &&
           ex.code == 42,
       "SIGINT reaches the program as KeyboardInterrupt (exit 42)");
    close(pfd[0]);
    sb_sandbox_destroy(&sb);

    sb = sb_sandbox_new(p, NULL);
    const char *argv2[] = {"/bin/sleep", "60", NULL};
    spawned =
        sb_sandbox_spawn(sb, (char *const *)argv2, s_env, -1, -1, &err) == 0;
    sb_sandbox_signal(sb, SIGTERM);
    char how[128];
    ok(spawned && sb_sandbox_wait(sb, 20000, &ex) == 0 &&
           ex.kind == SB_SIGNALED && ex.signal == SIGTERM && !ex.box_killed,
       "SIGTERM kills the program and is reported: %s",
       sb_exit_describe(&ex, p, how, sizeof how));
    is_int(sb_exit_status(&ex), 143, "...as shell status 143");
    sb_sandbox_destroy(&sb);
}

static void
t_errors(const sb_policy_t *p)
{
    sb_sandbox_t *sb = sb_sandbox_new(p, NULL);
    err_t err;
    err_clear(&err);
    const char *argv[] = {"/usr/bin/no-such-program", NULL};
    ok(sb_sandbox_spawn(sb, (char *const *)argv, s_env, -1, -1, &err) < 0 &&
           err.code == ERR_USAGE &&
           strstr(err.text, "exec /usr/bin/no-such-program: No such file"),
       "a missing program fails spawn with the step named: %s", err.text);
    sb_sandbox_destroy(&sb);

    sb = sb_sandbox_new(p, NULL);
    const char *rel[] = {"python3", NULL};
    ok(sb_sandbox_spawn(sb, (char *const *)rel, s_env, -1, -1, &err) < 0 &&
           err.code == ERR_USAGE,
       "a relative program path is refused");
    sb_sandbox_destroy(&sb);

    sb_policy_t q;
    sb_policy_copy(&q, p);
    sb_policy_add_bind(&q, "/no/such/path", "/opt/x", NULL);
    sb = sb_sandbox_new(&q, &err);
    ok(!sb && err.code == ERR_USAGE && strstr(err.text, "/no/such/path"),
       "a bind of a missing host path fails early: %s", err.text);
    sb_sandbox_destroy(&sb);
    sb_policy_release(&q);

    sb_policy_copy(&q, p);
    sb_policy_add_bind(&q, "/usr/share/doc", "/opt/doc", NULL);
    sb = sb_sandbox_new(&q, &err);
    struct run r;
    const char *argv2[] = {"/bin/sh", "-c",
                           "ls /opt/doc | head -1; touch /opt/doc/x", NULL};
    s_run_in(sb, argv2, 30, &r);
    ok(r.spawned && r.ex.kind == SB_EXITED && r.ex.code != 0 &&
           strstr(r.out, "Read-only"),
       "an extra bind is visible inside and read-only");
    sb_sandbox_destroy(&sb);
    sb_policy_release(&q);
}

static void
t_limits_reported(const sb_policy_t *p)
{
    sb_sandbox_t *sb = sb_sandbox_new(p, NULL);
    const char *w = sb_sandbox_warnings(sb);
    if (geteuid() == 0 && sb_sandbox_cgroup_dir(sb, "memory"))
        ok(w == NULL, "as root with cgroups, nothing is reported unenforced");
    else
        ok(w && strstr(w, "not enforced"),
           "without cgroups the warning says what is not enforced: %s",
           w ? w : "(none)");
    sb_sandbox_destroy(&sb);

    /* Two boxes at once are independent. */
    sb_sandbox_t *a = sb_sandbox_new(p, NULL), *b = sb_sandbox_new(p, NULL);
    const char *argv[] = {"/bin/sleep", "30", NULL};
    err_t err;
    int both =
        a && b &&
        sb_sandbox_spawn(a, (char *const *)argv, s_env, -1, -1, &err) == 0 &&
        sb_sandbox_spawn(b, (char *const *)argv, s_env, -1, -1, &err) == 0;
    ok(both && strcmp(sb_sandbox_run_dir(a), sb_sandbox_run_dir(b)) != 0 &&
           sb_sandbox_pid(a) != sb_sandbox_pid(b),
       "two sandboxes run at once with their own run dirs");
    sb_sandbox_kill(a);
    sb_exit_t ex;
    ok(sb_sandbox_wait(a, 10000, &ex) == 0 && ex.signal == SIGKILL &&
           sb_sandbox_wait(b, 0, &ex) == 1,
       "killing one leaves the other running");
    sb_sandbox_destroy(&a);
    sb_sandbox_destroy(&b);
}

static void
t_keep_workspace(const sb_policy_t *p)
{
    char dir[] = "/tmp/ja-sb-test-keep-XXXXXX";
    if (!mkdtemp(dir))
        return;
    char dest[300];
    snprintf(dest, sizeof dest, "%s/kept", dir);
    sb_policy_t q;
    sb_policy_copy(&q, p);
    q.keep_workspace_dir = strdup(dest);
    sb_sandbox_t *sb = sb_sandbox_new(&q, NULL);
    struct run r;
    const char *argv[] = {"/bin/sh", "-c",
                          "mkdir out && echo 1 > out/result.txt", NULL};
    s_run_in(sb, argv, 30, &r);
    err_t err;
    ok(sb_sandbox_finish(sb, &err) == 0, "finishing keeps the workspace");
    sb_sandbox_destroy(&sb);
    char path[400];
    snprintf(path, sizeof path, "%s/out/result.txt", dest);
    struct stat st;
    ok(stat(path, &st) == 0 && st.st_size == 2,
       "the kept workspace has the files made inside");
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        diag("cannot remove %s", dir);
    sb_policy_release(&q);
}

/* Poll up to ~15 s until none of the paths exists; returns 1 if so. */
static int
s_all_gone(char *const paths[], int n)
{
    for (int round = 0; round < 150; round++) {
        int left = 0;
        for (int i = 0; i < n; i++)
            left += paths[i] && access(paths[i], F_OK) == 0;
        if (!left)
            return 1;
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static void
t_hand_off(const sb_policy_t *p)
{
    sb_sandbox_t *sb = sb_sandbox_new(p, NULL);
    const char *argv[] = {"/bin/sh", "-c", "sleep 600 & sleep 600", NULL};
    err_t err;
    if (!sb || sb_sandbox_spawn(sb, (char *const *)argv, s_env, -1, -1, &err)) {
        ok(0, "a box to hand off starts: %s", sb ? err.text : "no box");
        sb_sandbox_destroy(&sb);
        return;
    }
    char *paths[4] = {strdup(sb_sandbox_run_dir(sb)), NULL, NULL, NULL};
    const char *ctl[3] = {"memory", "pids", "cpu"};
    for (int i = 0; i < 3; i++) {
        const char *d = sb_sandbox_cgroup_dir(sb, ctl[i]);
        paths[i + 1] = d ? strdup(d) : NULL;
    }
    sb_sandbox_hand_off(&sb);
    ok(sb == NULL, "hand-off releases the box object at once");
    ok(s_all_gone(paths, 4),
       "a handed-off box's processes, cgroups and run dir are removed by "
       "its reaper (%s)",
       paths[0]);
    for (int i = 0; i < 4; i++)
        free(paths[i]);
}

/* Read a number from dir/file; -1 if it cannot. */
static long
s_read_long(const char *dir, const char *file)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "re");
    long v = -1;
    if (f && fscanf(f, "%ld", &v) != 1)
        v = -1;
    if (f)
        fclose(f);
    return v;
}

static int
s_write_text(const char *dir, const char *file, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "we");
    if (!f)
        return -1;
    int rc = fputs(text, f) < 0;
    return fclose(f) || rc ? -1 : 0;
}

/* cgroup v1: this process moves into a private cpu group of its own, so
 * the boxes' cpu groups made here can be found and checked exactly. */
static void
t_cpu_weight(const sb_policy_t *p)
{
    struct statfs sf;
    if (geteuid() != 0 || statfs("/sys/fs/cgroup/cpu", &sf) < 0 ||
        sf.f_type != 0x27e0eb /* CGROUP_SUPER_MAGIC */) {
        skip("CPU weight of the boxes' parent: needs root and cgroup v1 "
             "(v2 weighs the shared parent instead: untested here)");
        return;
    }
    /* Where we are now ("N:cpu,cpuacct:/path" or "N:cpu:/path"). */
    char home[4096] = "/sys/fs/cgroup/cpu", line[4096];
    FILE *f = fopen("/proc/self/cgroup", "re");
    while (f && fgets(line, sizeof line, f)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        char *list = c1 + 1, *path = c2 + 1;
        path[strcspn(path, "\n")] = '\0';
        for (char *t = strtok(list, ","); t; t = strtok(NULL, ","))
            if (strcmp(t, "cpu") == 0 && strcmp(path, "/") != 0)
                snprintf(home, sizeof home, "/sys/fs/cgroup/cpu%.4000s", path);
    }
    if (f)
        fclose(f);
    char own[4200], pid[32];
    snprintf(own, sizeof own, "%s/ja-test-weight-%d", home, (int)getpid());
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    if (mkdir(own, 0755) < 0 || s_write_text(own, "cgroup.procs", pid) < 0) {
        ok(0, "moving the test into a private cpu cgroup: %s", strerror(errno));
        rmdir(own);
        return;
    }
    sb_cgroup_t *cg[3];
    char id[3][48], want[3][4400];
    for (int i = 0; i < 3; i++) {
        snprintf(id[i], sizeof id[i], "%d-weight%d", (int)getpid(), i);
        snprintf(want[i], sizeof want[i], "%s/jupyter-agent-%s", own, id[i]);
        cg[i] = sb_cgroup_new(p, id[i]);
    }
    const char *d0 = sb_cgroup_dir(cg[0], "cpu");
    is_str(d0, want[0],
           "a box's cpu cgroup stands beside the launcher's own processes, "
           "not in a parent shared by every box");
    int all = 1;
    for (int i = 0; i < 3; i++)
        all &= sb_cgroup_dir(cg[i], "cpu") &&
               strcmp(sb_cgroup_dir(cg[i], "cpu"), want[i]) == 0 &&
               s_read_long(want[i], "cpu.shares") == 1024;
    ok(all, "three boxes: each has the weight of one ordinary process "
            "(cpu.shares 1024), so busy boxes together weigh three tasks");
    char shared[4400];
    snprintf(shared, sizeof shared, "%s/jupyter-agent", own);
    ok(access(shared, F_OK) < 0,
       "no shared cpu parent whose weight all boxes would split");
    ok(sb_cgroup_limits_cpu(cg[0]) &&
           s_read_long(want[0], "cpu.cfs_quota_us") > 0,
       "the --cpus quota still caps each box");
    for (int i = 0; i < 3; i++)
        sb_cgroup_destroy(&cg[i]);
    ok(access(want[0], F_OK) < 0 && access(want[2], F_OK) < 0,
       "the boxes' cpu cgroups are removed with them");
    s_write_text(home, "cgroup.procs", pid);
    ok(rmdir(own) == 0, "the private cpu cgroup is removed again");
}

int
main(void)
{
    if (access(PY, X_OK) < 0) {
        skip("%s is not installed", PY);
        return done_testing();
    }
    sb_policy_t p;
    sb_policy_init_default(&p);
    char e0[] = "TERM=dumb";
    char *host_env[] = {e0, NULL};
    const char *extra[] = {"MPLBACKEND=Agg", NULL};
    s_env = sb_policy_build_env(&p, host_env, extra);

    sb_sandbox_t *probe = sb_sandbox_new(&p, NULL);
    const char *argv[] = {"/bin/true", NULL};
    err_t err;
    err_clear(&err);
    if (!probe ||
        sb_sandbox_spawn(probe, (char *const *)argv, s_env, -1, -1, &err) < 0) {
        ok(0, "a sandbox can be created here: %s", err.text);
        sb_sandbox_destroy(&probe);
        return done_testing();
    }
    sb_sandbox_destroy(&probe);

    t_python_stack(&p);
    t_run_dir(&p);
    t_lifecycle(&p);
    t_signals(&p);
    t_errors(&p);
    t_limits_reported(&p);
    t_keep_workspace(&p);
    t_hand_off(&p);
    t_cpu_weight(&p);
    strv_free(s_env);
    sb_policy_release(&p);
    return done_testing();
}
