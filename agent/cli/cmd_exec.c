/*
 * jupyter-agent exec: run code in a fresh sandboxed kernel (or an existing
 * one) and print its outputs like a console, or as one JSON object.
 */
#include "agent/cli/ag_cmd.h"
#include "agent/cli/ag_interrupt.h"
#include "agent/loop/ag_render.h"
#include "agent/session/ag_session.h"
#include "common/cliopt.h"
#include "common/err.h"
#include "common/escape.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_kernel.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

static const char s_usage[] =
    "usage: jupyter-agent exec [options] [-c CODE | FILE | -]\n"
    "\n"
    "Run Python code in a fresh sandboxed kernel and print its outputs.\n"
    "Code comes from -c, from FILE, or from standard input.\n"
    "\n"
    "options:\n"
    "  -c, --code CODE        the code to run\n"
    "      --json             print one JSON object: status, execution_count,\n"
    "                         outputs (nbformat), duration_ms\n"
    "      --events           one JSON object per line per output as it\n"
    "                         arrives (stream, display_data, execute_result,\n"
    "                         update_display_data, clear_output, error,\n"
    "                         status), then the --json object\n"
    "      --merge-streams    in --json, one output per run of same-name\n"
    "                         stream text (default: one per message, as\n"
    "                         nbclient 0.7 stores them)\n"
    "      --out DIR          save images as DIR/out-1.png, ... (DIR new or\n"
    "                         empty; each checked against its type; all\n"
    "                         within --max-output and --disk)\n"
    "      --existing FILE    run in a kernel someone else started (its\n"
    "                         connection file); not sandboxed\n"
    "      --allow-unsigned   accept a connection file with an empty key\n";

static const char s_usage_tail[] =
    "\nexit status: 0 ok, 1 the code raised, 2 usage, 3 kernel failure,\n"
    "4 sandbox failure, 6 timeout, 7 --keep-workspace could not copy\n"
    "everything out (the message names what), 130 interrupted\n";

typedef struct exec_ui {
    ag_render_t render; /* console rendering state */
    bool json;          /* --json: print nothing until the end */
    bool events;        /* --events: a JSON line per output as it comes */
} exec_ui_t;

/* --events: the message's content as one line, with "event" its type, and
 * for a display its "mimes" (the data bundle's keys, in the kernel's
 * order). Flushed at once: a caller sees each output while the cell runs.
 * ASCII only, so a kernel's bytes cannot drive the caller's terminal. */
static void
s_print_event(const kb_msg_t *msg)
{
    static const char *const kinds[] = {
        "stream", "display_data", "update_display_data", "clear_output",
        "error",  "status",       "execute_result"};
    const char *type = kb_msg_type(msg);
    bool known = false;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds && !known; i++)
        known = strcmp(type, kinds[i]) == 0;
    if (!known)
        return;
    json_t *ev = json_pack("{s:s}", "event", type); /* first on the line */
    json_t *content = kb_msg_content(msg);
    if (json_is_object(content))
        json_object_update(ev, content);
    json_t *data = json_object_get(ev, "data");
    if (json_is_object(data)) {
        json_t *mimes = json_array();
        const char *mime;
        json_t *v;
        json_object_foreach(data, mime, v)
            json_array_append_new(mimes, json_string(mime));
        json_object_set_new(ev, "mimes", mimes);
    }
    json_dumpf(ev, stdout,
               JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(ev);
}

static void
s_on_iopub(const kb_msg_t *msg, void *arg)
{
    exec_ui_t *ui = arg;
    if (ui->events)
        s_print_event(msg);
    if (ui->json)
        return;
    const char *type = kb_msg_type(msg);
    if (strcmp(type, "stream") && strcmp(type, "display_data") &&
        strcmp(type, "execute_result") && strcmp(type, "error"))
        return;
    json_t *output = json_deep_copy(kb_msg_content(msg));
    json_object_set_new(output, "output_type", json_string(type));
    ag_render_output(&ui->render, output);
    json_decref(output);
}

static char *
s_on_input(const char *prompt, bool password, void *arg)
{
    (void)arg;
    /* input(password=True), getpass(): no echo on a terminal, switched
     * off before the prompt shows, so nothing typed after it echoes. */
    struct termios old;
    bool restore = false;
    if (password && isatty(0) && tcgetattr(0, &old) == 0) {
        struct termios quiet = old;
        quiet.c_lflag &= ~(tcflag_t)(ECHO | ECHOE | ECHOK | ECHONL);
        restore = tcsetattr(0, TCSAFLUSH, &quiet) == 0;
    }
    /* The prompt comes from the kernel: escaped (newlines kept), so it
     * cannot retitle the terminal or write the clipboard. */
    char *shown = esc_dup(prompt, ESC_KEEP_LINES);
    fputs(shown, stderr);
    free(shown);
    fflush(stderr);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (restore) {
        tcsetattr(0, TCSAFLUSH, &old);
        fputc('\n', stderr);
    }
    if (n <= 0) {
        free(line);
        return NULL;
    }
    if (line[n - 1] == '\n')
        line[n - 1] = '\0';
    return line;
}

static char *
s_read_all(FILE *f)
{
    size_t len = 0, cap = 4096;
    char *buf = xmalloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2)
            buf = xrealloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    return buf;
}

static int
s_exit_code(int rc, const err_t *err, kb_output_t *out)
{
    if (rc == 0)
        return strcmp(kb_output_status(out), "ok") == 0 ? 0 : ERR_USER_CODE;
    return err->code;
}

/* --json: the one object, with `error` (NULL: none) unless the outputs
 * carry one, and `keep_workspace_error` when the copy-out failed. */
static void
s_print_json(kb_output_t *out, const char *error, const char *kw_error)
{
    json_t *obj = kb_output_to_json(out);
    if (error && !json_object_get(obj, "error"))
        json_object_set_new(obj, "error", json_string(error));
    if (kw_error)
        json_object_set_new(obj, "keep_workspace_error", json_string(kw_error));
    json_dumpf(obj, stdout, JSON_COMPACT | JSON_ENSURE_ASCII);
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(obj);
}

/* exec's own flags. */
typedef struct exec_args {
    const char *code_arg, *existing, *out_dir;
    bool json, events, allow_unsigned, merge_streams;
} exec_args_t;

static int
s_on_opt(void *arg, const ag_cmd_opt_t *o, err_t *err)
{
    (void)err;
    exec_args_t *a = arg;
    switch (o->opt) {
    case 'c':
        a->code_arg = o->value;
        return 0;
    case 'j':
        a->json = true;
        return 0;
    case 'E': /* --events ends with the --json object */
        a->json = a->events = true;
        return 0;
    case 'S':
        a->merge_streams = true;
        return 0;
    case 'o':
        a->out_dir = o->value;
        return 0;
    case 'e':
        a->existing = o->value;
        return 0;
    case 'U':
        a->allow_unsigned = true;
        return 0;
    default:
        return 1;
    }
}

int
ag_cmd_exec(int argc, char **argv)
{
    static const struct option own[] = {{"code", required_argument, 0, 'c'},
                                        {"json", no_argument, 0, 'j'},
                                        {"events", no_argument, 0, 'E'},
                                        {"merge-streams", no_argument, 0, 'S'},
                                        {"out", required_argument, 0, 'o'},
                                        {"existing", required_argument, 0, 'e'},
                                        {"allow-unsigned", no_argument, 0, 'U'},
                                        {0, 0, 0, 0}};
    static const ag_cmd_spec_t spec = {.name = "exec",
                                       .shortopts = "+c:h",
                                       .own = own,
                                       .usage = s_usage,
                                       .usage_tail = s_usage_tail,
                                       .on_opt = s_on_opt};
    /* Ctrl-C is ours from the start, while the kernel starts too: a
     * caller always gets its answer (--json: the object) and exit 130,
     * never a death by the signal with the box left behind. */
    ag_interrupt_install();
    exec_args_t a = {0};
    sb_outdir_t *img_dir = NULL;
    ag_session_opts_t sopts;
    ag_session_opts_init(&sopts);
    sopts.outputs_data = true; /* docs/outputs.md */
    exec_ui_t ui = {.render = {.out = stdout, .err = stderr}};
    err_t err = {0};
    int parsed =
        ag_cmd_parse_session(&spec, argc, argv, &sopts, NULL, &a, &err);
    if (parsed != 0) /* --help (1) ends there too, with exit 0 */
        goto usage_error;

    char *code = NULL;
    bool code_from_stdin = false;
    if (a.code_arg && optind < argc) {
        err_set(&err, ERR_USAGE,
                "-c CODE and the file '%s' both give code; pass one (--file "
                "copies a file into the box)",
                argv[optind]);
        goto usage_error;
    }
    if (!a.code_arg && optind + 1 < argc) {
        err_set(&err, ERR_USAGE,
                "one code file at a time (got '%s' and '%s'); --file copies "
                "other files into the box",
                argv[optind], argv[optind + 1]);
        goto usage_error;
    }
    if (a.code_arg) {
        code = xstrdup(a.code_arg);
    } else if (optind < argc && strcmp(argv[optind], "-") != 0) {
        FILE *f = fopen(argv[optind], "r");
        if (!f) {
            err_errno(&err, ERR_USAGE, "cannot read %s", argv[optind]);
            goto usage_error;
        }
        code = s_read_all(f);
        fclose(f);
    } else {
        if (isatty(0))
            fprintf(stderr, "(reading code from standard input; end with "
                            "Ctrl-D)\n");
        code = s_read_all(stdin);
        code_from_stdin = true;
        if (ag_interrupt_pressed()) {
            free(code);
            err_set(&err, ERR_INTERRUPTED,
                    "interrupted while reading the code; nothing ran");
            fprintf(stderr, "jupyter-agent exec: %s\n", err.text);
            ag_session_opts_release(&sopts);
            return ERR_INTERRUPTED;
        }
    }
    ui.json = a.json;
    ui.events = a.events;
    ui.render.color = isatty(1) && isatty(2);
    if (a.out_dir) {
        /* Images count against --max-output and --disk, whichever is
         * smaller, and the same entry cap as every copy-out. */
        sb_files_out_opts_t oo;
        sb_policy_out_opts(&sopts.policy, &oo);
        if (sopts.max_output_bytes && sopts.max_output_bytes < oo.max_bytes)
            oo.max_bytes = sopts.max_output_bytes;
        img_dir = sb_outdir_open(a.out_dir, &oo, &err);
        if (!img_dir) {
            err_prefix(&err, "--out");
            free(code);
            goto usage_error;
        }
        ui.render.img_dir = img_dir;
    }

    ag_session_t *session =
        a.existing ? ag_session_attach(a.existing, a.allow_unsigned, &err)
                   : ag_session_start(&sopts, &err);
    if (!session || ag_interrupt_pressed()) {
        int failed = err.code ? err.code : ERR_KERNEL;
        if (ag_interrupt_pressed()) {
            failed = ERR_INTERRUPTED;
            err_set(&err, ERR_INTERRUPTED,
                    "interrupted while the kernel started; the code did not "
                    "run");
        }
        if (a.json) {
            kb_output_t *none = kb_output_new(NULL, 0);
            kb_output_set_interrupted(none, failed == ERR_INTERRUPTED);
            if (failed != ERR_INTERRUPTED)
                kb_output_set_status(none, "error");
            s_print_json(none, err.text, NULL);
            kb_output_destroy(&none);
        } else {
            fprintf(stderr, "jupyter-agent exec: %s\n", err.text);
        }
        ag_session_hand_off(&session);
        free(code);
        sb_outdir_destroy(&img_dir);
        ag_session_opts_release(&sopts);
        return failed;
    }
    ag_session_print_warnings(session, stderr);

    kb_exec_opts_t xopts;
    kb_exec_opts_init(&xopts);
    xopts.allow_stdin = !code_from_stdin;
    kb_exec_hooks_t hooks = {.on_iopub = s_on_iopub,
                             .on_input = s_on_input,
                             .should_stop = ag_interrupt_should_stop,
                             .arg = &ui};
    /* One execution, then exit: a kernel killed after a timeout is not
     * restarted (an attached one is never restarted anyway). */
    if (!a.existing)
        kb_kernel_no_restart(ag_session_kernel(session));
    kb_output_t *out = kb_output_new(NULL, sopts.max_output_bytes);
    kb_output_merge_streams(out, a.merge_streams);
    int rc = kb_kernel_execute(ag_session_kernel(session), code, &xopts,
                               sopts.timeout_ms, out, &hooks, &err);
    int status = s_exit_code(rc, &err, out);
    /* --keep-workspace: the copy happens as the box ends, before the JSON
     * that reports it; its failure is the command's (exit 7) when nothing
     * failed before. Without it the box is handed off after the output. */
    err_t kerr = {0};
    bool kept = true;
    if (sopts.policy.keep_workspace_dir) {
        kept = ag_session_end(&session, &kerr) == 0;
        if (!kept && status == 0)
            status = kerr.code ? kerr.code : ERR_IO;
    }

    if (a.json) {
        s_print_json(out, rc ? err.text : NULL, kept ? NULL : kerr.text);
        /* Save images even in JSON mode when asked. */
        if (ui.render.img_dir) {
            ag_render_t quiet = ui.render;
            quiet.out = quiet.err = fopen("/dev/null", "w");
            size_t i;
            json_t *o;
            json_array_foreach(kb_output_outputs(out), i,
                               o) if (json_object_get(o, "data"))
                ag_render_output(&quiet, o);
            fclose(quiet.out);
        }
    } else if (rc) {
        ag_render_end_lines(&ui.render);
        fprintf(stderr, "jupyter-agent exec: %s\n", err.text);
    }
    if (!a.existing && !sopts.no_sandbox) {
        /* A cell that hit a box limit (threads, processes): say which. */
        char *dump = json_dumps(kb_output_outputs(out), JSON_COMPACT);
        const char *hint = ag_session_limit_hint(dump, &sopts.policy);
        if (hint && strcmp(kb_output_status(out), "ok") != 0) {
            ag_render_end_lines(&ui.render);
            fprintf(stderr, "jupyter-agent exec: %s\n", hint);
        }
        free(dump);
    }
    if (kb_output_truncated(out) && !a.json) {
        ag_render_end_lines(&ui.render);
        /* The cap, not what was kept: since outputs are charged their real
         * cost, a first output over the cap leaves 0 bytes stored. */
        fprintf(stderr,
                "jupyter-agent exec: output was cut at the --max-output cap "
                "(%zu bytes); raise --max-output\n",
                sopts.max_output_bytes);
    }
    if (!kept) {
        ag_render_end_lines(&ui.render);
        fprintf(stderr, "jupyter-agent exec: %s\n", kerr.text);
    }
    kb_output_destroy(&out);
    ag_session_hand_off(&session);
    sb_outdir_destroy(&img_dir);
    ag_session_opts_release(&sopts);
    free(code);
    return status;

usage_error:
    if (parsed <= 0)
        fprintf(stderr, "jupyter-agent exec: %s\n", err.text);
    ag_session_opts_release(&sopts);
    return parsed > 0 ? 0 : ERR_USAGE;
}
