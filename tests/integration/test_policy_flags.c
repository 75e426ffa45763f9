/*
 * Every command that starts a sandbox accepts every policy flag, lists it
 * in --help, and refuses a bad value with a message naming the flag. The
 * flags come from the tables themselves (sb_policy_flags, ag_session_flags),
 * so a new row is tested without touching this file.
 */
#include "agent/session/ag_session.h"
#include "common/cliopt.h"
#include "common/xalloc.h"
#include "sandbox/sb_policy.h"
#include "tests/tap.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *s_bin;
static char s_dir[] = "/tmp/ja-flags-XXXXXX";

/* Run BIN argv..., stdout and stderr into files; exit status or -1. */
static int
s_run(const char *const *argv, char **err_text)
{
    char *out = xasprintf("%s/out", s_dir), *errf = xasprintf("%s/err", s_dir);
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int in = open("/dev/null", O_RDONLY);
        if (o < 0 || e < 0 || in < 0)
            _exit(127);
        dup2(in, 0);
        dup2(o, 1);
        dup2(e, 2);
        execv(s_bin, (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        st = -1;
    FILE *f = fopen(errf, "r");
    char buf[2048] = "";
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    *err_text = xstrdup(buf);
    free(out);
    free(errf);
    return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Is "--name" in `cmd --help`? */
static int
s_help_lists(const char *cmd, const char *name)
{
    char *e = NULL;
    const char *argv[] = {s_bin, cmd, "--help", NULL};
    int rc = s_run(argv, &e);
    free(e);
    char *path = xasprintf("%s/out", s_dir);
    FILE *f = fopen(path, "r");
    free(path);
    if (rc != 0 || !f) {
        if (f)
            fclose(f);
        return 0;
    }
    char *want = xasprintf("--%s ", name), *want_nl = xasprintf("--%s\n", name);
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, want) || strstr(line, want_nl);
    fclose(f);
    free(want);
    free(want_nl);
    return found;
}

static void
s_check_row(const char *cmd, const cliopt_t *row)
{
    char *flag = xasprintf("--%s", row->name);
    char *e = NULL;
    ok(s_help_lists(cmd, row->name), "'%s --help' lists %s", cmd, flag);
    if (row->example) {
        const char *argv[] = {s_bin, cmd, flag, row->example, "--help", NULL};
        if (!row->arg) {
            argv[3] = "--help";
            argv[4] = NULL;
        }
        int rc = s_run(argv, &e);
        if (!ok(rc == 0, "%s accepts %s%s%s", cmd, flag, row->arg ? " " : "",
                row->arg ? row->example : ""))
            diag("exit %d: %s", rc, e);
        free(e);
    }
    if (row->invalid) {
        const char *argv[] = {s_bin, cmd, flag, row->invalid, "--help", NULL};
        if (!row->arg) {
            argv[3] = "--help";
            argv[4] = NULL;
        }
        int rc = s_run(argv, &e);
        char *prefix = xasprintf("jupyter-agent %s: ", cmd);
        int clear = strncmp(e, prefix, strlen(prefix)) == 0 &&
                    strstr(e, flag) != NULL &&
                    strchr(e, '\n') == e + strlen(e) - 1;
        if (!ok(rc == 2 && clear,
                "%s refuses %s '%s' as a usage error (exit 2) with one line "
                "naming the flag",
                cmd, flag, row->invalid))
            diag("exit %d: %s", rc, e);
        free(prefix);
        free(e);
    }
    free(flag);
}

int
main(void)
{
    s_bin = getenv("JUPYTER_AGENT_BIN");
    if (!s_bin)
        s_bin = "build/jupyter-agent";
    if (access(s_bin, X_OK) != 0 || !mkdtemp(s_dir)) {
        printf("Bail out! no %s (set JUPYTER_AGENT_BIN)\n", s_bin);
        return 1;
    }

    /* Every command that starts a sandbox takes the policy table... */
    static const char *const sandboxed[] = {"exec",   "run",     "ask",
                                            "kernel", "sandbox", "serve"};
    sb_policy_t pol;
    sb_policy_init_default(&pol);
    cliopt_group_t policy = sb_policy_flags(&pol);
    ok(policy.n >= 12, "the policy table has its %zu flags", policy.n);
    for (size_t c = 0; c < sizeof sandboxed / sizeof *sandboxed; c++)
        for (size_t r = 0; r < policy.n; r++)
            s_check_row(sandboxed[c], &policy.opt[r]);
    sb_policy_release(&pol);

    /* ...and those that start a session take the session's tables too. */
    static const char *const sessions[] = {"exec", "run", "ask", "kernel"};
    ag_session_opts_t o;
    ag_session_opts_init(&o);
    cliopt_group_t groups[AG_SESSION_NGROUPS];
    ag_session_flags(&o, groups);
    for (size_t c = 0; c < sizeof sessions / sizeof *sessions; c++)
        for (size_t g = 0; g < AG_SESSION_NGROUPS; g++)
            if (groups[g].opt != policy.opt)
                for (size_t r = 0; r < groups[g].n; r++)
                    s_check_row(sessions[c], &groups[g].opt[r]);
    ag_session_opts_release(&o);

    char *out = xasprintf("%s/out", s_dir), *err = xasprintf("%s/err", s_dir);
    unlink(out);
    unlink(err);
    rmdir(s_dir);
    free(out);
    free(err);
    return done_testing();
}
