/*
 * `jupyter-agent serve` and sessions that take warm kernels from it, with
 * real sandboxed ipykernels: the session API (ag_session_start) uses the
 * pool by default when a server runs and falls back to a cold start; files
 * go into the live /mnt/data; interrupts, death and restart work through
 * the server; a client that vanishes leaks no box. The server forks its
 * kernels from a factory (serve --factory); the pool itself is tested with
 * fresh interpreters in test_kb_pool.
 *
 * The server listens on a private socket (JUPYTER_AGENT_SERVE_SOCKET), so
 * other programs running meanwhile never see it.
 */
#include "../tap.h"

#include "agent/cli/ag_cmd.h"
#include "agent/session/ag_session.h"
#include "common/clock.h"
#include "kernel-bridge/kb_kernel.h"
#include "kernel-bridge/pool/kb_serve.h"
#include "sandbox/sb_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char s_sock[128];

static char *
s_eval(ag_session_t *s, const char *code, int timeout_ms, err_t *err)
{
    kb_output_t *out = kb_output_new(NULL, 0);
    kb_exec_opts_t opts;
    kb_exec_opts_init(&opts);
    /* Checks run one cell after another, some right after an interrupt:
     * with stop_on_error ipykernel aborts a request that arrives just
     * after a failed one, and "the interrupt keeps its state" flaked. */
    opts.stop_on_error = false;
    char *text = NULL;
    err_t local;
    if (!err)
        err = &local;
    if (kb_kernel_execute(ag_session_kernel(s), code, &opts, timeout_ms, out,
                          NULL, err) == 0) {
        size_t i;
        json_t *o;
        json_array_foreach(kb_output_outputs(out), i, o)
        {
            const char *t = json_string_value(json_object_get(o, "text"));
            json_t *d = json_object_get(o, "data");
            if (!t && d)
                t = json_string_value(json_object_get(d, "text/plain"));
            if (!t && json_object_get(o, "ename"))
                t = json_string_value(json_object_get(o, "ename"));
            if (t && !text)
                text = strdup(t);
        }
    }
    kb_output_destroy(&out);
    if (text && *text && text[strlen(text) - 1] == '\n')
        text[strlen(text) - 1] = '\0';
    return text;
}

static const char *
s_run_dir(ag_session_t *s)
{
    kb_launcher_t *l = kb_kernel_launcher(ag_session_kernel(s));
    return l->ops->run_dir(l->self);
}

static json_t *
s_stats(void)
{
    err_t err;
    return kb_serve_request(s_sock, "stats", &err);
}

static long
s_stat(const char *key)
{
    json_t *st = s_stats();
    long v = st ? (long)json_integer_value(json_object_get(st, key)) : -1;
    json_decref(st);
    return v;
}

/* Wait until stats[key] == want (or 60 s). */
static bool
s_wait_stat(const char *key, long want)
{
    int64_t end = clock_mono_ms() + 60000;
    while (clock_mono_ms() < end) {
        if (s_stat(key) == want)
            return true;
        usleep(100000);
    }
    return false;
}

static pid_t
s_start_server(void)
{
    int pfd[2];
    if (pipe(pfd))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        char a0[] = "serve", a1[] = "--pool", a2[] = "2", a3[] = "--preload",
             a4[] = "import pandas", a5[] = "--socket", a7[] = "--factory",
             a8[] = "--warmup-timeout", a9[] = "120";
        char *argv[] = {a0, a1, a2, a3, a4, a5, s_sock, a7, a8, a9, NULL};
        _exit(ag_cmd_serve(10, argv));
    }
    close(pfd[1]);
    char line[512] = "";
    ssize_t n = read(pfd[0], line, sizeof line - 1);
    close(pfd[0]);
    if (n <= 0)
        return -1;
    line[n] = '\0';
    diag("%s", strtok(line, "\n"));
    return pid;
}

static pid_t
s_ppid(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *rp = strrchr(buf, ')'); /* after the command name */
    int ppid = -1;
    if (!rp || sscanf(rp + 1, " %*c %d", &ppid) != 1)
        return -1;
    return ppid;
}

static bool
s_cmdline_has(pid_t pid, const char *needle)
{
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return false;
    for (ssize_t i = 0; i < n; i++)
        buf[i] = buf[i] ? buf[i] : ' ';
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

/* Send `sig` to the kernels forked by the factory of server `server`
 * (processes running the zygote's code whose parent does too, below the
 * server); returns how many. */
static int
s_signal_forked_kernels(pid_t server, int sig)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 0 || !s_cmdline_has(pid, "kb_zygote_boot") ||
            !s_cmdline_has(s_ppid(pid), "kb_zygote_boot"))
            continue;
        pid_t up = pid;
        while (up > 1 && up != server)
            up = s_ppid(up);
        if (up == server && kill(pid, sig) == 0)
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

/* What `serve --status` prints, parsed (new), or NULL. */
static json_t *
s_status_cli(void)
{
    int pfd[2];
    if (pipe(pfd))
        return NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        char a0[] = "serve", a1[] = "--status", a2[] = "--socket";
        char *argv[] = {a0, a1, a2, s_sock, NULL};
        int rc = ag_cmd_serve(4, argv);
        fflush(stdout);
        _exit(rc);
    }
    close(pfd[1]);
    char buf[8192];
    size_t n = 0;
    ssize_t got;
    while (n < sizeof buf && (got = read(pfd[0], buf + n, sizeof buf - n)) > 0)
        n += (size_t)got;
    close(pfd[0]);
    int status = -1;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return NULL;
    return json_loadb(buf, n, 0, NULL);
}

static ag_session_t *
s_session(ag_session_opts_t *o, err_t *err)
{
    ag_session_t *s = ag_session_start(o, err);
    if (!s)
        diag("session: %s", err->text);
    return s;
}

int
main(void)
{
    char dir[] = "/tmp/ja-serve-test-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    snprintf(s_sock, sizeof s_sock, "%s/serve.sock", dir);
    setenv("JUPYTER_AGENT_SERVE_SOCKET", s_sock, 1);
    err_t err = {0};
    ag_session_t *s4 = NULL; /* held across serve --stop */
    ag_session_opts_t o4;
    ag_session_opts_init(&o4);

    ag_session_opts_t o, o2;
    ag_session_opts_init(&o);
    ag_session_opts_init(&o2);
    o.warm = AG_WARM_POOL;
    ok(ag_session_start(&o, &err) == NULL && err.code == ERR_USAGE &&
           strstr(err.text, "serve"),
       "--warm pool without a server fails and says to start one");

    char b0[] = "serve", b1[] = "--warmup-timeout", b2[] = "0";
    char *bad[] = {b0, b1, b2, NULL};
    is_int(ag_cmd_serve(3, bad), ERR_USAGE,
           "serve --warmup-timeout 0 is a usage error");
    pid_t server = s_start_server();
    ok(server > 0, "the server starts and says where it listens");
    struct stat st;
    ok(stat(s_sock, &st) == 0 && S_ISSOCK(st.st_mode) &&
           (st.st_mode & 0777) == 0600,
       "its socket is private to the user (mode 0600)");
    ok(s_wait_stat("ready", 2), "the pool warms up to --pool 2");
    json_t *js = s_status_cli();
    long w_n = (long)json_integer_value(json_object_get(js, "warmups"));
    long w_last =
        (long)json_integer_value(json_object_get(js, "warmup_last_ms"));
    long w_p50 = (long)json_integer_value(json_object_get(js, "warmup_p50_ms"));
    long w_max = (long)json_integer_value(json_object_get(js, "warmup_max_ms"));
    ok(js && w_n >= 2 && w_last > 0 && w_p50 > 0 && w_max >= w_p50 &&
           w_max >= w_last &&
           json_is_integer(json_object_get(js, "warmup_window")) &&
           json_is_integer(json_object_get(js, "abandoned")) &&
           json_is_false(json_object_get(js, "paused")),
       "serve --status reports warm-up times: last %ld, p50 %ld, max %ld ms "
       "over %ld warm-ups",
       w_last, w_p50, w_max, w_n);
    json_decref(js);

    /* A session with a file, in the default (auto) mode. */
    char host[] = "/tmp/ja-serve-in-XXXXXX";
    int fd = mkstemp(host);
    if (write(fd, "x,y\n1,2\n", 8) != 8)
        diag("write failed");
    close(fd);
    char *spec = NULL;
    if (asprintf(&spec, "%s:in.csv", host) < 0)
        return 1;
    ag_session_parse_flag(&o, "--file", spec, &err);
    o.warm = AG_WARM_AUTO;
    free(spec);
    ag_session_t *s1 = s_session(&o, &err);
    ok(s1 && ag_session_is_warm(s1),
       "a session takes a warm kernel when a server runs (default mode)");
    if (!s1)
        goto stop;
    char *r = s_eval(s1, "1+1", 30000, NULL);
    is_str(r, "2", "the warm kernel answers under the session's key");
    free(r);
    r = s_eval(s1,
               "import pandas as pd; "
               "print(pd.read_csv('/mnt/data/in.csv').y[0])",
               30000, NULL);
    is_str(r, "2", "--file lands in the live /mnt/data of a warm kernel");
    free(r);
    ok(ag_session_workspace(s1) != NULL,
       "the host reaches the warm box's workspace");
    is_int(s_stat("hits"), 1, "the take is counted as a hit");
    {
        /* The pidfd the client got must be the kernel's own (a forked
         * kernel's box runs a holder): else shutdown waits for nothing. */
        kb_launcher_t *l = kb_kernel_launcher(ag_session_kernel(s1));
        char fdinfo[64], line[128], comm[64] = "";
        snprintf(fdinfo, sizeof fdinfo, "/proc/self/fdinfo/%d",
                 l->ops->pidfd(l->self));
        FILE *fi = fopen(fdinfo, "r");
        long kpid = -1;
        while (fi && fgets(line, sizeof line, fi))
            if (strncmp(line, "Pid:", 4) == 0)
                kpid = strtol(line + 4, NULL, 10);
        if (fi)
            fclose(fi);
        snprintf(fdinfo, sizeof fdinfo, "/proc/%ld/comm", kpid);
        fi = fopen(fdinfo, "r");
        if (fi && fgets(comm, sizeof comm, fi))
            comm[strcspn(comm, "\n")] = '\0';
        if (fi)
            fclose(fi);
        is_str(comm, "python3",
               "the client watches and signals the kernel process itself");
    }

    ag_session_t *s2 = s_session(&o2, &err);
    ok(s2 && ag_session_is_warm(s2), "a second session gets the second kernel");
    if (s2) {
        free(s_eval(s1,
                    "only_in_one = 1; "
                    "open('/mnt/data/mine.txt', 'w').write('x')",
                    30000, NULL));
        r = s_eval(s2,
                   "import os; print('only_in_one' in dir(), "
                   "sorted(os.listdir('/mnt/data')))",
                   30000, NULL);
        is_str(r, "False []",
               "two served sessions share neither variables nor files");
        free(r);
        ok(strcmp(s_run_dir(s1), s_run_dir(s2)) != 0,
           "two served sessions run in different boxes");
    }

    /* The pool is empty now: a take waits for a warm-up in progress (a
     * bounded wait, about one warm-up) or falls back to a cold start. */
    ag_session_opts_t o3;
    ag_session_opts_init(&o3);
    long misses = s_stat("misses"), waited = s_stat("waited"),
         cold = s_stat("cold_misses"), size = s_stat("size");
    ag_session_t *s3 = s_session(&o3, &err);
    ok(s3 != NULL, "with nothing ready, a session still starts (warm after "
                   "waiting for a warm-up, or cold)");
    ok(s_stat("misses") == misses + 1, "and the miss is counted");
    ok(s_stat("waited") + s_stat("cold_misses") == waited + cold + 1 &&
           s_stat("cold_misses") == cold + !ag_session_is_warm(s3),
       "serve --status says whether the miss waited for a warm-up or "
       "started cold (%s)",
       ag_session_is_warm(s3) ? "waited" : "cold");
    ok(s_stat("size") == size + 1 && s_stat("max_size") >= s_stat("size"),
       "the miss grows the pool by one kernel, within max_size");
    ag_session_destroy(&s3);
    ag_session_opts_release(&o3);

    /* A policy the pool does not hold is never served by it. */
    ag_session_opts_init(&o3);
    ag_session_parse_flag(&o3, "--memory", "1G", &err);
    o3.warm = AG_WARM_POOL;
    ok(ag_session_start(&o3, &err) == NULL && err.code == ERR_KERNEL,
       "a session with other limits is not given a pooled kernel");
    ag_session_opts_release(&o3);

    /* Interrupt, death and restart through the server. */
    err_t xerr;
    r = s_eval(s1, "import time; time.sleep(30)", 1500, &xerr);
    free(r);
    is_int(xerr.code, ERR_TIMEOUT,
           "a served kernel is interrupted at its time limit");
    r = s_eval(s1, "only_in_one", 30000, NULL);
    is_str(r, "1", "the interrupt keeps its state");
    free(r);
    r = s_eval(s1, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
               30000, &xerr);
    free(r);
    ok(xerr.code == ERR_KERNEL && strstr(xerr.text, "signal 9"),
       "a served kernel's death is noticed and explained (%s)", xerr.text);
    ok(kb_kernel_restart(ag_session_kernel(s1), &err) == 0,
       "a served kernel restarts through the server");
    r = s_eval(s1, "import os; print(sorted(os.listdir('/mnt/data')))", 30000,
               NULL);
    is_str(r, "['in.csv', 'mine.txt']", "the restart keeps /mnt/data");
    free(r);

    ag_session_destroy(&s1);
    ag_session_destroy(&s2);
    ok(s_wait_stat("sessions", 0), "ending a session removes its box");
    unlink(host);

    /* A client that dies holding a kernel leaks nothing. */
    ok(s_wait_stat("ready", 2), "the pool refills in the background");
    pid_t kid = fork();
    if (kid == 0) {
        bool no_server;
        kb_launcher_t *l = kb_serve_take(s_sock, NULL, NULL, &no_server, NULL);
        _exit(l ? 0 : 1);
    }
    int ws;
    waitpid(kid, &ws, 0);
    ok(WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
       "a client took a kernel and exited without releasing it");
    ok(s_wait_stat("sessions", 0), "its box is destroyed when it hangs up");

    /* A warm kernel that does not answer (frozen) costs its session a
     * bounded wait, then a cold start: never a failure, never 60 s. */
    ok(s_wait_stat("ready", 2), "the pool is full again");
    int frozen = s_signal_forked_kernels(server, SIGSTOP);
    ok(frozen >= 2, "its warm kernels are frozen (%d)", frozen);
    ag_session_opts_t o5;
    ag_session_opts_init(&o5);
    ag_session_t *s5 = s_session(&o5, &err);
    ok(s5 && !ag_session_is_warm(s5),
       "a session whose warm kernel does not answer starts a cold one");
    r = s5 ? s_eval(s5, "1+1", 30000, NULL) : NULL;
    is_str(r, "2", "and that kernel runs code");
    free(r);
    ag_session_destroy(&s5);
    ag_session_opts_release(&o5);
    s_signal_forked_kernels(server, SIGCONT);

    /* A session in use when the server is stopped. */
    ok(s_wait_stat("ready", 2), "the pool refills again");
    o4.warm = AG_WARM_POOL;
    s4 = s_session(&o4, &err);
    ok(s4 && ag_session_is_warm(s4), "a session takes a warm kernel");
    free(s4 ? s_eval(s4, "kept = 41", 30000, NULL) : NULL);

stop:
    ag_session_opts_release(&o);
    ag_session_opts_release(&o2);
    json_t *reply = kb_serve_request(s_sock, "stop", &err);
    is_int(reply ? (long)json_integer_value(
                       json_object_get(reply, "sessions_left"))
                 : -1,
           s4 ? 1 : 0, "serve --stop says how many sessions it left running");
    json_decref(reply);
    int status = -1;
    if (s4) {
        int64_t end = clock_mono_ms() + 30000;
        while (access(s_sock, F_OK) == 0 && clock_mono_ms() < end)
            usleep(50000);
        ok(access(s_sock, F_OK) != 0,
           "after --stop nothing more is handed out: the socket is gone");
        r = s_eval(s4, "kept + 1", 30000, NULL);
        is_str(r, "42",
               "a session handed out before --stop keeps its kernel and "
               "state");
        free(r);
        ok(waitpid(server, &status, WNOHANG) == 0,
           "the stopped server waits for the session in use");
        ag_session_destroy(&s4);
    }
    ag_session_opts_release(&o4);
    waitpid(server, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "serve --stop ends the server cleanly");
    ok(access(s_sock, F_OK) != 0 && errno == ENOENT, "and removes its socket");
    rmdir(dir);
    return done_testing();
}
