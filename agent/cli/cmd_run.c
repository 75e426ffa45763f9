/*
 * jupyter-agent run: execute a notebook top to bottom in a fresh sandboxed
 * kernel, storing outputs as nbclient does, with papermill-style
 * parameters, and write the result (always, once the kernel started).
 */
#include "agent/cli/ag_cmd.h"
#include "agent/cli/ag_interrupt.h"
#include "agent/session/ag_archive.h"
#include "agent/session/ag_session.h"
#include "common/cliopt.h"
#include "common/err.h"
#include "common/escape.h"
#include "common/fileio.h"
#include "common/size.h"
#include "common/utf8.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_kernel.h"
#include "kernel-bridge/kb_kernelspec.h"
#include "notebook-io/nb_notebook.h"
#include "notebook-io/nb_run.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char s_usage[] =
    "usage: jupyter-agent run NOTEBOOK.ipynb [options]\n"
    "\n"
    "Execute every code cell of a notebook, in order, in a fresh sandboxed\n"
    "kernel, and write the notebook with its outputs (as nbclient and\n"
    "papermill store them) to NOTEBOOK.out.ipynb or -o OUT.\n"
    "Cells that are empty or tagged skip-execution are not run; a cell\n"
    "tagged raises-exception may raise without stopping the run; a cell\n"
    "over --timeout stops it.\n"
    "\n"
    "options:\n"
    "  -o, --output OUT       where to write (default: NOTEBOOK.out.ipynb);\n"
    "                         '-' is standard output. OUT must be new or a\n"
    "                         regular file (never a device, FIFO or link)\n"
    "      --inplace          write the result over NOTEBOOK itself\n"
    "      --allow-errors     record errors and keep going (exit 0)\n"
    "      --merge-streams    join consecutive same-name stream outputs\n"
    "  -p, --parameters NAME VALUE\n"
    "                         set a parameter, as papermill does: a cell\n"
    "                         tagged injected-parameters is put after the\n"
    "                         cell tagged parameters (or at the top), holding\n"
    "                         '# Parameters' and one 'NAME = VALUE' line "
    "each.\n"
    "                         VALUE becomes True/False/None when written so,\n"
    "                         an int or float when Python's int()/float()\n"
    "                         accept it (e.g. 3, -1_000, 2.5, 1e-3, nan),\n"
    "                         else a str: \"...\" with backslashes, quotes,\n"
    "                         control and non-ASCII characters escaped\n"
    "                         (\\\\ \\\" \\n \\xNN \\uNNNN), so any text "
    "arrives\n"
    "                         exactly. Quote it for the shell: -p name "
    "'O'\\''Brien'.\n"
    "                         Repeat -p for more; the last value of a name "
    "wins.\n"
    "      --max-notebook-size BYTES\n"
    "                         refuse a NOTEBOOK over this (default 256M);\n"
    "                         it must be a regular file\n"
    "      --max-cells N      refuse a NOTEBOOK of more than N cells\n"
    "                         (default 20000), before reading it into memory\n"
    "  -q, --quiet            no progress lines\n";

static const char s_usage_tail[] =
    "\n"
    "The kernel's working directory is /mnt/data: files the notebook reads\n"
    "go in with --file. Progress goes to stderr, one line per cell.\n"
    "The output notebook is written once a cell has run, also after an\n"
    "error, a timeout, the kernel's death or Ctrl-C, with what happened\n"
    "recorded in the cell and under metadata.jupyter_agent.run; code cells\n"
    "after the one where the run stopped are left empty, never stale.\n"
    "\n"
    "exit status: 0 ok, 1 a cell raised (without --allow-errors), 2 usage\n"
    "(bad flags, unreadable notebook, unknown kernel, output not writable),\n"
    "3 the kernel died or failed to start, 4 sandbox failure, 6 a cell timed\n"
    "out, 7 the output could not be written (or --keep-workspace could not\n"
    "copy everything out), 130 interrupted (Ctrl-C)\n";

/* Progress lines on stderr, and the notebook rewritten after each cell. */
typedef struct run_ui {
    nb_notebook_t *nb;    /* borrowed; for the cells' first lines */
    bool tty;             /* stderr is a terminal: redraw the line in place */
    bool quiet;           /* -q */
    const char *out_path; /* borrowed; NULL: -o - (written once, at the end) */
    bool save_failed;     /* a rewrite failed (said once) */
} run_ui_t;

/* Crash safety: after every finished cell the output notebook is replaced
 * atomically (file_write_atomic: a temporary file, fsync, rename, fsync of
 * the directory), so a run killed by SIGKILL or a power cut leaves a valid
 * notebook holding every finished cell, the ones still to run looking
 * never executed (nb_run clears them up front) and metadata.jupyter_agent.
 * run.status "running". A failed rewrite is said once; the run goes on and
 * the final write reports its own failure. */
static void
s_save_progress(run_ui_t *ui, const nb_run_event_t *ev)
{
    if (!ui->out_path || ui->save_failed)
        return;
    json_t *md = nb_notebook_metadata(ui->nb);
    json_t *ja = json_object_get(md, "jupyter_agent");
    if (!json_is_object(ja)) {
        ja = json_object();
        json_object_set_new(md, "jupyter_agent", ja);
    }
    json_object_set_new(ja, "run",
                        json_pack("{s:s, s:I, s:I}", "status", "running",
                                  "cells_executed", (json_int_t)ev->ordinal,
                                  "cells_total", (json_int_t)ev->total));
    err_t err = {0};
    if (nb_notebook_write_file(ui->nb, ui->out_path, &err) < 0) {
        ui->save_failed = true;
        fprintf(stderr,
                "jupyter-agent run: warning: could not save the notebook "
                "after cell %zu (%s); going on, it is written at the end\n",
                ev->cell + 1, err.text);
    }
}

/* The first non-blank line of `src`, cut to fit a progress line. */
static void
s_first_line(const char *src, char *out, size_t size)
{
    const char *p = src ? src : "";
    while (*p == '\n' || *p == ' ' || *p == '\t' || *p == '\r')
        p++;
    size_t n = strcspn(p, "\r\n");
    if (n >= size - 4) {
        n = utf8_char_start(p, size - 4); /* never inside a character */
        snprintf(out, size, "%.*s...", (int)n, p);
    } else {
        snprintf(out, size, "%.*s", (int)n, p);
    }
}

static void
s_on_cell(const nb_run_event_t *ev, void *arg)
{
    run_ui_t *ui = arg;
    if (ev->done)
        s_save_progress(ui, ev);
    if (ui->quiet)
        return;
    char cut[48];
    s_first_line(nb_cell_source(nb_notebook_cell(ui->nb, ev->cell)), cut,
                 sizeof cut);
    /* The notebook's text, on our progress line: escaped. */
    char *line = esc_dup(cut, ESC_KEEP_LINES);
    if (!ev->done) {
        if (ui->tty)
            fprintf(stderr, "\r\033[K[%zu/%zu] cell %zu running  %s",
                    ev->ordinal, ev->total, ev->cell + 1, line);
        free(line);
        return;
    }
    fprintf(stderr, "%s[%zu/%zu] cell %zu %s %.1f s  %s\n",
            ui->tty ? "\r\033[K" : "", ev->ordinal, ev->total, ev->cell + 1,
            ev->status, ev->duration_ms / 1000.0, line);
    free(line);
}

/* Can we write `out` (atomically: a temporary file in its directory, then
 * rename)? Refuses to overwrite `in` unless `inplace`. */
static int
s_check_output(const char *in, const char *out, bool inplace, err_t *err)
{
    struct stat si, so;
    /* Never a device, FIFO, socket, directory or symlink made a file. */
    if (file_check_output(out, "output", err))
        return -1;
    bool exists = stat(out, &so) == 0;
    if (!inplace && exists && stat(in, &si) == 0 && si.st_dev == so.st_dev &&
        si.st_ino == so.st_ino)
        return err_set(err, ERR_USAGE,
                       "output %s is the input notebook; pass --inplace to "
                       "overwrite it, or -o another path",
                       out);
    /* The writer needs a new file next to `out`: try making one. */
    char *copy = xstrdup(out);
    const char *dir = dirname(copy);
    char *probe = xasprintf("%s/.jupyter-agent-run-XXXXXX", dir);
    int rc = 0, fd = mkstemp(probe);
    if (fd < 0) {
        rc = err_set(err, ERR_USAGE,
                     "cannot write %s: cannot create files in %s (%s); "
                     "choose another -o",
                     out, dir, strerror(errno));
    } else {
        close(fd);
        unlink(probe);
    }
    free(probe);
    if (rc == 0 && exists && access(out, W_OK) != 0)
        rc = err_set(err, ERR_USAGE, "cannot write %s: %s; choose another -o",
                     out, strerror(errno));
    free(copy);
    return rc;
}

/* -o -: the notebook on stdout (progress is on stderr). */
static int
s_write_stdout(const nb_notebook_t *nb, err_t *err)
{
    size_t len;
    char *text = nb_notebook_write_mem(nb, &len);
    int bad = !text || fwrite(text, 1, len, stdout) != len || fflush(stdout);
    free(text);
    return bad ? err_errno(err, ERR_IO,
                           "cannot write the notebook to standard "
                           "output")
               : 0;
}

/* --kernel, else metadata.kernelspec.name, else python3. Borrowed. */
static const char *
s_kernel_name(const char *flag, nb_notebook_t *nb)
{
    if (flag)
        return flag;
    const char *name = json_string_value(json_object_get(
        json_object_get(nb_notebook_metadata(nb), "kernelspec"), "name"));
    return name && *name ? name : "python3";
}

/* metadata.jupyter_agent.run, keeping whatever else jupyter_agent holds. */
static void
s_record_run(nb_notebook_t *nb, const nb_run_result_t *res,
             ag_session_t *session, const char *kernel, json_t *params,
             const ag_session_opts_t *sopts, bool allow_errors)
{
    json_t *md = nb_notebook_metadata(nb);
    json_t *ja = json_object_get(md, "jupyter_agent");
    if (!json_is_object(ja)) {
        ja = json_object();
        json_object_set_new(md, "jupyter_agent", ja);
    }
    json_t *run = nb_run_result_json(res);
    json_object_set_new(run, "kernel", json_string(kernel));
    json_object_set_new(run, "sandbox", ag_session_policy_json(session));
    json_object_set_new(run, "parameters",
                        params ? json_incref(params) : json_object());
    json_object_set_new(run, "timeout_s",
                        sopts->timeout_ms > 0
                            ? json_real(sopts->timeout_ms / 1000.0)
                            : json_null());
    json_object_set_new(run, "allow_errors", json_boolean(allow_errors));
    json_object_set_new(ja, "run", run);
    json_object_set_new(ja, "inputs", ag_session_inputs_json(session));
}

/* run's own flags. */
typedef struct run_args {
    const char *out_arg;
    ag_archive_flags_t archive;
    bool inplace, allow_errors, quiet, merge_streams;
    const char **pnames, **pvalues; /* owned arrays of argv words */
    size_t nparams, max_nb_bytes;
    size_t max_cells; /* --max-cells; 0: the default */
} run_args_t;

static int
s_on_opt(void *arg, const ag_cmd_opt_t *o, err_t *err)
{
    run_args_t *a = arg;
    switch (o->opt) {
    case 'o':
        a->out_arg = o->value;
        return 0;
    case 'I':
        a->inplace = true;
        return 0;
    case 'a':
        a->allow_errors = true;
        return 0;
    case 'S':
        a->merge_streams = true;
        return 0;
    case 'p':
        /* -p NAME VALUE: getopt gives NAME; VALUE is the next word,
         * whatever it looks like (it may start with '-'). */
        if (optind >= o->argc)
            return err_set(err, ERR_USAGE, "-p %s needs two words: NAME VALUE",
                           o->value);
        a->pnames = xrealloc(a->pnames, (a->nparams + 1) * sizeof *a->pnames);
        a->pvalues =
            xrealloc(a->pvalues, (a->nparams + 1) * sizeof *a->pvalues);
        a->pnames[a->nparams] = o->value;
        a->pvalues[a->nparams++] = o->argv[optind++];
        return 0;
    case 'N': {
        uint64_t n = 0;
        if (size_parse(o->value, &n) < 0 || n == 0 || n > SIZE_MAX - 1)
            return err_set(err, ERR_USAGE,
                           "--max-notebook-size: '%s' is not a size (e.g. "
                           "512M, 1G)",
                           o->value);
        a->max_nb_bytes = (size_t)n;
        return 0;
    }
    case 'C': {
        char *end = NULL;
        errno = 0;
        unsigned long long n = strtoull(o->value, &end, 10);
        if (errno || !end || *end || o->value[0] == '-' || n == 0 ||
            n > (1ULL << 32))
            return err_set(err, ERR_USAGE,
                           "--max-cells: '%s' is not a number of cells from "
                           "1 to 4294967296",
                           o->value);
        a->max_cells = (size_t)n;
        return 0;
    }
    case 'q':
        a->quiet = true;
        return 0;
    default:
        return 1;
    }
}

int
ag_cmd_run(int argc, char **argv)
{
    static const struct option own[] = {
        {"output", required_argument, 0, 'o'},
        {"inplace", no_argument, 0, 'I'},
        {"allow-errors", no_argument, 0, 'a'},
        {"max-notebook-size", required_argument, 0, 'N'},
        {"max-cells", required_argument, 0, 'C'},
        {"merge-streams", no_argument, 0, 'S'},
        {"parameters", required_argument, 0, 'p'},
        {"quiet", no_argument, 0, 'q'},
        {0, 0, 0, 0}};
    static const ag_cmd_spec_t spec = {.name = "run",
                                       .shortopts = "o:p:qh",
                                       .own = own,
                                       .usage = s_usage,
                                       .usage_tail = s_usage_tail,
                                       .on_opt = s_on_opt};
    /* Ctrl-C is ours from the start, while the kernel starts too: exit
     * 130 with nothing left behind, never a death by the signal. */
    ag_interrupt_install();
    ag_session_opts_t sopts;
    ag_session_opts_init(&sopts);
    run_args_t a = {.max_nb_bytes = NB_NOTEBOOK_DEFAULT_MAX_BYTES};
    char *out_path = NULL;
    nb_notebook_t *nb = NULL;
    ag_session_t *session = NULL;
    json_t *params = NULL;
    err_t err = {0};
    int status = ERR_USAGE;

    cliopt_group_t archive = ag_archive_flags(&a.archive);
    int parsed =
        ag_cmd_parse_session(&spec, argc, argv, &sopts, &archive, &a, &err);
    if (parsed < 0)
        goto fail;
    if (parsed > 0) {
        status = 0;
        goto out;
    }
    if (optind != argc - 1) {
        err_set(&err, ERR_USAGE,
                optind >= argc ? "which notebook? see 'jupyter-agent run "
                                 "--help'"
                               : "one notebook at a time (got '%s' too)",
                argv[argc - 1]);
        goto fail;
    }
    const char *in_path = argv[optind];
    if (a.inplace && a.out_arg) {
        err_set(&err, ERR_USAGE, "--inplace and -o exclude each other");
        goto fail;
    }

    nb = nb_notebook_read_capped(in_path, a.max_nb_bytes, a.max_cells, &err);
    if (!nb)
        goto fail;
    for (const char *w = nb_notebook_warnings(nb); w && *w;) {
        const char *nl = strchr(w, '\n');
        int n = nl ? (int)(nl - w) : (int)strlen(w);
        fprintf(stderr, "jupyter-agent run: warning: %.*s\n", n, w);
        w += n + (nl != NULL);
    }
    bool to_stdout = a.out_arg && strcmp(a.out_arg, "-") == 0;
    if (to_stdout && a.archive.path) {
        err_set(&err, ERR_USAGE,
                "--archive packs the notebook from a file: name one with -o "
                "instead of '-'");
        goto fail;
    }
    out_path = a.inplace   ? xstrdup(in_path)
               : a.out_arg ? xstrdup(a.out_arg)
                           : nb_path_sibling(in_path, ".out.ipynb");
    if (!to_stdout && s_check_output(in_path, out_path, a.inplace, &err))
        goto fail;
    if (a.nparams && nb_run_inject_parameters(nb, (const char *const *)a.pnames,
                                              (const char *const *)a.pvalues,
                                              a.nparams, &params, &err) < 0)
        goto fail;

    const char *kernel = s_kernel_name(sopts.kernel_name, nb);
    kb_kernelspec_t ks;
    if (kb_kernelspec_find(kernel, &ks, &err)) {
        err_prefix(&err, "kernel");
        goto fail;
    }
    kb_kernelspec_release(&ks);
    sopts.kernel_name = kernel;
    sopts.history_in_memory = true; /* as nbclient and papermill */

    session = ag_session_start(&sopts, &err);
    if (!session || ag_interrupt_pressed()) {
        if (!err.code)
            err.code = ERR_KERNEL;
        if (ag_interrupt_pressed())
            err_set(&err, ERR_INTERRUPTED,
                    "interrupted while the kernel started; nothing written");
        goto fail;
    }
    ag_session_print_warnings(session, stderr);

    run_ui_t ui = {.nb = nb,
                   .tty = isatty(2),
                   .quiet = a.quiet,
                   .out_path = to_stdout ? NULL : out_path};
    nb_run_opts_t ropts;
    nb_run_opts_init(&ropts);
    ropts.timeout_ms = sopts.timeout_ms;
    ropts.allow_errors = a.allow_errors;
    ropts.merge_streams = a.merge_streams;
    ropts.max_output_bytes = sopts.max_output_bytes;
    ropts.on_cell = s_on_cell;
    ropts.arg = &ui;
    ropts.hooks.should_stop = ag_interrupt_should_stop;
    nb_run_result_t res;
    err_t rerr = {0};
    /* A timeout stops the run, which then exits: a kernel killed after
     * ignoring the interrupt is not restarted. */
    kb_kernel_no_restart(ag_session_kernel(session));
    nb_run_notebook(nb, ag_session_kernel(session), &ropts, &res, &rerr);
    if (res.code == ERR_INTERRUPTED && res.executed == 0) {
        /* Nothing ran: writing would only clear outputs (--inplace!). */
        err_set(&err, ERR_INTERRUPTED,
                "interrupted before the first cell ran; nothing written");
        goto fail;
    }
    s_record_run(nb, &res, session, kernel, params, &sopts, a.allow_errors);

    if (to_stdout ? s_write_stdout(nb, &err)
                  : nb_notebook_write_file(nb, out_path, &err)) {
        if (res.code)
            fprintf(stderr, "jupyter-agent run: %s\n", rerr.text);
        status = ERR_IO;
        goto fail;
    }
    status = res.code;
    if (a.archive.path) {
        err_t aerr = {0};
        if (ag_archive_session(session, out_path, a.archive.path, a.archive.key,
                               &aerr) != 0) {
            fprintf(stderr, "jupyter-agent run: --archive: %s\n", aerr.text);
            if (status == 0)
                status = aerr.code ? aerr.code : ERR_IO;
        } else if (!a.quiet) {
            fprintf(stderr, "jupyter-agent run: archived to %s%s\n",
                    a.archive.path,
                    a.archive.key ? "" : " (not signed: no --archive-key)");
        }
    }
    if (to_stdout) {
        free(out_path);
        out_path = xstrdup("the notebook to standard output");
    }
    err_t kerr = {0};
    if (ag_session_end(&session, &kerr) < 0) {
        fprintf(stderr, "jupyter-agent run: %s\n", kerr.text);
        if (status == 0)
            status = kerr.code ? kerr.code : ERR_IO;
    }
    if (res.code)
        fprintf(stderr, "jupyter-agent run: %s; wrote %s\n", rerr.text,
                out_path);
    else if (!a.quiet)
        fprintf(stderr,
                "jupyter-agent run: %zu of %zu code cells executed (%zu "
                "raised), %.1f s; wrote %s\n",
                res.executed, res.total, res.errors, res.duration_ms / 1000.0,
                out_path);
    goto out;

fail:
    fprintf(stderr, "jupyter-agent run: %s\n", err.text);
    if (err.code && status != ERR_IO)
        status = err.code;
out:
    ag_session_hand_off(&session);
    nb_notebook_destroy(&nb);
    json_decref(params);
    free(a.pnames);
    free(a.pvalues);
    free(out_path);
    ag_session_opts_release(&sopts);
    return status;
}
