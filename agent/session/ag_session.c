#include "agent/session/ag_session.h"
#include "agent/session/ag_audit.h"
#include "agent/session/ag_outputs.h"
#include "agent/session/ag_session_impl.h"

#include "common/log.h"
#include "common/xalloc.h"
#include "kernel-bridge/launch/kb_launch_sandbox.h"
#include "kernel-bridge/pool/kb_serve.h"
#include "kernel-bridge/pool/kb_warm.h"
#include "notebook-io/nb_archive.h"
#include "packages/pk_install.h"
#include "sandbox/sb_files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A warm kernel is already running: ready means one kernel_info round trip
 * and our sockets' handshakes, milliseconds. One that is not ready after
 * this (or refuses the hand-over) is dropped, and in --warm auto the
 * session starts cold instead of waiting out a cold start's 60 s. */
#define WARM_READY_MS 20000

/* Installed packages are on the kernel's path from its start, so they
 * import again after a kernel restart (PYTHONPATH may name a directory
 * that does not exist yet). Borrowed by kb_kernel for its lifetime. */
static char s_pythonpath[] = "PYTHONPATH=" PK_INSTALL_TARGET;
static char *const s_packages_env[] = {s_pythonpath, NULL};

static const char s_no_sandbox_warning[] =
    "WARNING: --no-sandbox: the kernel runs as a plain process with your "
    "user's full access to files and network.\n";

/* [{name, path, sha256, size}] for the --file list; NULL with err set. */
json_t *
ag_session_inputs_new(char *const *files, err_t *err)
{
    json_t *out = json_array();
    for (size_t i = 0; files && files[i]; i++) {
        char *path, *name;
        ag_session_split_file_arg(files[i], &path, &name);
        char *abs = realpath(path, NULL);
        char hex[NB_SHA256_HEX];
        uint64_t size = 0;
        int rc = nb_sha256_file(abs ? abs : path, hex, &size, err);
        if (rc == 0)
            json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:I}", "name",
                                                 name, "path", abs ? abs : path,
                                                 "sha256", hex, "size",
                                                 (json_int_t)size));
        free(abs);
        free(path);
        free(name);
        if (rc) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* The sandbox factory's argument: the options, and the session's audit
 * records, told of each file copied out. */
typedef struct factory_arg {
    const ag_session_opts_t *o;
    ag_audit_t *audit;
} factory_arg_t;

static kb_launcher_t *
s_sandbox_factory(void *arg, err_t *err)
{
    const factory_arg_t *fa = arg;
    const ag_session_opts_t *o = fa->o;
    sb_policy_t policy = o->policy; /* the box copies it */
    if (ag_audit_log(fa->audit)) {
        policy.files_out_fn = ag_audit_file_out;
        policy.files_out_arg = fa->audit;
        policy.net_record_fn = ag_audit_net;
        policy.net_record_arg = fa->audit;
    }
    kb_launcher_t *l = kb_launcher_sandbox_new(&policy, err);
    if (!l)
        return NULL;
    sb_sandbox_t *box = kb_launcher_sandbox_box(l);
    for (size_t i = 0; i < o->nfiles; i++) {
        char *path, *name;
        ag_session_split_file_arg(o->files[i], &path, &name);
        int rc = sb_sandbox_add_file(box, path, name, err);
        free(path);
        free(name);
        if (rc) { /* its words already start "--file 'PATH': " */
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
    if (pk_install(s->kernel, o->packages_dir, s->trust,
                   (const char *const *)o->installs, o->ninstalls, &report,
                   err))
        return err_prefix(err, "--install");
    ag_session_record_packages(s, report);
    char *summary = pk_install_summary(report);
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
    if (o->policy.seccomp_audit && o->warm == AG_WARM_POOL)
        return err_set(err, ERR_USAGE,
                       "--seccomp-audit needs a box of its own: the pool's "
                       "kernels run the enforcing filter; use --warm cold");
    if (o->no_sandbox || o->warm == AG_WARM_COLD || o->policy.seccomp_audit)
        return 0;
    /* A pool box's proxy belongs to serve: its records could not reach
     * this session's --audit log. */
    if (o->policy.allow_net && (o->audit || o->audit_path))
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
        char *path, *name;
        ag_session_split_file_arg(o->files[i], &path, &name);
        int rc = sb_files_check_name(name, err) ||
                 kb_serve_launcher_add_file(l, path, name, err);
        free(path);
        free(name);
        if (rc) {
            err_prefix(err, "--file '%s'", o->files[i]);
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

/* The chart and table formatters, when asked for: a session whose kernel
 * cannot take them still runs, with a warning. Only after they went in
 * does a restart put them in again: a kernel or server that did not take
 * them within a cell's time will not after a restart either, and each try
 * would cost the user another --timeout. */
void
ag_session_outputs_begin(ag_session_t *s, const ag_session_opts_t *o)
{
    err_t e = {0};
    int ms = ag_outputs_timeout(o->timeout_ms);
    if (!o->outputs_data)
        return;
    if (ag_outputs_install(s->kernel, ms, &e) == 0) {
        kb_kernel_on_restart(s->kernel, ag_outputs_on_restart,
                             (void *)(intptr_t)ms);
        return;
    }
    char *w = xasprintf("%swarning: no chart or table data in this "
                        "session: %s\n",
                        s->warnings ? s->warnings : "", e.text);
    free(s->warnings);
    s->warnings = w;
}

/* The session's "session_start" record, the whole policy, and its
 * executions recorded from now on. */
/* The session's records (none without --audit): NULL + err when the log
 * does not open. */
static ag_audit_t *
s_audit_new(const ag_session_opts_t *o, err_t *err)
{
    audit_log_t *log = o->audit;
    if (!log && o->audit_path &&
        !(log = ag_audit_open(o->audit_path, o->audit_key, err)))
        return NULL;
    ag_audit_t *a = ag_audit_new(log);
    if (log != o->audit)
        audit_log_close(&log);
    return a;
}

int
ag_session_audit_begin(ag_session_t *s, const ag_session_opts_t *o, err_t *err)
{
    if (!s->audit && !(s->audit = s_audit_new(o, err)))
        return -1;
    if (!ag_audit_log(s->audit))
        return 0;
    json_t *installs = json_array();
    for (size_t i = 0; i < o->ninstalls; i++)
        json_array_append_new(installs, json_string(o->installs[i]));
    json_t *start = json_pack(
        "{s:s, s:o, s:b, s:i, s:I, s:s?, s:o, s:O, s:i}", "kernel",
        o->kernel_name ? o->kernel_name : "python3", "policy",
        ag_session_policy_json(s), "warm", s->warm, "timeout_ms", o->timeout_ms,
        "max_output_bytes", (json_int_t)o->max_output_bytes, "packages_dir",
        o->packages_dir, "install", installs, "files", s->inputs, "pid",
        (int)getpid());
    if (ag_audit_start(s->audit, start, s->inputs, err))
        return err_prefix(err, "--audit");
    ag_audit_watch(s->audit, s->kernel);
    return 0;
}

/* A kernel that could not start for want of a box limit says so only in
 * Python's words ("RuntimeError: can't start new thread"): name the
 * limit and the flag that raises it. */
/* How long a cold kernel may take to answer kernel_info:
 * $JUPYTER_AGENT_STARTUP_TIMEOUT seconds (1 to 3600, for slow machines
 * and emulators), else 0: kb_kernel's default (60 s). */
static int
s_startup_timeout_ms(void)
{
    const char *v = getenv("JUPYTER_AGENT_STARTUP_TIMEOUT");
    char *end = NULL;
    long secs = v && *v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || secs < 1 || secs > 3600) {
        if (v && *v)
            log_warn("JUPYTER_AGENT_STARTUP_TIMEOUT='%s' is not a number of "
                     "seconds from 1 to 3600; using 60",
                     v);
        return 0;
    }
    return (int)secs * 1000;
}

static void
s_hint_limits(const ag_session_opts_t *o, err_t *err)
{
    if (!err || o->no_sandbox)
        return;
    const char *hint = ag_session_limit_hint(err->text, &o->policy);
    if (hint) {
        size_t used = strlen(err->text);
        snprintf(err->text + used, sizeof err->text - used, "\n%s", hint);
    }
}

const char *
ag_session_limit_hint(const char *text, const sb_policy_t *policy)
{
    static _Thread_local char hint[256];
    if (!text || !policy)
        return NULL;
    if (strstr(text, "can't start new thread") ||
        strstr(text, "BlockingIOError: [Errno 11] Resource temporarily")) {
        snprintf(hint, sizeof hint,
                 "hint: the box allows %u processes and threads in all "
                 "(--pids %u), and the kernel needed more; raise --pids "
                 "(default 128)",
                 policy->pids, policy->pids);
        return hint;
    }
    return NULL;
}

/* --no-sandbox with a flag that needs the box (cliopt_t.needs): nothing
 * would apply it, so refuse it, naming it (rows of every group, one
 * rule). */
static int
s_refuse_unboxed(const ag_session_opts_t *o, err_t *err)
{
    cliopt_group_t groups[AG_SESSION_NGROUPS];
    ag_session_flags((ag_session_opts_t *)o, groups);
    for (size_t g = 0; g < AG_SESSION_NGROUPS; g++) {
        const cliopt_t *row = cliopt_given_needing(&groups[g]);
        if (row)
            return err_set(err, ERR_USAGE,
                           "--%s needs %s, and --no-sandbox runs the kernel "
                           "as a plain process where nothing applies it; "
                           "drop --%s or --no-sandbox",
                           row->name, row->needs, row->name);
    }
    return 0;
}

ag_session_t *
ag_session_start(const ag_session_opts_t *o, err_t *err)
{
    if (o->gateway_url && *o->gateway_url)
        return ag_session_start_gateway(o, err);
    if (o->no_sandbox && s_refuse_unboxed(o, err))
        return NULL;
    if (o->policy.keep_workspace_dir) {
        /* Before the box starts: a session is not worth running when its
         * files have nowhere to go. */
        sb_files_out_opts_t oo;
        sb_policy_out_opts(&o->policy, &oo);
        if (sb_outdir_check(o->policy.keep_workspace_dir, &oo, err) < 0) {
            err_prefix(err, "--keep-workspace");
            return NULL;
        }
    }
    if (o->ninstalls && !o->packages_dir) {
        err_set(err, ERR_USAGE,
                "--install needs --packages DIR (there is no network: "
                "packages come only from a signed directory of wheels)");
        return NULL;
    }
    pk_trust_t *trust = NULL;
    if (o->packages_dir && !(trust = s_packages_trust(o, err)))
        return NULL;
    if (o->ninstalls && pk_install_precheck(o->packages_dir, trust,
                                            (const char *const *)o->installs,
                                            o->ninstalls, err)) {
        pk_trust_destroy(&trust);
        err_prefix(err, "--install");
        return NULL;
    }
    /* Hashed before the kernel starts, so a missing file fails early and
     * the record names what the session was given. */
    json_t *inputs = ag_session_inputs_new(o->files, err);
    if (!inputs) {
        pk_trust_destroy(&trust);
        err_prefix(err, "--file");
        return NULL;
    }
    kb_launcher_t *warm = NULL;
    if (s_take_warm(o, &warm, err)) {
        pk_trust_destroy(&trust);
        json_decref(inputs);
        return NULL;
    }
    factory_arg_t fa = {.o = o, .audit = s_audit_new(o, err)};
    if (!fa.audit) {
        pk_trust_destroy(&trust);
        json_decref(inputs);
        kb_launcher_destroy(&warm);
        return NULL;
    }
    kb_kernel_opts_t kopts = {.kernel_name = o->kernel_name,
                              .max_output_bytes = o->max_output_bytes};
    if (!o->no_sandbox) {
        kopts.launcher = s_sandbox_factory;
        kopts.launcher_arg = &fa;
    }
    kopts.startup_timeout_ms = s_startup_timeout_ms();
    if (warm) {
        kopts.launcher = s_warm_factory;
        kopts.launcher_arg = warm;
        kopts.startup_timeout_ms = WARM_READY_MS;
    }
    if (o->packages_dir)
        kopts.extra_env = s_packages_env;
    /* nbclient adds this for the kernels jupyter_client calls ipykernels:
     * those named python, python2 or python3. */
    static char hist_arg[] = "--HistoryManager.hist_file=:memory:";
    static char *const hist_args[] = {hist_arg, NULL};
    const char *kname = o->kernel_name ? o->kernel_name : "python3";
    if (o->history_in_memory &&
        (!strcmp(kname, "python") || !strcmp(kname, "python2") ||
         !strcmp(kname, "python3")))
        kopts.extra_args = hist_args;
    kb_kernel_t *k = kb_kernel_start(&kopts, err);
    if (!k && warm && o->warm == AG_WARM_AUTO) {
        /* The failed start destroyed the warm launcher (and the server
         * removes its box): a cold kernel, as with no server at all. */
        log_warn("the warm kernel from 'jupyter-agent serve' did not start "
                 "(%s); starting a cold one",
                 err ? err->text : "no reason given");
        warm = NULL;
        kopts.launcher = s_sandbox_factory;
        kopts.launcher_arg = &fa;
        kopts.startup_timeout_ms = s_startup_timeout_ms();
        k = kb_kernel_start(&kopts, err);
    }
    if (!k) {
        s_hint_limits(o, err);
        pk_trust_destroy(&trust);
        json_decref(inputs);
        ag_audit_destroy(&fa.audit);
        return NULL;
    }
    ag_session_t *s = xcalloc(1, sizeof *s);
    s->audit = fa.audit;
    s->kernel = k;
    s->inputs = inputs;
    s->sandboxed = !o->no_sandbox;
    s->keep_workspace = s->sandboxed && o->policy.keep_workspace_dir;
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
    if (ag_session_audit_begin(s, o, err) ||
        (o->ninstalls && s_install(s, o, err))) {
        ag_session_destroy(&s);
        return NULL;
    }
    ag_session_outputs_begin(s, o);
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

static void
s_destroy(ag_session_t **ps, bool hand_off, const char *status)
{
    if (!ps || !*ps)
        return;
    ag_session_t *s = *ps;
    sb_sandbox_t *box = s->sandboxed ? ag_session_sandbox(s) : NULL;
    char *audit = box ? sb_sandbox_seccomp_audit_report(box) : NULL;
    if (audit) /* --seccomp-audit: what the allow list lacked */
        log_warn("%s", audit);
    free(audit);
    if (hand_off)
        kb_kernel_hand_off(&s->kernel);
    else
        kb_kernel_destroy(&s->kernel);
    err_t e = {0};
    if (ag_audit_end(s->audit, status, &e))
        log_warn("--audit: %s", e.text);
    ag_audit_destroy(&s->audit);
    json_decref(s->policy);
    json_decref(s->packages);
    json_decref(s->inputs);
    pk_trust_destroy(&s->trust);
    free(s->packages_dir);
    free(s->warnings);
    free(s->kernel_name);
    free(s);
    *ps = NULL;
}

void
ag_session_destroy(ag_session_t **ps)
{
    s_destroy(ps, false, "ok");
}

void
ag_session_hand_off(ag_session_t **ps)
{
    s_destroy(ps, true, "ok");
}

int
ag_session_end(ag_session_t **ps, err_t *err)
{
    int rc = 0;
    if (ps && *ps && (*ps)->keep_workspace &&
        kb_kernel_finish((*ps)->kernel, err) < 0) {
        if (err && err->code != ERR_USAGE)
            err->code = ERR_IO;
        rc = -1;
    }
    s_destroy(ps, true, rc ? "--keep-workspace copy failed" : "ok");
    return rc;
}

json_t *
ag_session_inputs_json(ag_session_t *s)
{
    return s->inputs ? json_incref(s->inputs) : json_array();
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

void
ag_session_record_kernel(ag_session_t *s, nb_record_t *rec)
{
    kb_kernel_t *k = ag_session_kernel(s);
    const kb_kernelspec_t *spec = kb_kernel_spec(k);
    const char *name = spec             ? spec->name
                       : s->kernel_name ? s->kernel_name
                                        : "python3";
    const char *display = spec && spec->display_name[0]
                              ? spec->display_name
                              : "Python 3 (ipykernel)";
    json_t *info = kb_kernel_info(k);
    if (info)
        nb_record_set_kernel(rec, info, name, display);
}

const char *
ag_session_warnings(ag_session_t *s)
{
    return s->warnings ? s->warnings : "";
}

sb_sandbox_t *
ag_session_sandbox(ag_session_t *s)
{
    kb_launcher_t *l = kb_kernel_launcher(s->kernel);
    sb_sandbox_t *box = kb_launcher_sandbox_box(l);
    return box ? box : kb_launcher_warm_box(l);
}

struct sb_proc_engine *
ag_session_proc_engine(ag_session_t *s, err_t *err)
{
    sb_sandbox_t *box = ag_session_sandbox(s);
    if (box)
        return sb_sandbox_proc_engine(box, err);
    kb_launcher_t *l = kb_kernel_launcher(s->kernel);
    if (kb_serve_launcher_workspace(l))
        return kb_serve_launcher_proc_engine(l, err);
    err_set(err, ERR_SANDBOX,
            "commands run in the kernel's own sandbox, and this kernel has "
            "none here (--no-sandbox, a --gateway or an attached kernel)");
    return NULL;
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

audit_log_t *
ag_session_audit(ag_session_t *s)
{
    return ag_audit_log(s->audit);
}

const char *
ag_session_audit_id(ag_session_t *s)
{
    return ag_audit_id(s->audit);
}

int
ag_session_audit_file(ag_session_t *s, const char *dir, const char *via,
                      const char *name, const char *path, uint64_t size,
                      const char *sha256, err_t *err)
{
    if (!s || !ag_audit_log(s->audit))
        return 0;
    char hex[NB_SHA256_HEX];
    if (!sha256 && path && nb_sha256_file(path, hex, &size, err) == 0)
        sha256 = hex;
    return ag_audit_file(s->audit, dir, via, name, path, size, sha256, err);
}

int
ag_session_audit_fd(ag_session_t *s, const char *dir, const char *via,
                    const char *name, int fd, err_t *err)
{
    return s ? ag_audit_file_fd(s->audit, dir, via, name, NULL, fd, err) : 0;
}

void
ag_session_audit_out_opts(ag_session_t *s, sb_files_out_opts_t *oo)
{
    if (s && ag_audit_log(s->audit)) {
        oo->on_file = ag_audit_file_out;
        oo->on_file_arg = s->audit;
    }
}

void
ag_session_audit_cmds(ag_session_t *s, struct sb_cmds_limits *lim)
{
    ag_audit_cmds(s->audit, lim);
}

void
ag_session_record_packages(ag_session_t *s, json_t *report)
{
    err_t e = {0};
    if (ag_audit_packages(s->audit, report, &e))
        log_warn("--audit: %s", e.text);
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
    const char *url = kb_kernel_gateway_url(s->kernel);
    if (url)
        return json_pack("{s:b, s:{s:s, s:s}}", "sandboxed", 0, "gateway",
                         "url", url, "kernel_id",
                         kb_kernel_remote_id(s->kernel));
    if (s->policy && s->packages)
        return json_pack("{s:b, s:O, s:O}", "sandboxed", 1, "limits", s->policy,
                         "packages", s->packages);
    if (s->policy)
        return json_pack("{s:b, s:O}", "sandboxed", 1, "limits", s->policy);
    return json_pack("{s:b, s:b}", "sandboxed", 0, "attached", s->attached);
}
