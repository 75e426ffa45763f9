#include "agent/session/ag_session.h"

#include "agent/loop/ag_packages.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_launch_sandbox.h"
#include "kernel-bridge/pool/kb_serve.h"
#include "kernel-bridge/pool/kb_warm.h"
#include "sandbox/sb_files.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_MS 60000
#define DEFAULT_MAX_OUTPUT ((size_t)64 << 20)
#define DEFAULT_IDLE_MS (30 * 60 * 1000)
#define DEFAULT_LIFETIME_MS (8 * 60 * 60 * 1000)

struct ag_session {
    kb_kernel_t *kernel; /* owned */
    json_t *policy;      /* owned JSON of the sandbox policy, or NULL */
    bool sandboxed;      /* false for --no-sandbox and attached kernels */
    bool attached;       /* a kernel someone else started */
    bool warm;           /* the kernel came warm from a serve pool */
    char *warnings;      /* owned, "" when none */
    char *packages_dir;  /* owned --packages DIR, or NULL */
    pk_trust_t *trust;   /* owned keys trusted for packages_dir, or NULL */
    json_t *packages;    /* owned array of install reports, or NULL */
};

/* Installed packages are on the kernel's path from its start, so they
 * import again after a kernel restart (PYTHONPATH may name a directory
 * that does not exist yet). Borrowed by kb_kernel for its lifetime. */
static char s_pythonpath[] = "PYTHONPATH=" AG_PACKAGES_TARGET;
static char *const s_packages_env[] = {s_pythonpath, NULL};

static void
s_push(char ***v, size_t *n, const char *s)
{
    *v = xrealloc(*v, (*n + 2) * sizeof **v);
    (*v)[(*n)++] = xstrdup(s);
    (*v)[*n] = NULL;
}

void
ag_session_opts_init(ag_session_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->timeout_ms = DEFAULT_TIMEOUT_MS;
    o->max_output_bytes = DEFAULT_MAX_OUTPUT;
    o->idle_timeout_ms = DEFAULT_IDLE_MS;
    o->max_lifetime_ms = DEFAULT_LIFETIME_MS;
    sb_policy_init_default(&o->policy);
}

static void
s_free_v(char **v)
{
    for (char **p = v; p && *p; p++)
        free(*p);
    free(v);
}

void
ag_session_opts_release(ag_session_opts_t *o)
{
    s_free_v(o->files);
    o->files = NULL;
    o->nfiles = 0;
    s_free_v(o->installs);
    o->installs = NULL;
    o->ninstalls = 0;
    s_free_v(o->trusts);
    o->trusts = NULL;
    o->ntrusts = 0;
    free(o->packages_dir);
    o->packages_dir = NULL;
    sb_policy_release(&o->policy);
}

int
ag_session_parse_flag(ag_session_opts_t *o, int opt, const char *value,
                      err_t *err)
{
    static const char *const policy_flags[] = {
        "--memory", "--cpus", "--pids", "--disk", "--tmp", "--keep-workspace"};
    err_clear(err);
    int i = opt - AG_SESSION_OPT_BASE;
    if (i == 0) {
        o->no_sandbox = true;
        return 0;
    }
    if (i == 1) {
        s_push(&o->files, &o->nfiles, value);
        return 0;
    }
    if (i == 21 || i == 22)
        return sb_policy_parse_flag(&o->policy,
                                    i == 21 ? "--force" : "--keep-exec", NULL,
                                    err) > 0
                   ? 0
                   : -1;
    if (i == 20) {
        if (strcmp(value, "auto") == 0)
            o->warm = AG_WARM_AUTO;
        else if (strcmp(value, "cold") == 0)
            o->warm = AG_WARM_COLD;
        else if (strcmp(value, "pool") == 0)
            o->warm = AG_WARM_POOL;
        else
            return err_set(err, ERR_USAGE,
                           "--warm takes auto, pool or cold, not '%s'", value);
        return 0;
    }
    if (i == 8) {
        free(o->packages_dir);
        o->packages_dir = xstrdup(value);
        return 0;
    }
    if (i == 9) {
        s_push(&o->installs, &o->ninstalls, value);
        return 0;
    }
    if (i == 10) {
        s_push(&o->trusts, &o->ntrusts, value);
        return 0;
    }
    if (i == 11)
        return ag_parse_seconds(value, &o->idle_timeout_ms, err);
    if (i == 12)
        return ag_parse_seconds(value, &o->max_lifetime_ms, err);
    if (i < 2 || i > 7)
        return -1;
    return sb_policy_parse_flag(&o->policy, policy_flags[i - 2], value, err) > 0
               ? 0
               : -1;
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

int
ag_parse_bytes(const char *s, size_t *bytes, err_t *err)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    double scale = 1;
    switch (end && *end ? *end : 0) {
    case 'k':
    case 'K':
        scale = 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        scale = 1024.0 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        scale = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 't':
    case 'T':
        scale = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default:
        break;
    }
    if (end && (*end == 'i' || *end == 'I'))
        end++;
    if (end && (*end == 'b' || *end == 'B'))
        end++;
    if (errno || end == s || *end || v < 0 || !isfinite(v) || v * scale > 1e18)
        return err_set(err, ERR_USAGE,
                       "'%s' is not a size (e.g. 512M, 2G, 1048576)", s);
    *bytes = (size_t)(v * scale);
    return 0;
}

static const char s_no_sandbox_warning[] =
    "WARNING: --no-sandbox: the kernel runs as a plain process with your "
    "user's full access to files and network.\n";

/* Builds the session's sandbox launcher and queues the --file copies. */
static kb_launcher_t *
s_sandbox_factory(void *arg, err_t *err)
{
    const ag_session_opts_t *o = arg;
    kb_launcher_t *l = kb_launcher_sandbox_new(&o->policy, err);
    if (!l)
        return NULL;
    sb_sandbox_t *box = kb_launcher_sandbox_box(l);
    for (size_t i = 0; i < o->nfiles; i++) {
        /* PATH or PATH:NAME; a colon inside an existing path stays. */
        char *path = xstrdup(o->files[i]);
        char *colon = strrchr(path, ':');
        const char *name = NULL;
        if (colon && access(path, F_OK) != 0) {
            *colon = '\0';
            name = colon + 1;
        }
        int rc = sb_sandbox_add_file(box, path, name, err);
        free(path);
        if (rc) {
            err_prefix(err, "--file %s", o->files[i]);
            kb_launcher_destroy(&l);
            return NULL;
        }
    }
    return l;
}

/* The keys trusted for --packages: each --trust, then the defaults. */
static pk_trust_t *
s_packages_trust(const ag_session_opts_t *o, err_t *err)
{
    pk_trust_t *t = pk_trust_new();
    for (size_t i = 0; i < o->ntrusts; i++)
        if (pk_trust_add_arg(t, o->trusts[i], err)) {
            err_prefix(err, "--trust");
            goto fail;
        }
    if (pk_trust_add_defaults(t, err))
        goto fail;
    return t;
fail:
    pk_trust_destroy(&t);
    return NULL;
}

/* --install the requested packages; on success note what was installed. */
static int
s_install(ag_session_t *s, const ag_session_opts_t *o, err_t *err)
{
    json_t *report = NULL;
    if (ag_packages_install(s, o->packages_dir, s->trust,
                            (const char *const *)o->installs, o->ninstalls,
                            &report, err))
        return err_prefix(err, "--install");
    char *summary = ag_packages_summary(report);
    char *w = xasprintf("%spackages: %s\n", s->warnings, summary);
    free(s->warnings);
    s->warnings = w;
    free(summary);
    json_decref(report);
    return 0;
}

/* kb_kernel asks its factory on start and on restart: always the same
 * warm launcher, so a restart stays in the same box. */
static kb_launcher_t *
s_warm_factory(void *arg, err_t *err)
{
    kb_launcher_t *l = arg;
    if (!l)
        err_set(err, ERR_KERNEL, "no warm kernel");
    return l;
}

/* Take a warm kernel from a serve pool and copy the --file entries into
 * its live /mnt/data. Returns 0 with *out set (or NULL: start cold), -1
 * when --warm pool cannot be honoured or a file cannot be copied. */
static int
s_take_warm(const ag_session_opts_t *o, kb_launcher_t **out, err_t *err)
{
    *out = NULL;
    if (o->no_sandbox || o->warm == AG_WARM_COLD)
        return 0;
    bool no_server;
    err_t terr = {0};
    kb_launcher_t *l =
        kb_serve_take(NULL, o->kernel_name, &o->policy, &no_server, &terr);
    if (!l) {
        if (o->warm != AG_WARM_POOL)
            return 0;
        return err_set(err, no_server ? ERR_USAGE : ERR_KERNEL,
                       "--warm pool: %s", terr.text);
    }
    for (size_t i = 0; i < o->nfiles; i++) {
        char *path = xstrdup(o->files[i]);
        char *colon = strrchr(path, ':');
        const char *name = NULL;
        if (colon && access(path, F_OK) != 0) {
            *colon = '\0';
            name = colon + 1;
        }
        if (!name) {
            name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        }
        int rc = sb_files_check_name(name, err) ||
                 kb_serve_launcher_add_file(l, path, name, err);
        free(path);
        if (rc) {
            err_prefix(err, "--file %s", o->files[i]);
            kb_launcher_destroy(&l);
            return -1;
        }
    }
    *out = l;
    return 0;
}

/* Every sandboxed session starts with /mnt/data/out/, where results for
 * the user go (ask copies it out), so a notebook recorded by ask re-runs
 * under run in the same layout. A failure only costs the directory. */
static void
s_make_out_dir(sb_sandbox_t *box)
{
    err_t err;
    if (sb_sandbox_mkdir(box, "out", &err) != 0)
        log_warn("%s", err.text);
}

ag_session_t *
ag_session_start(const ag_session_opts_t *o, err_t *err)
{
    if (o->no_sandbox && o->nfiles) {
        err_set(err, ERR_USAGE,
                "--file copies into the sandbox's /mnt/data; it does not work "
                "with --no-sandbox");
        return NULL;
    }
    if (o->ninstalls && !o->packages_dir) {
        err_set(err, ERR_USAGE,
                "--install needs --packages DIR (there is no network: "
                "packages come only from a signed directory of wheels)");
        return NULL;
    }
    if ((o->packages_dir || o->ntrusts) && o->no_sandbox) {
        err_set(err, ERR_USAGE,
                "--packages installs into the sandbox's /mnt/data; it does "
                "not work with --no-sandbox");
        return NULL;
    }
    pk_trust_t *trust = NULL;
    if (o->packages_dir && !(trust = s_packages_trust(o, err)))
        return NULL;
    if (o->ninstalls && ag_packages_precheck(o->packages_dir, trust,
                                             (const char *const *)o->installs,
                                             o->ninstalls, err)) {
        pk_trust_destroy(&trust);
        err_prefix(err, "--install");
        return NULL;
    }
    kb_launcher_t *warm = NULL;
    if (s_take_warm(o, &warm, err)) {
        pk_trust_destroy(&trust);
        return NULL;
    }
    kb_kernel_opts_t kopts = {.kernel_name = o->kernel_name,
                              .max_output_bytes = o->max_output_bytes};
    if (!o->no_sandbox) {
        kopts.launcher = s_sandbox_factory;
        kopts.launcher_arg = (void *)o;
    }
    if (warm) {
        kopts.launcher = s_warm_factory;
        kopts.launcher_arg = warm;
    }
    if (o->packages_dir)
        kopts.extra_env = s_packages_env;
    kb_kernel_t *k = kb_kernel_start(&kopts, err);
    if (!k) {
        pk_trust_destroy(&trust);
        return NULL;
    }
    ag_session_t *s = xcalloc(1, sizeof *s);
    s->kernel = k;
    s->sandboxed = !o->no_sandbox;
    s->warm = warm != NULL;
    s->trust = trust;
    s->packages_dir = o->packages_dir ? xstrdup(o->packages_dir) : NULL;
    if (s->sandboxed) {
        sb_sandbox_t *box = ag_session_sandbox(s);
        if (box)
            s_make_out_dir(box);
        const char *w =
            box ? sb_sandbox_warnings(box)
                : kb_serve_launcher_warnings(kb_kernel_launcher(s->kernel));
        if (w && !*w)
            w = NULL;
        s->warnings = w ? xasprintf("warning: %s\n", w) : xstrdup("");
        s->policy = sb_policy_to_json(&o->policy);
    } else {
        s->warnings = xstrdup(s_no_sandbox_warning);
    }
    if (o->ninstalls && s_install(s, o, err)) {
        ag_session_destroy(&s);
        return NULL;
    }
    return s;
}

ag_session_t *
ag_session_attach(const char *connection_file, bool allow_unsigned, err_t *err)
{
    kb_kernel_t *k = kb_kernel_attach(connection_file, allow_unsigned, err);
    if (!k)
        return NULL;
    ag_session_t *s = xcalloc(1, sizeof *s);
    s->kernel = k;
    s->attached = true;
    s->warnings = xasprintf(
        "note: running in the existing kernel of %s: it is NOT sandboxed, "
        "and the code can do anything its owner can.\n",
        connection_file);
    return s;
}

void
ag_session_destroy(ag_session_t **ps)
{
    if (!ps || !*ps)
        return;
    ag_session_t *s = *ps;
    kb_kernel_destroy(&s->kernel);
    json_decref(s->policy);
    json_decref(s->packages);
    pk_trust_destroy(&s->trust);
    free(s->packages_dir);
    free(s->warnings);
    free(s);
    *ps = NULL;
}

kb_kernel_t *
ag_session_kernel(ag_session_t *s)
{
    return s->kernel;
}

void
ag_session_print_warnings(ag_session_t *s, FILE *f)
{
    if (s->warnings && *s->warnings)
        fputs(s->warnings, f);
}

sb_sandbox_t *
ag_session_sandbox(ag_session_t *s)
{
    kb_launcher_t *l = kb_kernel_launcher(s->kernel);
    sb_sandbox_t *box = kb_launcher_sandbox_box(l);
    return box ? box : kb_launcher_warm_box(l);
}

const char *
ag_session_workspace(ag_session_t *s)
{
    sb_sandbox_t *box = ag_session_sandbox(s);
    return box ? sb_sandbox_workspace(box)
               : kb_serve_launcher_workspace(kb_kernel_launcher(s->kernel));
}

const char *
ag_session_packages_dir(ag_session_t *s)
{
    return s->packages_dir;
}

const pk_trust_t *
ag_session_trust(ag_session_t *s)
{
    return s->trust;
}

void
ag_session_record_packages(ag_session_t *s, json_t *report)
{
    if (!s->packages)
        s->packages = json_array();
    json_array_append(s->packages, report);
}

bool
ag_session_is_warm(ag_session_t *s)
{
    return s->warm;
}

json_t *
ag_session_policy_json(ag_session_t *s)
{
    if (s->policy && s->packages)
        return json_pack("{s:b, s:O, s:O}", "sandboxed", 1, "limits", s->policy,
                         "packages", s->packages);
    if (s->policy)
        return json_pack("{s:b, s:O}", "sandboxed", 1, "limits", s->policy);
    return json_pack("{s:b, s:b}", "sandboxed", 0, "attached", s->attached);
}
