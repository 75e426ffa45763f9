/*
 * jupyter-agent archive rerun: unpack a signed report archive into a new
 * sandbox with the policy it recorded (within the caller's ceiling), run
 * every cell again and compare the outputs with the recorded ones.
 */
#include "agent/cli/ag_interrupt.h"
#include "agent/cli/cmd_archive_impl.h"
#include "agent/session/ag_envlock.h"
#include "agent/session/ag_session.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/escape.h"
#include "common/fileio.h"
#include "common/xalloc.h"
#include "notebook-io/nb_compare.h"
#include "notebook-io/nb_run.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- rerun -------------------------------------------------------------- */

static int
s_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* A recorded limit, the field it sets and the policy flag whose setter
 * checks it. */
typedef struct recorded_limit {
    const char *key;  /* in environment.json's sandbox limits */
    const char *flag; /* the policy flag, or NULL: none (swap) */
    enum { LIM_U64, LIM_UINT, LIM_CPUS } type;
    size_t off; /* of the field in sb_policy_t */
} recorded_limit_t;

#define LIMIT(key, flag, type, field)                                          \
    {                                                                          \
        key, flag, type, offsetof(sb_policy_t, field)                          \
    }
static const recorded_limit_t s_limits[] = {
    LIMIT("memory_bytes", "memory", LIM_U64, memory_bytes),
    LIMIT("swap_bytes", NULL, LIM_U64, swap_bytes),
    LIMIT("pids", "pids", LIM_UINT, pids),
    LIMIT("cpus", "cpus", LIM_CPUS, cpus),
    LIMIT("workspace_bytes", "disk", LIM_U64, workspace_bytes),
    LIMIT("tmp_bytes", "tmp", LIM_U64, tmp_bytes),
    LIMIT("shm_bytes", "shm", LIM_U64, shm_bytes),
    LIMIT("nofile", "nofile", LIM_U64, nofile),
};
#undef LIMIT

/* Limit `l` of `p`, as a double for comparing and printing. */
static double
s_limit_get(const sb_policy_t *p, const recorded_limit_t *l)
{
    const char *f = (const char *)p + l->off;
    switch (l->type) {
    case LIM_U64:
        return (double)*(const uint64_t *)(const void *)f;
    case LIM_UINT:
        return *(const unsigned *)(const void *)f;
    default:
        return *(const double *)(const void *)f;
    }
}

/* Copy limit `l` from `src` into `dst`. */
static void
s_limit_copy(sb_policy_t *dst, const sb_policy_t *src,
             const recorded_limit_t *l)
{
    size_t n = l->type == LIM_U64    ? sizeof(uint64_t)
               : l->type == LIM_UINT ? sizeof(unsigned)
                                     : sizeof(double);
    memcpy((char *)dst + l->off, (const char *)src + l->off, n);
}

/* The recorded numeric limits (binds and network are not replayed), each
 * checked by the setter of its flag as if typed on the command line, and
 * none above the operator's own (`p` on entry: the flags given to rerun,
 * or the defaults), which a recorded limit can only lower. A limit the
 * flag would refuse refuses the archive (ERR_VERIFY); one above the
 * operator's is replaced by the operator's, with a line in `notes`. */
static int
s_apply_policy(sb_policy_t *p, const json_t *j, buf_t *notes, err_t *err)
{
    if (json_is_object(json_object_get(j, "limits")))
        j = json_object_get(j, "limits"); /* ask's {"limits", "sandboxed"} */
    int rc = 0;
    for (size_t i = 0; i < sizeof s_limits / sizeof *s_limits && !rc; i++) {
        const recorded_limit_t *l = &s_limits[i];
        json_t *v = json_object_get(j, l->key);
        if (!v)
            continue;
        bool real = l->type == LIM_CPUS;
        if (real ? !json_is_number(v) : !json_is_integer(v)) {
            rc = err_set(err, ERR_VERIFY,
                         "the archive's sandbox limit %s is not a %s; "
                         "refused (nothing was run)",
                         l->key, real ? "number" : "whole number");
            break;
        }
        char text[64];
        if (real)
            snprintf(text, sizeof text, "%.17g", json_number_value(v));
        else
            snprintf(text, sizeof text, "%lld",
                     (long long)json_integer_value(v));
        sb_policy_t rec;
        sb_policy_copy(&rec, p);
        err_t ferr = {0};
        if (l->flag) {
            char *flag = xasprintf("--%s", l->flag);
            int used = sb_policy_parse_flag(&rec, flag, text, &ferr);
            free(flag);
            if (used < 0)
                rc = err_set(err, ERR_VERIFY,
                             "the archive records %s %s, which this machine "
                             "refuses (%s); refused (nothing was run)",
                             l->key, text, ferr.text);
        } else if (json_integer_value(v) < 0) {
            rc = err_set(err, ERR_VERIFY,
                         "the archive records %s %s, below 0; refused "
                         "(nothing was run)",
                         l->key, text);
        } else {
            rec.swap_bytes = (uint64_t)json_integer_value(v);
        }
        if (!rc && s_limit_get(&rec, l) > s_limit_get(p, l))
            buf_printf(notes,
                       "jupyter-agent archive: note: the archive records %s "
                       "%s, above this machine's %.17g (%s%s or the "
                       "default); re-running with %.17g\n",
                       l->key, text, s_limit_get(p, l), l->flag ? "--" : "",
                       l->flag ? l->flag : "no flag", s_limit_get(p, l));
        else if (!rc)
            s_limit_copy(p, &rec, l);
        sb_policy_release(&rec);
    }
    /* The engine the archive ran under, unless rerun's own --engine says
     * otherwise: a gVisor session is re-run under gVisor. */
    json_t *eng = json_object_get(j, "engine");
    if (!rc && eng && !sb_policy_flag_given(p, "engine")) {
        const char *name = json_string_value(eng);
        if (!name || sb_engine_parse(name, &p->engine, NULL) < 0)
            rc = err_set(err, ERR_VERIFY,
                         "the archive records sandbox engine '%.40s', which "
                         "this build does not know; refused (nothing was "
                         "run); give --engine to choose one",
                         name ? name : "(not a string)");
    }
    return rc;
}

int
cmd_archive_rerun(const archive_args_t *a, err_t *err)
{
    int rc = -1;
    ag_archive_t *ar = NULL;
    ag_session_t *session = NULL;
    nb_notebook_t *nb = NULL;
    json_t *now = NULL;
    if (a->out && strcmp(a->out, "-") == 0)
        return err_set(err, ERR_USAGE,
                       "-o -: rerun prints its comparison on standard output; "
                       "name a file for the re-run notebook");
    if (a->out && file_check_output(a->out, "-o", err))
        return -1;
    ag_session_opts_t so;
    ag_session_opts_init(&so);
    const char *tmpbase = getenv("TMPDIR");
    char *dir = xasprintf("%s/jupyter-agent-rerun-XXXXXX",
                          tmpbase && *tmpbase ? tmpbase : "/tmp");
    if (!mkdtemp(dir)) {
        err_errno(err, ERR_IO, "cannot make a directory for the archive");
        free(dir);
        dir = NULL;
        goto out;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        err_errno(err, ERR_IO, "cannot open %s", dir);
        goto out;
    }
    ar = cmd_archive_open(a, dfd, err);
    close(dfd);
    if (!ar)
        goto out;
    char *who = cmd_archive_signer(ar), *target = esc_dup(a->target, ESC_NAME);
    fprintf(stderr,
            "jupyter-agent archive: %s verified (%zu files; signed by "
            "%s)\n",
            target, ar->files->nfiles, who);
    free(who);
    free(target);

    so.kernel_name = json_string_value(json_object_get(
        json_object_get(nb_notebook_metadata(ar->nb), "kernelspec"), "name"));
    so.timeout_ms = a->timeout_ms;
    so.warm = AG_WARM_COLD;
    sb_policy_release(&so.policy);
    sb_policy_copy(&so.policy, &a->policy);
    buf_t notes;
    buf_init(&notes, 0);
    int prc = s_apply_policy(
        &so.policy, json_object_get(ar->environment, "sandbox"), &notes, err);
    fputs(buf_cstr(&notes), stderr);
    buf_release(&notes);
    if (prc)
        goto out;
    for (size_t i = 0; i < ar->files->nfiles; i++) {
        const char *name = ar->files->files[i].name;
        if (strncmp(name, "inputs/", 7) != 0)
            continue;
        char *spec = xasprintf("%s/%s:%s", dir, name, name + 7);
        int r = ag_session_parse_flag(&so, "--file", spec, err);
        free(spec);
        if (r < 0)
            goto out;
    }
    ag_interrupt_install();
    if (!(session = ag_session_start(&so, err)))
        goto out;
    ag_session_print_warnings(session, stderr);

    json_t *lock = json_object_get(ar->environment, "python");
    if (json_is_object(lock)) {
        err_t perr = {0};
        now = ag_envlock_now(ag_session_kernel(session), lock, PROBE_TIMEOUT_MS,
                             &perr);
        char *diff = now ? ag_envlock_diff(lock, now) : NULL;
        if (diff && *diff) {
            fprintf(stderr,
                    "jupyter-agent archive: warning: the environment differs "
                    "from the archive's lock; outputs may differ:\n");
            cmd_archive_put_lines(stderr, "", diff);
        } else if (!now) {
            cmd_archive_put_lines(
                stderr,
                "jupyter-agent archive: warning: could not compare "
                "the environment: ",
                perr.text);
        }
        free(diff);
    }

    const nb_archive_file_t *f =
        nb_archive_find(ar->files, AG_ARCHIVE_NOTEBOOK);
    if (!(nb =
              nb_notebook_read_mem(f->data, f->size, AG_ARCHIVE_NOTEBOOK, err)))
        goto out;
    nb_run_opts_t ro;
    nb_run_opts_init(&ro);
    ro.timeout_ms = a->timeout_ms;
    ro.allow_errors = true;   /* recorded errors are outputs to reproduce */
    ro.replay_session = true; /* resets and per-call limits, as recorded */
    ro.max_output_bytes = so.max_output_bytes;
    ro.hooks.should_stop = ag_interrupt_should_stop;
    nb_run_result_t res;
    err_t rerr = {0};
    nb_run_notebook(nb, ag_session_kernel(session), &ro, &res, &rerr);
    if (a->out && nb_notebook_write_file(nb, a->out, err))
        goto out;
    if (res.code == ERR_INTERRUPTED) {
        err_set(err, ERR_INTERRUPTED, "interrupted%s%s",
                a->out ? "; wrote " : "", a->out ? a->out : "");
        goto out;
    }

    nb_compare_opts_t co = {.image_tolerance_pct = a->tolerance};
    nb_compare_result_t cmp;
    nb_compare_notebooks(ar->nb, nb, &co, &cmp);
    printf("%zu of %zu cells reproduced\n", cmp.reproduced, cmp.compared);
    size_t i;
    json_t *d;
    json_array_foreach(cmp.diffs, i, d)
    {
        /* The diff quotes recorded outputs: escaped line by line. */
        char *id = esc_dup(json_string_value(json_object_get(d, "id"))
                               ? json_string_value(json_object_get(d, "id"))
                               : "?",
                           ESC_NAME);
        printf("cell %lld (id %s): ",
               (long long)json_integer_value(json_object_get(d, "cell")), id);
        free(id);
        const char *diff = json_string_value(json_object_get(d, "diff"));
        cmd_archive_put_lines(stdout, "", diff ? diff : "?");
    }
    if (res.code && res.code != ERR_USER_CODE)
        cmd_archive_put_lines(stdout, "the re-run stopped early: ", rerr.text);
    if (a->out)
        fprintf(stderr, "jupyter-agent archive: wrote %s\n", a->out);
    rc = cmp.reproduced == cmp.compared ? 0 : 1;
    if (rc)
        err_set(err, ERR_DIFFERS, "%zu of %zu cells did not reproduce",
                cmp.compared - cmp.reproduced, cmp.compared);
    nb_compare_result_release(&cmp);
    rc = rc ? -1 : 0;
out:
    ag_session_destroy(&session);
    ag_session_opts_release(&so);
    nb_notebook_destroy(&nb);
    json_decref(now);
    cmd_archive_close(&ar);
    if (dir) {
        nftw(dir, s_rm_one, 16, FTW_DEPTH | FTW_PHYS);
        free(dir);
    }
    return rc;
}
