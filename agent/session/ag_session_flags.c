/*
 * ag_session_flags: a session's options and the flags that set them (the
 * session flag table every session-starting command parses), apart from
 * starting a session (ag_session.c).
 */
#include "agent/session/ag_audit.h"
#include "agent/session/ag_session.h"

#include "common/size.h"
#include "common/strv.h"
#include "common/xalloc.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_MS 60000
#define DEFAULT_IDLE_MS (30 * 60 * 1000)
#define DEFAULT_LIFETIME_MS (8 * 60 * 60 * 1000)

void
ag_session_opts_init(ag_session_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->timeout_ms = DEFAULT_TIMEOUT_MS;
    o->max_output_bytes = KB_DEFAULT_MAX_OUTPUT;
    o->idle_timeout_ms = DEFAULT_IDLE_MS;
    o->max_lifetime_ms = DEFAULT_LIFETIME_MS;
    sb_policy_init_default(&o->policy);
    const char *url = getenv("JUPYTER_GATEWAY_URL");
    if (url && *url)
        o->gateway_url = xstrdup(url);
}

void
ag_session_opts_release(ag_session_opts_t *o)
{
    strv_free(o->files);
    o->files = NULL;
    o->nfiles = 0;
    strv_free(o->installs);
    o->installs = NULL;
    o->ninstalls = 0;
    strv_free(o->trusts);
    o->trusts = NULL;
    o->ntrusts = 0;
    free(o->packages_dir);
    o->packages_dir = NULL;
    free(o->gateway_url);
    o->gateway_url = NULL;
    free(o->gateway_token_file);
    o->gateway_token_file = NULL;
    free(o->gateway_ca);
    o->gateway_ca = NULL;
    audit_log_close(&o->audit);
    sb_policy_release(&o->policy);
}

static int
s_set_no_sandbox(void *o, const char *v, err_t *err)
{
    (void)v;
    (void)err;
    ((ag_session_opts_t *)o)->no_sandbox = true;
    return 0;
}

static int
s_set_file(void *o, const char *v, err_t *err)
{
    (void)err;
    ag_session_opts_t *so = o;
    strv_push(&so->files, &so->nfiles, xstrdup(v));
    return 0;
}

static int
s_set_warm(void *o, const char *v, err_t *err)
{
    static const char *const modes[] = {[AG_WARM_AUTO] = "auto",
                                        [AG_WARM_COLD] = "cold",
                                        [AG_WARM_POOL] = "pool"};
    for (int m = 0; m < (int)(sizeof modes / sizeof modes[0]); m++)
        if (strcmp(v, modes[m]) == 0) {
            ((ag_session_opts_t *)o)->warm = m;
            return 0;
        }
    return err_set(err, ERR_USAGE, "--warm takes auto, pool or cold, not '%s'",
                   v);
}

static int
s_set_max_output(void *o, const char *v, err_t *err)
{
    uint64_t n = 0;
    if (size_parse(v, &n) < 0 || n > SIZE_MAX)
        return err_set(err, ERR_USAGE,
                       "--max-output: '%s' is not a size (e.g. 512M, 2G, "
                       "1048576; 0 = no cap)",
                       v);
    ((ag_session_opts_t *)o)->max_output_bytes = (size_t)n;
    return 0;
}

static int
s_set_kernel(void *o, const char *v, err_t *err)
{
    (void)err;
    ((ag_session_opts_t *)o)->kernel_name = v;
    return 0;
}

static int
s_set_audit(void *o, const char *v, err_t *err)
{
    (void)err;
    ((ag_session_opts_t *)o)->audit_path = v;
    return 0;
}

static int
s_set_audit_key(void *o, const char *v, err_t *err)
{
    (void)err;
    ((ag_session_opts_t *)o)->audit_key = v;
    return 0;
}

static int
s_set_timeout(void *o, const char *v, err_t *err)
{
    if (ag_parse_seconds(v, &((ag_session_opts_t *)o)->timeout_ms, err))
        return err_prefix(err, "--timeout");
    return 0;
}

static int
s_set_idle_timeout(void *o, const char *v, err_t *err)
{
    if (ag_parse_seconds(v, &((ag_session_opts_t *)o)->idle_timeout_ms, err))
        return err_prefix(err, "--idle-timeout");
    return 0;
}

static int
s_set_max_lifetime(void *o, const char *v, err_t *err)
{
    if (ag_parse_seconds(v, &((ag_session_opts_t *)o)->max_lifetime_ms, err))
        return err_prefix(err, "--max-lifetime");
    return 0;
}

static int
s_set_packages(void *o, const char *v, err_t *err)
{
    (void)err;
    ag_session_opts_t *so = o;
    free(so->packages_dir);
    so->packages_dir = xstrdup(v);
    return 0;
}

static int
s_set_install(void *o, const char *v, err_t *err)
{
    (void)err;
    ag_session_opts_t *so = o;
    strv_push(&so->installs, &so->ninstalls, xstrdup(v));
    return 0;
}

static int
s_set_trust(void *o, const char *v, err_t *err)
{
    (void)err;
    ag_session_opts_t *so = o;
    strv_push(&so->trusts, &so->ntrusts, xstrdup(v));
    return 0;
}

/* Replace the owned string *slot with a copy of v. */
static void
s_set_str(char **slot, const char *v)
{
    free(*slot);
    *slot = xstrdup(v);
}

static int
s_set_gateway(void *o, const char *v, err_t *err)
{
    (void)err;
    s_set_str(&((ag_session_opts_t *)o)->gateway_url, v);
    return 0;
}

static int
s_set_gateway_token_file(void *o, const char *v, err_t *err)
{
    (void)err;
    s_set_str(&((ag_session_opts_t *)o)->gateway_token_file, v);
    return 0;
}

static int
s_set_gateway_ca(void *o, const char *v, err_t *err)
{
    (void)err;
    s_set_str(&((ag_session_opts_t *)o)->gateway_ca, v);
    return 0;
}

static const cliopt_t s_gateway_flags[] = {
    {"gateway", "URL",
     "run the kernel on this Jupyter Server or\n"
     "Enterprise Gateway (default $JUPYTER_GATEWAY_URL);\n"
     "--kernel names one of its kernelspecs",
     s_set_gateway, "http://127.0.0.1:8888", NULL, NULL},
    {"gateway-token-file", "FILE",
     "its token, read from FILE (default\n"
     "$JUPYTER_GATEWAY_AUTH_TOKEN)",
     s_set_gateway_token_file, "token.txt", NULL, NULL},
    {"gateway-ca", "FILE", "trust this CA (PEM) for its TLS certificate",
     s_set_gateway_ca, "ca.pem", NULL, NULL},
};

/* The session's own flags; the sandbox's are sb_policy_flags(). */
/* What the flags that reach into the box need (cliopt_t.needs): with
 * --no-sandbox there is no box, and they are refused, not ignored. */
#define S_NEEDS_BOX "the sandbox"

static const cliopt_t s_session_flags[] = {
    {"kernel", "NAME",
     "kernelspec to start (default python3; run: the\n"
     "notebook's metadata.kernelspec.name, else python3)",
     s_set_kernel, "python3", NULL, NULL},
    {"timeout", "S",
     "wall-clock limit per execution: the code, a cell,\n"
     "a python call (default 60; 0 = none); then\n"
     "interrupt, 5 s grace, kill",
     s_set_timeout, "30", "abc", NULL},
    {"file", "PATH[:NAME]", "copy a file into /mnt/data before start",
     s_set_file, "notes.txt", NULL, S_NEEDS_BOX},
    {"max-output", "BYTES",
     "cap on stored output per execution (default 64M;\n"
     "0 = no cap)",
     s_set_max_output, "16M", "-1", NULL},
    {"warm", "MODE",
     "auto: a warm kernel from 'jupyter-agent serve'\n"
     "when one runs, else a cold start (default);\n"
     "pool: the server's or fail; cold: always fresh",
     s_set_warm, "cold", "sometimes", NULL},
    {"idle-timeout", "S",
     "stop a long-lived session (the agent kernel's)\n"
     "after S idle seconds (default 1800; 0 = never)",
     s_set_idle_timeout, "600", "soon", NULL},
    {"max-lifetime", "S",
     "... or S seconds after it started (default\n"
     "28800; 0 = no limit)",
     s_set_max_lifetime, "3600", "-5", NULL},
    {"no-sandbox", NULL, "run the kernel as a plain process: NO isolation",
     s_set_no_sandbox, "", NULL, NULL},
    {"audit", "FILE",
     "append a hash-chained record of the session to\n"
     "FILE (docs/audit.md; check: 'audit verify')",
     s_set_audit, "audit.log", NULL, NULL},
    {"audit-key", "KEYFILE",
     "seal the --audit log at the end with this\n"
     "'archive keygen' key",
     s_set_audit_key, "audit.key", NULL, NULL},
};

static const cliopt_t s_packages_flags[] = {
    {"packages", "DIR", "wheels signed with 'jupyter-agent manifest sign'",
     s_set_packages, "wheels", NULL, S_NEEDS_BOX},
    {"install", "NAME[==VER]",
     "install NAME and its dependencies from DIR\n"
     "before any code runs (repeatable)",
     s_set_install, "pandas", NULL, S_NEEDS_BOX},
    {"trust", "KEY|FILE",
     "trust this public key for DIR (repeatable),\n"
     "besides the *.pub files in\n"
     "$JUPYTER_AGENT_TRUSTED_KEYS or\n"
     "~/.config/jupyter-agent/trusted-keys/",
     s_set_trust, "key.pub", NULL, S_NEEDS_BOX},
};

void
ag_session_flags(ag_session_opts_t *o,
                 cliopt_group_t groups[AG_SESSION_NGROUPS])
{
    groups[0] = CLIOPT_GROUP(
        "session (every kernel runs sandboxed unless --no-sandbox)",
        s_session_flags, o);
    groups[0].given = &o->given[0];
    groups[1] = sb_policy_flags(&o->policy);
    groups[2] = CLIOPT_GROUP("packages (there is no network; only wheels from "
                             "a signed directory)",
                             s_packages_flags, o);
    groups[2].given = &o->given[2];
    groups[3] = CLIOPT_GROUP("remote kernels (the isolation is the server's)",
                             s_gateway_flags, o);
}

int
ag_session_parse_flag(ag_session_opts_t *o, const char *flag, const char *value,
                      err_t *err)
{
    cliopt_group_t groups[AG_SESSION_NGROUPS];
    ag_session_flags(o, groups);
    for (size_t g = 0; g < AG_SESSION_NGROUPS; g++) {
        int used = cliopt_apply(&groups[g], flag, value, err);
        if (used != 0)
            return used;
    }
    return 0;
}

int
ag_parse_seconds(const char *s, int *ms, err_t *err)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    double scale = 1000;
    if (end && *end == 'm' && end[1] == '\0')
        scale = 60000, end++;
    else if (end && *end == 's' && end[1] == '\0')
        end++;
    if (errno || end == s || *end || v < 0 || !isfinite(v) ||
        v * scale > 2147483647.0)
        return err_set(err, ERR_USAGE,
                       "'%s' is not a duration in seconds (e.g. 60, 2.5, 5m)",
                       s);
    *ms = (int)(v * scale);
    return 0;
}

void
ag_session_split_file_arg(const char *arg, char **path, char **name)
{
    *path = xstrdup(arg);
    char *colon = strrchr(*path, ':');
    if (colon && access(*path, F_OK) != 0) {
        *colon = '\0';
        *name = xstrdup(colon + 1);
        return;
    }
    const char *slash = strrchr(*path, '/');
    *name = xstrdup(slash ? slash + 1 : *path);
}

int
ag_session_audit_open(ag_session_opts_t *o, err_t *err)
{
    if (o->audit_key && !o->audit_path)
        return err_set(err, ERR_USAGE, "--audit-key needs --audit FILE");
    if (!o->audit_path || o->audit)
        return 0;
    o->audit = ag_audit_open(o->audit_path, o->audit_key, err);
    return o->audit ? 0 : -1;
}
