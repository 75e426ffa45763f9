/*
 * jupyter-agent sandbox: run a command in the sandbox the kernels use.
 *
 * Stdio passes through; the exit status is the command's (128 + signal
 * when killed). Also the tool the security tests drive.
 */
#include "agent/cli/ag_cmd.h"
#include "agent/cli/ag_pty.h"
#include "common/cliopt.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/strv.h"
#include "common/xalloc.h"
#include "sandbox/sb_landlock.h"
#include "sandbox/sb_policy.h"
#include "sandbox/sb_sandbox.h"
#include "sandbox/sb_seccomp.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define PROG "jupyter-agent sandbox"

/* The Landlock rules a box with policy `p` gets on this kernel. */
static json_t *
s_landlock_json(const sb_policy_t *p)
{
    sb_landlock_plan_t *pl = xmalloc(sizeof *pl);
    sb_landlock_plan_box(pl, sb_landlock_abi(), p, "/RUN-DIR");
    char *words = xmalloc(8192);
    json_t *j = sb_landlock_plan_json(pl);
    json_object_set_new(j, "in_force",
                        json_string(sb_landlock_describe(pl, words, 8192)));
    const char *gap = sb_landlock_gap(pl->abi);
    json_object_set_new(j, "missing", gap ? json_string(gap) : json_null());
    free(words);
    free(pl);
    return j;
}

/* --help: this, the policy flags, then s_help_tail. */
static const char s_help_head[] =
    "usage: jupyter-agent sandbox [OPTIONS] -- CMD [ARGS...]\n"
    "\n"
    "Run CMD in the sandbox that jupyter-agent runs kernels in: its "
    "own user, pid,\n"
    "network (loopback only), mount, IPC and UTS namespaces; a "
    "read-only /usr;\n"
    "a private /tmp, $HOME (" SB_HOME_PATH ") and /mnt/data (the "
    "working directory);\n"
    "uid 1000 without capabilities; a seccomp allow list; Landlock; "
    "cgroup limits. "
    "Stdio passes\n"
    "through; the environment is only PATH, HOME, LANG=C.UTF-8 and "
    "TERM (plus --env).\n"
    "\n"
    "options:\n"
    "  --file F[:NAME]      copy host file F to /mnt/data/NAME "
    "(default: its name)\n"
    "  --timeout S          kill everything after S seconds (exit "
    "status 6)\n"
    "  --quiet              do not print warnings about limits not "
    "enforced\n"
    "  --print-policy       print the policy as JSON and exit\n"
    "  --seccomp-table      print the system-call table (allow list "
    "and deny rows,\n"
    "                       each with its reason) as JSON and exit\n"
    "  --landlock-rules     print the Landlock rules this kernel "
    "enforces (ABI,\n"
    "                       rules, what is missing) as JSON and exit\n"
    "  --info               print the engine (--engine) and what it "
    "enforces here\n"
    "                       (gvisor: runsc's version and platform) "
    "as JSON and exit\n"
    "  -h, --help           this text\n";

static const char s_help_tail[] =
    "\n"
    "CMD without '/' is looked up in /usr/local/bin, /usr/bin, /bin, "
    "/usr/sbin, /sbin;\n"
    "a relative path with '/' is taken relative to /mnt/data.\n"
    "\n"
    "exit status: CMD's status; 128+N when it was killed by signal N "
    "(137 with a\n"
    "message when out of memory); 6 on --timeout; 4 when the sandbox "
    "could not be\n"
    "set up; 2 on usage errors.\n";

/* argv[0] for inside the box, new string, or NULL if not found. */
static char *
s_resolve(const char *cmd)
{
    if (cmd[0] == '/')
        return xstrdup(cmd);
    if (strchr(cmd, '/'))
        return xasprintf(SB_WORKSPACE_PATH "/%s", cmd);
    static const char *const dirs[] = {"/usr/local/bin", "/usr/bin", "/bin",
                                       "/usr/sbin", "/sbin"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char *path = xasprintf("%s/%s", dirs[i], cmd);
        if (access(path, X_OK) == 0)
            return path;
        free(path);
    }
    return NULL;
}

static int
s_print_json(json_t *j)
{
    char *s = json_dumps(j, JSON_INDENT(2));
    json_decref(j);
    if (!s)
        return ERR_IO;
    puts(s);
    free(s);
    return 0;
}

/* The command's own flags, filled by s_on_opt. */
typedef struct {
    char **files; /* owned array of borrowed --file values */
    size_t n_files;
    double timeout_s;
    bool quiet;
    int print; /* 'P', 'S', 'L' or 'I': print that as JSON and exit */
} s_args_t;

static int
s_on_opt(void *arg, const ag_cmd_opt_t *o, err_t *err)
{
    s_args_t *a = arg;
    switch (o->opt) {
    case 'P':
    case 'S':
    case 'L':
    case 'I':
        a->print = o->opt;
        return 0;
    case 'q':
        a->quiet = true;
        return 0;
    case 'f':
        a->files = xrealloc(a->files, (a->n_files + 1) * sizeof *a->files);
        a->files[a->n_files++] = optarg; /* o->value, as argv holds it */
        return 0;
    case 't': {
        char *end = NULL;
        a->timeout_s = strtod(o->value, &end);
        if (end == o->value || *end || !(a->timeout_s > 0) ||
            a->timeout_s > 31536000)
            return err_set(err, ERR_USAGE,
                           "--timeout: '%s' is not a number of seconds",
                           o->value);
        return 0;
    }
    default:
        return 1;
    }
}

int
ag_cmd_sandbox(int argc, char **argv)
{
    sb_policy_t pol;
    sb_policy_init_default(&pol);
    err_t err;
    err_clear(&err);
    int rc = ERR_USAGE, cmd_at = -1, sfd = -1;
    double timeout_s = 0;
    bool quiet = false;
    char **files = NULL;
    size_t n_files = 0;
    char *prog = NULL;
    char **env = NULL;
    sb_sandbox_t *sb = NULL;
    ag_pty_t *pty = NULL;
    sigset_t sigs, old_mask;
    sigemptyset(&sigs);

    static const struct option own[] = {{"file", required_argument, 0, 'f'},
                                        {"timeout", required_argument, 0, 't'},
                                        {"quiet", no_argument, 0, 'q'},
                                        {"print-policy", no_argument, 0, 'P'},
                                        {"seccomp-table", no_argument, 0, 'S'},
                                        {"landlock-rules", no_argument, 0, 'L'},
                                        {"info", no_argument, 0, 'I'},
                                        {0, 0, 0, 0}};
    /* '+': options end at CMD, whose own flags are not ours. */
    static const ag_cmd_spec_t cmd = {.name = "sandbox",
                                      .shortopts = "+h",
                                      .own = own,
                                      .usage = s_help_head,
                                      .usage_tail = s_help_tail,
                                      .on_opt = s_on_opt};
    cliopt_group_t policy = sb_policy_flags(&pol);
    s_args_t a = {0};
    int parsed = ag_cmd_parse(&cmd, argc, argv, &policy, 1, &a, &err);
    files = a.files;
    n_files = a.n_files;
    timeout_s = a.timeout_s;
    quiet = a.quiet;
    if (parsed == 1) {
        rc = 0; /* --help */
        goto out;
    }
    if (parsed) {
        fprintf(stderr, PROG ": %s\n", err.text);
        goto out;
    }
    switch (a.print) { /* the last of the print-and-exit flags */
    case 'P':
        rc = s_print_json(sb_policy_to_json(&pol));
        goto out;
    case 'S':
        rc = s_print_json(sb_seccomp_table_json());
        goto out;
    case 'L':
        rc = s_print_json(s_landlock_json(&pol));
        goto out;
    case 'I':
        rc = s_print_json(sb_sandbox_engine_info(&pol));
        goto out;
    default:
        break;
    }
    cmd_at = optind;
    if (cmd_at < 0 || cmd_at >= argc) {
        fprintf(stderr, PROG ": no command given; usage: " PROG
                             " [OPTIONS] -- CMD [ARGS...]\n");
        goto out;
    }
    prog = s_resolve(argv[cmd_at]);
    if (!prog) {
        fprintf(stderr,
                PROG ": command '%s' not found in /usr/local/bin, /usr/bin, "
                     "/bin, /usr/sbin or /sbin (only /usr is visible inside)\n",
                argv[cmd_at]);
        rc = ERR_USAGE;
        goto out;
    }

    sb = sb_sandbox_new(&pol, &err);
    if (!sb) {
        fprintf(stderr, "jupyter-agent: %s\n", err.text);
        rc = err.code;
        goto out;
    }
    for (size_t i = 0; i < n_files; i++) {
        char *spec = xstrdup(files[i]);
        char *colon = strrchr(spec, ':');
        const char *name = NULL;
        if (colon && colon[1] && !strchr(colon + 1, '/')) {
            *colon = '\0';
            name = colon + 1;
        }
        int r = sb_sandbox_add_file(sb, spec, name, &err);
        free(spec);
        if (r < 0) {
            fprintf(stderr, "jupyter-agent: %s\n", err.text);
            rc = err.code;
            goto out;
        }
    }
    if (!quiet && sb_sandbox_warnings(sb))
        fprintf(stderr, PROG ": warning: %s\n", sb_sandbox_warnings(sb));

    /* The box never gets the user's terminal: a pty of ours instead. */
    pty = ag_pty_new(&err);
    if (!pty && err.code) {
        fprintf(stderr, PROG ": %s\n", err.text);
        rc = err.code;
        goto out;
    }

    /* Signals for the box arrive through a signalfd and are forwarded. */
    int fwd[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
        sigaddset(&sigs, fwd[i]);
    if (pty)
        sigaddset(&sigs, SIGWINCH);
    sigprocmask(SIG_BLOCK, &sigs, &old_mask);
    sfd = signalfd(-1, &sigs, SFD_CLOEXEC);

    sb_sandbox_set_stdin(sb, ag_pty_stdio(pty, STDIN_FILENO));
    sb_sandbox_set_stdin_ctty(sb, ag_pty_has_stdin(pty));
    argv[cmd_at] = prog;
    env = sb_policy_build_env(&pol, environ, NULL);
    if (sb_sandbox_spawn(sb, argv + cmd_at, env,
                         ag_pty_stdio(pty, STDOUT_FILENO),
                         ag_pty_stdio(pty, STDERR_FILENO), &err) < 0) {
        fprintf(stderr, "jupyter-agent: %s\n", err.text);
        rc = err.code ? err.code : ERR_SANDBOX;
        goto out;
    }
    ag_pty_start(pty);

    int64_t deadline =
        timeout_s > 0 ? clock_mono_ms() + (int64_t)ceil(timeout_s * 1000) : -1;
    bool timed_out = false;
    sb_exit_t ex;
    for (;;) {
        struct pollfd pf[4] = {{.fd = sb_sandbox_pidfd(sb), .events = POLLIN},
                               {.fd = sfd, .events = POLLIN}};
        int npf = sfd >= 0 ? 2 : 1;
        ag_pty_poll_setup(pty, pf, &npf);
        int wait_ms = -1;
        if (deadline >= 0) {
            int64_t left = deadline - clock_mono_ms();
            wait_ms = left > 0 ? (int)(left > 1000000 ? 1000000 : left) : 0;
        }
        int pr = poll(pf, (nfds_t)npf, wait_ms);
        if (pr < 0 && errno != EINTR)
            break;
        if (pr > 0)
            ag_pty_poll_done(pty, pf, npf);
        if (pr > 0 && (pf[0].revents & POLLIN))
            break;
        if (pr > 0 && sfd >= 0 && (pf[1].revents & POLLIN)) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (si.ssi_signo == SIGWINCH)
                    ag_pty_winch(pty);
                else
                    sb_sandbox_signal(sb, (int)si.ssi_signo);
            }
        }
        if (deadline >= 0 && clock_mono_ms() >= deadline) {
            timed_out = true;
            sb_sandbox_kill(sb);
            break;
        }
    }
    /* What the command left in the pty, then the user's terminal as it
     * was, before anything of ours is printed. */
    ag_pty_drain(pty);
    ag_pty_destroy(&pty);
    if (sb_sandbox_wait(sb, -1, &ex) != 0) {
        fprintf(stderr, PROG ": waiting for the sandbox: %s\n",
                strerror(errno));
        rc = ERR_SANDBOX;
        goto out;
    }
    char *audit = sb_sandbox_seccomp_audit_report(sb);
    if (audit)
        fprintf(stderr, PROG ": %s\n", audit);
    free(audit);
    char how[160];
    if (timed_out) {
        fprintf(stderr,
                PROG ": timed out after %g s; killed everything in "
                     "the sandbox\n",
                timeout_s);
        rc = ERR_TIMEOUT;
    } else {
        rc = sb_exit_status(&ex);
        if (ex.kind == SB_OOM_KILLED ||
            (ex.kind == SB_SIGNALED && ex.signal != SIGINT &&
             ex.signal != SIGPIPE))
            fprintf(stderr, PROG ": %s %s\n", argv[cmd_at],
                    sb_exit_describe(&ex, &pol, how, sizeof how));
    }
    if (sb_sandbox_finish(sb, &err) < 0)
        fprintf(stderr, "jupyter-agent: %s\n", err.text);
out:
    ag_pty_destroy(&pty);
    sb_sandbox_destroy(&sb);
    if (sfd >= 0) {
        close(sfd);
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
    }
    strv_free(env);
    free(prog);
    free(files);
    sb_policy_release(&pol);
    return rc;
}
