/*
 * Integration tests: commands in a running box (sandbox/sb_cmds.h on the
 * namespace engine, sandbox/sb_proc.h). The box's program stands in for
 * a kernel: it writes a file into /mnt/data and sleeps.
 */
#include "common/strv.h"
#include "sandbox/sb_cmds.h"
#include "sandbox/sb_policy.h"
#include "sandbox/sb_sandbox.h"
#include "tests/host_pids.h"
#include "tests/tap.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char **s_env;

struct out {
    int rc;           /* sb_cmds_start's */
    err_t err;        /* its error */
    unsigned id;      /* the command */
    int pid;          /* inside */
    char o[65536];    /* stdout */
    char e[4096];     /* stderr */
    size_t olen;      /* bytes of stdout seen (all of them) */
    sb_cmd_end_t end; /* how it ended */
    int ended;        /* SB_CMDS_END was seen */
};

static void
s_follow(sb_cmds_t *m, struct out *r, size_t cursor)
{
    for (;;) {
        int stream;
        char *data;
        size_t len;
        int got = sb_cmds_next(m, r->id, &cursor, 30000, &stream, &data, &len,
                               &r->end);
        if (got == SB_CMDS_DATA) {
            char *dst = stream == 1 ? r->o : r->e;
            size_t size = stream == 1 ? sizeof r->o : sizeof r->e;
            size_t at = strlen(dst);
            snprintf(dst + at, size - at, "%s", data);
            if (stream == 1)
                r->olen += len;
            free(data);
            continue;
        }
        r->ended = got == SB_CMDS_END;
        return;
    }
}

static void
s_run(sb_cmds_t *m, const sb_cmd_opts_t *o, struct out *r)
{
    memset(r, 0, sizeof *r);
    r->rc = sb_cmds_start(m, o, &r->id, &r->pid, &r->err);
    if (r->rc == 0)
        s_follow(m, r, 0);
}

static void
s_sh(sb_cmds_t *m, const char *script, struct out *r)
{
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    sb_cmd_opts_t o = {.argv = (char *const *)argv, .envp = s_env};
    s_run(m, &o, r);
}

static int
s_same_ns(int a, int b, const char *ns)
{
    char pa[64], pb[64], la[128] = "", lb[128] = "";
    snprintf(pa, sizeof pa, "/proc/%d/ns/%s", a, ns);
    snprintf(pb, sizeof pb, "/proc/%d/ns/%s", b, ns);
    ssize_t na = readlink(pa, la, sizeof la - 1);
    ssize_t nb = readlink(pb, lb, sizeof lb - 1);
    return na > 0 && nb > 0 && strcmp(la, lb) == 0;
}

static void
t_basics(sb_sandbox_t *sb, sb_cmds_t *m)
{
    struct out r;
    /* The program wrote it right after it started; give it a moment. */
    for (int i = 0; i < 50; i++) {
        s_sh(m, "cat /mnt/data/from-kernel.txt", &r);
        if (strstr(r.o, "written by the program"))
            break;
        usleep(100 * 1000);
    }
    ok(strstr(r.o, "written by the program") != NULL,
       "a command sees the file the box's program wrote in /mnt/data");

    s_sh(m, "echo out; echo err >&2; exit 3", &r);
    ok(r.rc == 0 && r.ended, "a command runs to its end (%s)", r.err.text);
    is_str(r.o, "out\n", "its stdout is streamed");
    is_str(r.e, "err\n", "its stderr is streamed apart");
    is_int(r.end.exit_code, 3, "its exit code is reported");
    ok(r.pid > 1, "it has a pid inside the box (%d)", r.pid);

    s_sh(m, "id -u; id -g; pwd; echo $HOME", &r);
    is_str(r.o, "1000\n1000\n/home/user\n/home/user\n",
           "it runs as the box's user in /home/user by default");

    const char *env[] = {"PATH=/usr/bin:/bin", "GREETING=hello there", NULL};
    const char *argv[] = {"sh", "-c", "echo \"$GREETING\"; pwd", NULL};
    sb_cmd_opts_t o = {
        .argv = (char *const *)argv, .envp = (char *const *)env, .cwd = "/tmp"};
    s_run(m, &o, &r);
    is_str(r.o, "hello there\n/tmp\n",
           "argv[0] is looked up in PATH; env and cwd are the caller's");

    s_sh(m,
         "grep -E '^(NoNewPrivs|Seccomp|CapEff|CapBnd|CapPrm):' "
         "/proc/self/status",
         &r);
    ok(strstr(r.o, "NoNewPrivs:\t1") && strstr(r.o, "Seccomp:\t2") &&
           strstr(r.o, "CapEff:\t0000000000000000") &&
           strstr(r.o, "CapPrm:\t0000000000000000") &&
           strstr(r.o, "CapBnd:\t0000000000000000"),
       "it has NO_NEW_PRIVS, a seccomp filter and no capability");
    s_sh(m, "ulimit -n; ulimit -c", &r);
    char want[64];
    snprintf(want, sizeof want, "%u\n0\n",
             (unsigned)sb_sandbox_policy(sb)->nofile);
    is_str(r.o, want, "it has the box's rlimits (open files, no core)");
    s_sh(m, "touch /usr/x 2>&1; touch /mnt/data/ok && echo wrote", &r);
    ok(strstr(r.o, "Read-only") && strstr(r.o, "wrote"),
       "it sees the box's mounts: / read-only, /mnt/data writable");

    const char *bad[] = {"no-such-program-here", NULL};
    sb_cmd_opts_t ob = {.argv = (char *const *)bad, .envp = s_env};
    s_run(m, &ob, &r);
    ok(r.rc < 0 && r.err.code == ERR_USAGE &&
           strstr(r.err.text, "no-such-program-here") &&
           strstr(r.err.text, "No such file"),
       "a program that does not exist is an error naming it (%s)", r.err.text);
    const char *sh[] = {"/bin/sh", "-c", "true", NULL};
    sb_cmd_opts_t oc = {
        .argv = (char *const *)sh, .envp = s_env, .cwd = "/nonexistent"};
    s_run(m, &oc, &r);
    ok(r.rc < 0 && strstr(r.err.text, "chdir") &&
           strstr(r.err.text, "/nonexistent"),
       "a working directory that does not exist is an error (%s)", r.err.text);
}

static void
t_stdin_signals_list(sb_cmds_t *m)
{
    struct out r;
    memset(&r, 0, sizeof r);
    const char *cat[] = {"/bin/cat", NULL};
    sb_cmd_opts_t o = {
        .argv = (char *const *)cat, .envp = s_env, .stdin_open = true};
    r.rc = sb_cmds_start(m, &o, &r.id, &r.pid, &r.err);
    ok(r.rc == 0 && sb_cmds_write(m, r.id, "hello ", 6, NULL) == 0 &&
           sb_cmds_write(m, r.id, "stdin\n", 6, NULL) == 0 &&
           sb_cmds_close_stdin(m, r.id, NULL) == 0,
       "stdin can be written and closed");
    s_follow(m, &r, 0);
    ok(strcmp(r.o, "hello stdin\n") == 0 && r.end.exit_code == 0,
       "the command read it and ended at its EOF");

    const char *slp[] = {"/bin/sleep", "300", NULL};
    sb_cmd_opts_t os = {
        .argv = (char *const *)slp, .envp = s_env, .tag = "sleeper"};
    unsigned id;
    int pid;
    ok(sb_cmds_start(m, &os, &id, &pid, NULL) == 0, "a background command");
    json_t *l = sb_cmds_list(m);
    int listed = 0;
    size_t i;
    json_t *v;
    json_array_foreach(l, i, v)
    {
        if (json_integer_value(json_object_get(v, "pid")) == pid &&
            strcmp(json_string_value(json_object_get(v, "tag")), "sleeper") ==
                0)
            listed = 1;
    }
    json_decref(l);
    ok(listed, "the list shows it with its pid and tag");
    is_int((int)sb_cmds_find(m, pid, NULL), (int)id, "found by pid");
    is_int((int)sb_cmds_find(m, 0, "sleeper"), (int)id, "found by tag");
    struct out late;
    memset(&late, 0, sizeof late);
    late.id = id;
    ok(sb_cmds_signal(m, id, SIGTERM, NULL) == 0, "SIGTERM is sent");
    s_follow(m, &late, 0);
    ok(late.ended && late.end.signal == SIGTERM &&
           late.end.exit_code == 128 + SIGTERM,
       "it ended by SIGTERM (%s)", late.end.why);
    l = sb_cmds_list(m);
    is_int((int)json_array_size(l), 0, "and it is no longer listed");
    json_decref(l);
    ok(sb_cmds_signal(m, id, SIGKILL, NULL) < 0,
       "signalling an ended command is refused");

    /* Two readers: a reconnect replays, cursor_now follows from now. */
    s_sh(m, "echo one; sleep 0.3; echo two", &r);
    struct out again;
    memset(&again, 0, sizeof again);
    again.id = r.id;
    s_follow(m, &again, 0);
    ok(strcmp(again.o, "one\ntwo\n") == 0 && again.ended,
       "a second reader gets the whole output again");
}

static void
t_bounds(sb_cmds_t *m)
{
    struct out r;
    const char *slp[] = {"/bin/sh", "-c", "sleep 300", NULL};
    sb_cmd_opts_t o = {
        .argv = (char *const *)slp, .envp = s_env, .timeout_ms = 300};
    time_t t0 = time(NULL);
    s_run(m, &o, &r);
    ok(r.end.timed_out && r.end.signal == SIGKILL &&
           strstr(r.end.why, "timed out") && time(NULL) - t0 < 20,
       "a command past its timeout is killed (%s)", r.end.why);
    const char *yes[] = {"/usr/bin/yes", NULL};
    sb_cmd_opts_t oy = {
        .argv = (char *const *)yes, .envp = s_env, .max_output = 100000};
    s_run(m, &oy, &r);
    ok(r.end.capped && r.olen <= 100000 && r.olen >= 50000 &&
           strstr(r.end.why, "output limit"),
       "a command past its output limit is killed, its output cut "
       "(%zu bytes; %s)",
       r.olen, r.end.why);
}

int
main(void)
{
    sb_policy_t p;
    sb_policy_init_default(&p);
    char e0[] = "TERM=dumb";
    char *host_env[] = {e0, NULL};
    s_env = sb_policy_build_env(&p, host_env, NULL);
    sb_sandbox_t *sb = sb_sandbox_new(&p, NULL);
    const char *argv[] = {"/bin/sh", "-c",
                          "echo written by the program > "
                          "/mnt/data/from-kernel.txt; exec sleep 600",
                          NULL};
    err_t err;
    err_clear(&err);
    if (!sb ||
        sb_sandbox_spawn(sb, (char *const *)argv, s_env, -1, -1, &err) < 0) {
        ok(0, "a sandbox can be created here: %s", err.text);
        return done_testing();
    }
    sb_proc_engine_t *e = sb_sandbox_proc_engine(sb, &err);
    sb_cmds_t *m = e ? sb_cmds_new(&e, NULL, &err) : NULL;
    ok(m != NULL, "a command manager on the running box (%s)", err.text);
    if (!m)
        return done_testing();
    t_basics(sb, m);
    t_stdin_signals_list(m);
    t_bounds(m);

    /* Same box as the program: namespaces (seen from the host). */
    const char *marker[] = {"/bin/sleep", "7777", NULL};
    sb_cmd_opts_t om = {.argv = (char *const *)marker, .envp = s_env};
    unsigned id;
    ok(sb_cmds_start(m, &om, &id, NULL, NULL) == 0, "a long command");
    int pids[4];
    int n = host_pids("/bin/sleep", "7777", pids, 4);
    pid_t prog = sb_sandbox_program_pid(sb);
    ok(n == 1 && s_same_ns(pids[0], prog, "mnt") &&
           s_same_ns(pids[0], prog, "pid") && s_same_ns(pids[0], prog, "net") &&
           s_same_ns(pids[0], prog, "user") && s_same_ns(pids[0], prog, "ipc"),
       "it runs in the program's user, pid, mount, network and IPC "
       "namespaces");
    const char *cg = sb_sandbox_cgroup_dir(sb, "pids");
    if (cg && n == 1) {
        char path[64], line[512] = "";
        snprintf(path, sizeof path, "/proc/%d/cgroup", pids[0]);
        FILE *f = fopen(path, "r");
        char l[512];
        while (f && fgets(l, sizeof l, f)) /* v1 "N:pids:/x" or v2 "0::/x" */
            if (strstr(l, ":pids:") || (!line[0] && strncmp(l, "0::", 3) == 0))
                snprintf(line, sizeof line, "%s", l);
        line[strcspn(line, "\n")] = '\0';
        if (f)
            fclose(f);
        const char *rel = strchr(line, '/');
        ok(rel && strlen(cg) >= strlen(rel) &&
               strcmp(cg + strlen(cg) - strlen(rel), rel) == 0,
           "and in the box's cgroup (%s)", line);
    } else {
        skip("no pids cgroup here");
    }
    sb_sandbox_destroy(&sb);
    int left = 0;
    for (int i = 0; i < 50; i++) {
        left = host_pids("/bin/sleep", "7777", pids, 4);
        if (!left)
            break;
        usleep(100 * 1000);
    }
    is_int(left, 0, "no command is left on the host once the box is gone");
    struct out r;
    memset(&r, 0, sizeof r);
    r.id = id;
    s_follow(m, &r, 0);
    ok(r.ended && r.end.box_gone, "its end says the box ended (%s)", r.end.why);
    ok(!sb_cmds_alive(m), "the manager knows the box is gone");
    const char *t[] = {"/bin/true", NULL};
    sb_cmd_opts_t ot = {.argv = (char *const *)t, .envp = s_env};
    ok(sb_cmds_start(m, &ot, &id, NULL, &err) < 0 && strstr(err.text, "ended"),
       "starting in a gone box is an error (%s)", err.text);
    sb_cmds_destroy(&m);
    strv_free(s_env);
    sb_policy_release(&p);
    return done_testing();
}
