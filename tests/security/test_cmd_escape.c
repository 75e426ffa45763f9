/*
 * Security tests: a command run in a live box (sandbox/sb_cmds.h) is as
 * confined as the box's program, and no more able to leave it: host
 * files, the host's network, another box, ptrace of the program; a fork
 * bomb and an output flood stay bounded; what it leaves running dies with
 * the box.
 */
#include "common/strv.h"
#include "sandbox/sb_cmds.h"
#include "sandbox/sb_policy.h"
#include "sandbox/sb_sandbox.h"
#include "tests/host_pids.h"
#include "tests/tap.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PY "/usr/bin/python3"

static char **s_env;

struct out {
    int rc;           /* sb_cmds_start's */
    unsigned id;      /* the command */
    char o[8192];     /* stdout + stderr */
    size_t total;     /* bytes of output seen */
    sb_cmd_end_t end; /* how it ended */
};

static void
s_sh(sb_cmds_t *m, const char *script, int timeout_ms, size_t cap,
     struct out *r)
{
    memset(r, 0, sizeof *r);
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    sb_cmd_opts_t o = {.argv = (char *const *)argv,
                       .envp = s_env,
                       .timeout_ms = timeout_ms,
                       .max_output = cap};
    r->rc = sb_cmds_start(m, &o, &r->id, NULL, NULL);
    size_t cursor = 0;
    while (r->rc == 0) {
        int stream;
        char *data;
        size_t len;
        int got = sb_cmds_next(m, r->id, &cursor, 60000, &stream, &data, &len,
                               &r->end);
        if (got != SB_CMDS_DATA)
            break;
        size_t at = strlen(r->o);
        snprintf(r->o + at, sizeof r->o - at, "%s", data);
        r->total += len;
        free(data);
    }
}

static sb_sandbox_t *
s_box(const sb_policy_t *p, const char *script, sb_cmds_t **m)
{
    sb_sandbox_t *sb = sb_sandbox_new(p, NULL);
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    err_t err;
    err_clear(&err);
    if (!sb ||
        sb_sandbox_spawn(sb, (char *const *)argv, s_env, -1, -1, &err) < 0) {
        ok(0, "a box starts: %s", err.text);
        sb_sandbox_destroy(&sb);
        return NULL;
    }
    sb_proc_engine_t *e = sb_sandbox_proc_engine(sb, &err);
    *m = e ? sb_cmds_new(&e, NULL, &err) : NULL;
    if (!*m) {
        ok(0, "a command manager starts: %s", err.text);
        sb_sandbox_destroy(&sb);
    }
    return sb;
}

static int
s_count(const char *a1)
{
    int pids[4];
    return host_pids("/bin/sleep", a1, pids, 4);
}

int
main(void)
{
    sb_policy_t p;
    sb_policy_init_default(&p);
    p.pids = 64;
    char e0[] = "TERM=dumb";
    char *host_env[] = {e0, NULL};
    s_env = sb_policy_build_env(&p, host_env, NULL);

    /* A host file no box may see, and a host listener no box may reach. */
    char secret[] = "/tmp/ja-cmd-secret-XXXXXX";
    int sfd = mkstemp(secret);
    if (sfd >= 0 && write(sfd, "host secret\n", 12) != 12)
        return 1;
    int lis = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (lis < 0 || bind(lis, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        listen(lis, 4) < 0 || getsockname(lis, (struct sockaddr *)&sa, &sl))
        return 1;

    sb_cmds_t *ma = NULL, *mb = NULL;
    sb_sandbox_t *a = s_box(
        &p, "echo box-a-only > /mnt/data/a-secret.txt; exec sleep 600", &ma);
    sb_sandbox_t *b = s_box(&p, "exec sleep 600", &mb);
    if (!a || !b)
        return done_testing();
    struct out r;
    char script[512];

    snprintf(script, sizeof script,
             "cat %s; cat /etc/shadow; ls /root; echo done", secret);
    s_sh(mb, script, 10000, 0, &r);
    ok(strstr(r.o, "done") && !strstr(r.o, "host secret") &&
           !strstr(r.o, "root:"),
       "a command cannot read host files (%s, /etc/shadow, /root)", secret);
    s_sh(mb, "echo x > /usr/x; echo x > /etc/x; echo x > /x; echo done", 10000,
         0, &r);
    ok(strstr(r.o, "done") && strstr(r.o, "Read-only"),
       "a command cannot write outside the box's own tmpfs mounts");

    for (int i = 0; i < 50; i++) { /* box A's program writes it at start */
        s_sh(ma, "cat /mnt/data/a-secret.txt", 10000, 0, &r);
        if (strstr(r.o, "box-a-only"))
            break;
        usleep(100 * 1000);
    }
    ok(strstr(r.o, "box-a-only") != NULL, "box A's command sees A's file");
    s_sh(mb,
         "ls /mnt/data; cat /proc/*/root/mnt/data/a-secret.txt; "
         "find / -name a-secret.txt 2>/dev/null | sed s/^/FOUND:/; echo done",
         30000, 0, &r);
    ok(strstr(r.o, "done") && !strstr(r.o, "box-a-only") &&
           !strstr(r.o, "FOUND:"),
       "box B's command cannot see box A's files");

    if (access(PY, X_OK) == 0) {
        snprintf(script, sizeof script,
                 PY " -c \"import socket\n"
                    "for h in [('127.0.0.1', %d), ('10.0.2.2', 80), "
                    "('1.1.1.1', 53)]:\n"
                    "  try:\n"
                    "    socket.create_connection(h, 2); print('REACHED', h)\n"
                    "  except OSError as e: print('no', e.errno)\n\"",
                 ntohs(sa.sin_port));
        s_sh(mb, script, 30000, 0, &r);
        ok(strstr(r.o, "no") && !strstr(r.o, "REACHED"),
           "a command reaches neither the host's loopback nor the network "
           "(%s)",
           r.o);
        s_sh(mb,
             PY " -c \"import ctypes, os, errno\n"
                "libc = ctypes.CDLL(None, use_errno=True)\n"
                "pids = [p for p in os.listdir('/proc') if p.isdigit() and "
                "b'sleep' in open('/proc/%s/cmdline' % p, 'rb').read()]\n"
                "for p in pids:\n"
                "  rc = libc.ptrace(16, int(p), 0, 0)\n"
                "  print('attach', p, rc, errno.errorcode.get("
                "ctypes.get_errno()))\n\"",
             30000, 0, &r);
        ok(strstr(r.o, "attach") && strstr(r.o, "-1 EPERM") &&
               !strstr(r.o, " 0 "),
           "a command cannot ptrace the box's program (%s)", r.o);
    } else {
        skip("%s is not installed", PY);
        skip("%s is not installed", PY);
    }

    /* A fork bomb: bounded by the box's pids limit, ended by its
     * timeout, and the box still works afterwards. */
    time_t t0 = time(NULL);
    s_sh(mb, "b() { b | b & }; b; sleep 100", 3000, 0, &r);
    ok(r.rc == 0 && r.end.timed_out, "a fork bomb ends at its timeout (%s)",
       r.end.why);
    int alive = 0;
    for (int i = 0; i < 100 && !alive; i++) {
        s_sh(mb, "echo alive", 10000, 0, &r);
        alive = strstr(r.o, "alive") != NULL;
        if (!alive)
            usleep(100 * 1000);
    }
    ok(alive && time(NULL) - t0 < 60,
       "the box runs commands again after the bomb");
    s_sh(ma, "echo other box fine", 10000, 0, &r);
    ok(strstr(r.o, "other box fine") != NULL,
       "another box was not affected by it");

    /* An output flood: cut at the cap, the command killed. */
    s_sh(mb, "cat /dev/zero", 60000, 1 << 20, &r);
    /* Killed, or dead of SIGPIPE first: its pipes close at the cap too. */
    ok(r.end.capped && r.total <= (1u << 20) && r.end.exit_code != 0,
       "an output flood is cut at its limit and killed (%zu bytes)", r.total);

    /* Left running, in a session of its own, ignoring SIGTERM. */
    s_sh(mb,
         "setsid sh -c 'trap \"\" TERM HUP; exec /bin/sleep 4242' "
         "</dev/null >/dev/null 2>&1 & echo started",
         10000, 0, &r);
    int before = 0;
    for (int i = 0; i < 50 && !before; i++) {
        before = s_count("4242");
        if (!before)
            usleep(100 * 1000);
    }
    ok(before == 1, "a command left a daemon running");
    sb_sandbox_destroy(&b);
    int left = 1;
    for (int i = 0; i < 50 && left; i++) {
        left = s_count("4242");
        if (left)
            usleep(100 * 1000);
    }
    is_int(left, 0, "it died with its box");
    sb_cmds_destroy(&mb);
    sb_cmds_destroy(&ma);
    sb_sandbox_destroy(&a);
    close(lis);
    unlink(secret);
    strv_free(s_env);
    sb_policy_release(&p);
    return done_testing();
}
