#include "packages/pk_install.h"

#include "common/buf.h"
#include "common/strv.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_kernel.h"
#include "packages/pk_manifest.h"
#include "packages/pk_pyreq.h"
#include "packages/pk_pysrc.h"
#include "packages/pk_wheel.h"
#include "sandbox/sb_files.h"
#include "sandbox/sb_sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_RELEASES 4096 /* chosen releases per install */
#define MARK "\x1ejupyter-agent-packages "
#define ENV_TIMEOUT_MS 30000
#define ABORT_RETRIES 20
#define ABORT_RETRY_US 100000

/* One release chosen for installation. */
typedef struct release {
    char *name;          /* normalized project name, owned */
    const char *version; /* borrowed from the manifest */
    char *required_by; /* owned "name version" of who needs it; NULL if asked */
} release_t;

/* The resolver's state for one install. */
typedef struct resolver {
    const pk_manifest_t *m; /* verified manifest, borrowed */
    kb_kernel_t *kernel;    /* where marker variables come from, borrowed */
    json_t *env;            /* marker variables, owned; NULL until needed */
    release_t *rel;         /* chosen releases, owned */
    size_t n;               /* how many */
} resolver_t;

/* --- running code in the kernel ------------------------------------------- */

/* Run `code` silently (no history, no execute_result), collect stdout and
 * return the JSON after MARK on its last marked line (new reference). */
static json_t *
s_kernel_call(kb_kernel_t *k, const char *code, int timeout_ms,
              const char *what, err_t *err)
{
    kb_exec_opts_t xo;
    kb_exec_opts_init(&xo);
    xo.silent = true;
    xo.store_history = false;
    xo.allow_stdin = false;
    xo.stop_on_error = false;
    kb_output_t *out = NULL;
    json_t *result = NULL;
    buf_t text;
    buf_init(&text, 0);
    /* ipykernel aborts requests that arrive just after a cell raised
     * (stop_on_error); ours may be one of them, so ask again. */
    for (int attempt = 0; attempt < ABORT_RETRIES; attempt++) {
        kb_output_destroy(&out);
        out = kb_output_new(NULL, 1 << 20);
        kb_output_merge_streams(out, true); /* read as text, whole */
        if (kb_kernel_execute(k, code, &xo, timeout_ms, out, NULL, err)) {
            err_prefix(err, "%s", what);
            goto out;
        }
        const char *status = kb_output_status(out);
        if (!status || strcmp(status, "aborted") != 0)
            break;
        usleep(ABORT_RETRY_US);
    }
    size_t i;
    json_t *o;
    json_array_foreach(kb_output_outputs(out), i, o)
    {
        const char *type = json_string_value(json_object_get(o, "output_type"));
        const char *name = json_string_value(json_object_get(o, "name"));
        if (type && strcmp(type, "error") == 0) {
            err_set(err, ERR_KERNEL, "%s: the kernel raised %s: %s", what,
                    json_string_value(json_object_get(o, "ename")),
                    json_string_value(json_object_get(o, "evalue")));
            goto out;
        }
        if (type && strcmp(type, "stream") == 0 && name &&
            strcmp(name, "stdout") == 0)
            buf_puts(&text, json_string_value(json_object_get(o, "text")));
    }
    const char *all = buf_cstr(&text);
    const char *mark = NULL;
    for (const char *p = strstr(all, MARK); p; p = strstr(p + 1, MARK))
        mark = p;
    if (!mark) {
        err_set(err, ERR_KERNEL, "%s: the kernel printed no result (status %s)",
                what, kb_output_status(out) ? kb_output_status(out) : "none");
        goto out;
    }
    mark += strlen(MARK);
    result = json_loadb(mark, strcspn(mark, "\n"), 0, NULL);
    if (!json_is_object(result)) {
        json_decref(result);
        result = NULL;
        err_set(err, ERR_KERNEL, "%s: the kernel printed a malformed result",
                what);
    }
out:
    buf_release(&text);
    kb_output_destroy(&out);
    return result;
}

/* A Python string literal for `s` (a JSON string is one, ASCII-escaped). */
static char *
s_pystr(const char *s)
{
    json_t *j = json_string(s);
    char *lit = json_dumps(j, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
    json_decref(j);
    return lit;
}

/* Wrap `body` so it runs in a private namespace of its own, leaving the
 * user's variables untouched. New string. */
static char *
s_private(const char *body)
{
    char *lit = s_pystr(body);
    char *code =
        xasprintf("exec(%s, {'__name__': '__jupyter_agent__'})\n", lit);
    free(lit);
    return code;
}

static const json_t *
s_marker_env(resolver_t *r, err_t *err)
{
    if (r->env)
        return r->env;
    char *mark = s_pystr(MARK);
    char *body = xasprintf("%s\n_ja_marker_env(%s)\n", pk_install_env_py, mark);
    char *code = s_private(body);
    r->env = s_kernel_call(r->kernel, code, ENV_TIMEOUT_MS,
                           "reading the kernel's Python environment", err);
    free(mark);
    free(body);
    free(code);
    return r->env;
}

/* --- resolving from the manifest
 * ---------------------------------------------- */

static release_t *
s_find(resolver_t *r, const char *norm)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->rel[i].name, norm) == 0)
            return &r->rel[i];
    return NULL;
}

static void
s_choose(resolver_t *r, const char *norm, const char *version,
         const char *required_by)
{
    r->rel = xrealloc(r->rel, (r->n + 1) * sizeof *r->rel);
    r->rel[r->n++] =
        (release_t){.name = xstrdup(norm),
                    .version = version,
                    .required_by = required_by ? xstrdup(required_by) : NULL};
}

/* The first manifest entry of release `rel` (its METADATA speaks for all
 * of that release's wheels). */
static const pk_manifest_entry_t *
s_first_entry(const pk_manifest_t *m, const release_t *rel)
{
    for (size_t i = 0; i < pk_manifest_count(m); i++) {
        const pk_manifest_entry_t *e = pk_manifest_entry(m, i);
        if (strcmp(e->name, rel->name) == 0 &&
            strcasecmp(e->version, rel->version) == 0)
            return e;
    }
    return NULL;
}

/* Follow release i's Requires-Dist into the manifest. */
static int
s_follow(resolver_t *r, size_t i, err_t *err)
{
    const pk_manifest_entry_t *e = s_first_entry(r->m, &r->rel[i]);
    const char *dir = pk_manifest_dir(r->m);
    /* "{dist}-{version}" is the wheel file name up to its second '-'. */
    const char *dash = strchr(e->filename, '-');
    dash = dash ? strchr(dash + 1, '-') : NULL;
    char *prefix = xstrndup(e->filename, dash ? (size_t)(dash - e->filename)
                                              : strlen(e->filename));
    size_t mlen = 0;
    char *meta =
        pk_wheel_metadata_fd(e->fd, e->size, prefix, e->filename, &mlen, err);
    free(prefix);
    if (!meta)
        return -1;
    char **reqs = pk_wheel_requires_dist(meta);
    free(meta);
    char *who = xasprintf("%s %s", r->rel[i].name, r->rel[i].version);
    int rc = -1;
    for (char **q = reqs; *q; q++) {
        pk_pyreq_t req;
        if (pk_pyreq_parse(*q, &req, err)) {
            err_prefix(err, "%s (%s): Requires-Dist", e->filename, who);
            goto out;
        }
        bool needed = true;
        if (req.marker) {
            const json_t *env = s_marker_env(r, err);
            if (!env) {
                pk_pyreq_release(&req);
                goto out;
            }
            /* A marker we cannot evaluate counts as true: better a clear
             * refusal naming the dependency than a silent gap. */
            if (pk_pyreq_marker_eval(req.marker, env, NULL, &needed, NULL))
                needed = true;
        }
        if (!needed) {
            pk_pyreq_release(&req);
            continue;
        }
        char *norm = pk_manifest_normalize_name(req.name);
        const char *spec = req.specifier[0] ? req.specifier : NULL;
        release_t *have = s_find(r, norm);
        bool listed = false, failed = true;
        const char *best = NULL;
        char *avail = NULL;
        if (have) {
            if (!spec || pk_pyreq_spec_match(spec, have->version, NULL) == 1)
                failed = false;
            else
                err_set(err, ERR_USAGE,
                        "conflict: %s requires %s%s, but %s %s is being "
                        "installed%s%s%s",
                        who, norm, spec, have->name, have->version,
                        have->required_by ? " (for " : " (requested)",
                        have->required_by ? have->required_by : "",
                        have->required_by ? ")" : "");
        } else if ((best = pk_manifest_best(r->m, norm, spec, &listed))) {
            if (r->n < MAX_RELEASES) {
                s_choose(r, norm, best, who);
                failed = false;
            } else {
                err_set(err, ERR_USAGE, "more than %d packages to install",
                        MAX_RELEASES);
            }
        } else if (listed) {
            avail = pk_manifest_available(r->m, norm);
            err_set(err, ERR_USAGE,
                    "%s requires %s%s, but the signed manifest of %s has "
                    "only %s; add a matching wheel and sign again",
                    who, norm, spec ? spec : "", dir, avail);
        } else {
            avail = pk_manifest_available(r->m, NULL);
            err_set(err, ERR_USAGE,
                    "%s requires %s%s, which is not in the signed manifest "
                    "of %s (there is no network: every dependency must be "
                    "in it); add its wheel and sign again. available: %s",
                    who, norm, spec ? spec : "", dir, avail);
        }
        free(avail);
        free(norm);
        pk_pyreq_release(&req);
        if (failed)
            goto out;
    }
    rc = 0;
out:
    free(who);
    strv_free(reqs);
    return rc;
}

/* Requested names first (pins before bare names), then their dependencies
 * breadth-first. */
static int
s_resolve(resolver_t *r, const char *const *reqs, size_t n, err_t *err)
{
    const pk_manifest_entry_t *sel[64];
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            bool pinned = strstr(reqs[i], "==") != NULL;
            if (pinned != (pass == 0))
                continue;
            int found = pk_manifest_resolve(r->m, reqs[i], sel, 64, err);
            if (found < 0)
                return -1;
            const char *norm = sel[0]->name;
            const char *best = NULL;
            for (int j = 0; j < found && j < 64; j++)
                if (!best || pk_pyver_cmp(sel[j]->version, best, NULL) > 0)
                    best = sel[j]->version;
            release_t *have = s_find(r, norm);
            if (have && strcasecmp(have->version, best) != 0)
                return err_set(err, ERR_USAGE,
                               "conflict: %s asked for as both %s and %s", norm,
                               have->version, best);
            if (!have)
                s_choose(r, norm, best, NULL);
        }
    }
    for (size_t i = 0; i < r->n; i++)
        if (s_follow(r, i, err))
            return -1;
    return 0;
}

static void
s_resolver_release(resolver_t *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->rel[i].name);
        free(r->rel[i].required_by);
    }
    free(r->rel);
    json_decref(r->env);
}

/* --- install ---------------------------------------------------------------
 */

/* pip's "ERROR: ..." lines (with their indented continuations), or the
 * tail of its stderr. New string. */
static char *
s_pip_errors(const char *stderr_text)
{
    buf_t b;
    buf_init(&b, 2048);
    bool in_error = false;
    const char *p = stderr_text;
    while (*p) {
        size_t l = strcspn(p, "\n");
        if (strncmp(p, "ERROR:", 6) == 0)
            in_error = true;
        else if (!(l && (p[0] == ' ' || p[0] == '\t')))
            in_error = false;
        if (in_error && l) {
            buf_append(&b, p, l);
            buf_puts(&b, " ");
        }
        p += l;
        if (*p)
            p++;
    }
    if (b.len == 0) {
        size_t n = strlen(stderr_text);
        buf_puts(&b, n > 600 ? stderr_text + n - 600 : stderr_text);
    }
    return buf_detach(&b, NULL);
}

static json_t *
s_report(const pk_manifest_t *m, const resolver_t *r, const char *const *reqs,
         size_t n)
{
    const pk_pubkey_t *key = pk_manifest_signed_by(m);
    json_t *requested = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(requested, json_string(reqs[i]));
    json_t *installed = json_array();
    for (size_t i = 0; i < r->n; i++) {
        json_t *files = json_array();
        for (size_t j = 0; j < pk_manifest_count(m); j++) {
            const pk_manifest_entry_t *e = pk_manifest_entry(m, j);
            if (strcmp(e->name, r->rel[i].name) == 0 &&
                strcasecmp(e->version, r->rel[i].version) == 0)
                json_array_append_new(files, json_pack("{s:s, s:s}", "filename",
                                                       e->filename, "sha256",
                                                       e->sha256));
        }
        json_array_append_new(installed,
                              json_pack("{s:s, s:s, s:o, s:s?}", "name",
                                        r->rel[i].name, "version",
                                        r->rel[i].version, "files", files,
                                        "required_by", r->rel[i].required_by));
    }
    return json_pack(
        "{s:s, s:s, s:s, s:s, s:o, s:o}", "dir", pk_manifest_dir(m), "signer",
        key ? key->id : "", "signer_label", key ? key->label : "", "target",
        PK_INSTALL_TARGET, "requested", requested, "installed", installed);
}

int
pk_install(kb_kernel_t *kernel, const char *dir, const pk_trust_t *trust,
           const char *const *requirements, size_t n, json_t **report_out,
           err_t *err)
{
    pk_manifest_t *m = NULL;
    resolver_t r = {0};
    const pk_manifest_entry_t **entries = NULL;
    char *copy_dir = NULL, *reqtxt = NULL, *code = NULL, *body = NULL;
    char *lit[4] = {NULL, NULL, NULL, NULL};
    json_t *result = NULL;
    int dfd = -1, rc = -1;
    if (report_out)
        *report_out = NULL;

    /* Any sandbox launcher (cold, warm, or a serve pool's): its run dir is
     * bind-mounted at the same path inside the box. */
    kb_launcher_t *launcher = kb_kernel_launcher(kernel);
    if (!launcher || strcmp(kb_kernel_launcher_name(kernel), "sandbox") != 0) {
        err_set(err, ERR_USAGE,
                "packages install only into a sandboxed kernel (not with "
                "--no-sandbox or --existing)");
        goto out;
    }
    if (n == 0) {
        err_set(err, ERR_USAGE, "no package names to install");
        goto out;
    }
    m = pk_manifest_load_verified(dir, trust, err);
    if (!m)
        goto out;
    r.m = m;
    r.kernel = kernel;
    if (s_resolve(&r, requirements, n, err))
        goto out;

    /* Copy the verified bytes of every wheel of the chosen releases. */
    copy_dir =
        xasprintf("%s/wheels-XXXXXX", launcher->ops->run_dir(launcher->self));
    if (!mkdtemp(copy_dir)) {
        err_errno(err, ERR_IO, "creating %s", copy_dir);
        free(copy_dir);
        copy_dir = NULL;
        goto out;
    }
    dfd = open(copy_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fchmod(dfd, 0755)) {
        err_errno(err, ERR_IO, "opening %s", copy_dir);
        goto out;
    }
    size_t ne = 0;
    entries = xcalloc(pk_manifest_count(m) + 1, sizeof *entries);
    for (size_t i = 0; i < r.n; i++)
        for (size_t j = 0; j < pk_manifest_count(m); j++) {
            const pk_manifest_entry_t *e = pk_manifest_entry(m, j);
            if (strcmp(e->name, r.rel[i].name) != 0 ||
                strcasecmp(e->version, r.rel[i].version) != 0)
                continue;
            if (pk_manifest_entry_copy(e, dfd, err))
                goto out;
            entries[ne++] = e;
        }
    reqtxt = pk_manifest_requirements_txt(entries, ne);

    /* pip inside the sandbox, from the kernel's own Python. */
    lit[0] = s_pystr(reqtxt);
    lit[1] = s_pystr(copy_dir);
    lit[2] = s_pystr(PK_INSTALL_TARGET);
    lit[3] = s_pystr(MARK);
    body = xasprintf("%s\n_ja_install(%s, %s, %s, %s)\n", pk_install_pip_py,
                     lit[0], lit[1], lit[2], lit[3]);
    code = s_private(body);
    result = s_kernel_call(r.kernel, code, PK_INSTALL_TIMEOUT_MS,
                           "installing packages", err);
    if (!result)
        goto out;
    json_int_t pip_rc = json_integer_value(json_object_get(result, "rc"));
    if (pip_rc != 0) {
        const char *se = json_string_value(json_object_get(result, "stderr"));
        char *why = s_pip_errors(se ? se : "");
        err_set(err, ERR_USAGE, "pip refused to install from %s (exit %d): %s",
                dir, (int)pip_rc, why);
        free(why);
        goto out;
    }
    json_t *report = s_report(m, &r, requirements, n);
    json_object_set(report, "pip_output", json_object_get(result, "stdout"));
    if (report_out)
        *report_out = report;
    else
        json_decref(report);
    rc = 0;
out:
    if (dfd >= 0)
        close(dfd);
    if (copy_dir)
        sb_files_remove_tree(copy_dir);
    for (size_t i = 0; i < 4; i++)
        free(lit[i]);
    free(copy_dir);
    free(reqtxt);
    free(body);
    free(code);
    free(entries);
    json_decref(result);
    s_resolver_release(&r);
    pk_manifest_destroy(&m);
    return rc;
}

int
pk_install_precheck(const char *dir, const pk_trust_t *trust,
                    const char *const *requirements, size_t n, err_t *err)
{
    pk_manifest_t *m = pk_manifest_load_signed(dir, trust, err);
    if (!m)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (pk_manifest_resolve(m, requirements[i], NULL, 0, err) < 0)
            rc = -1;
    pk_manifest_destroy(&m);
    return rc;
}

char *
pk_install_summary(const json_t *report)
{
    buf_t b;
    buf_init(&b, 0);
    buf_puts(&b, "installed ");
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(report, "installed"), i, p)
    {
        const char *by = json_string_value(json_object_get(p, "required_by"));
        buf_printf(&b, "%s%s %s", i ? ", " : "",
                   json_string_value(json_object_get(p, "name")),
                   json_string_value(json_object_get(p, "version")));
        if (by)
            buf_printf(&b, " (for %s)", by);
    }
    const char *label =
        json_string_value(json_object_get(report, "signer_label"));
    buf_printf(&b, " from %s (signed by key %s%s%s) into %s",
               json_string_value(json_object_get(report, "dir")),
               json_string_value(json_object_get(report, "signer")),
               label && *label ? " " : "", label ? label : "",
               json_string_value(json_object_get(report, "target")));
    return buf_detach(&b, NULL);
}
