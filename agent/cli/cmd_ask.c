/*
 * jupyter-agent ask: one question to the model, answered by running Python
 * in a fresh sandboxed kernel (or an existing one); the whole session is
 * written as a notebook and the files the code saved in /mnt/data/out/ are
 * copied next to it.
 */
#include "agent/cli/ag_cmd.h"
#include "agent/cli/cmd_ask_impl.h"
#include "agent/loop/ag_loop.h"
#include "agent/loop/ag_render.h"
#include "agent/session/ag_archive.h"
#include "agent/session/ag_session.h"
#include "common/buf.h"
#include "common/cliopt.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/escape.h"
#include "common/fileio.h"
#include "common/jpaths.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_files.h"
#include "notebook-io/nb_notebook.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char s_usage[] =
    "usage: jupyter-agent ask [options] \"QUESTION\"\n"
    "\n"
    "Answer QUESTION with an LLM that runs Python in a fresh sandboxed\n"
    "kernel. The session is saved as a notebook (-o), and the files the code\n"
    "saves in /mnt/data/out/ are copied to SESSION_files/ next to it.\n"
    "QUESTION \"-\" reads it from standard input.\n"
    "\n"
    "options:\n"
    "  -m, --model SPEC       openai:MODEL, anthropic:MODEL or replay:FILE\n"
    "                         (default: $JUPYTER_AGENT_MODEL, else by which "
    "of\n"
    "                         OPENAI_API_KEY / ANTHROPIC_API_KEY is set)\n"
    "  -o, --output PATH      the session notebook (default\n"
    "                         session-YYYYmmdd-HHMMSS.ipynb); it must be\n"
    "                         new (--force replaces a regular file) and\n"
    "                         PATH_files/ new or empty (--force adds to it);\n"
    "                         both are checked before the first model call\n"
    "      --max-steps N      model turns before giving up (default 20)\n"
    "      --record FILE      also write the model's turns to FILE, to replay\n"
    "                         later with --model replay:FILE\n"
    "      --existing [FILE]  run in a kernel someone else started: its\n"
    "                         connection file, or the newest kernel-*.json in\n"
    "                         the Jupyter runtime dir. NOT sandboxed\n"
    "      --allow-unsigned   accept a connection file with an empty key\n"
    "  -q, --quiet            print only the answer and the summary\n"
    "\n"
    "environment: OPENAI_API_KEY, OPENAI_BASE_URL (any compatible server),\n"
    "ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, JUPYTER_AGENT_MODEL. Keys never\n"
    "reach the sandbox, the notebook or the recording.\n";

static const char s_usage_tail[] =
    "\n"
    "exit status: 0 answered, 1 stopped at --max-steps without an answer,\n"
    "2 usage, 3 kernel failure, 4 sandbox failure, 5 LLM provider failure,\n"
    "7 cannot write the notebook (or --keep-workspace could not copy\n"
    "everything out), 130 interrupted (the notebook so far is still\n"
    "written)\n";

/* ---- Ctrl-C -------------------------------------------------------------- */

static ag_loop_t *volatile s_loop;
static volatile sig_atomic_t s_sigints;

static void
s_on_sigint(int sig)
{
    (void)sig;
    if (s_sigints++ == 0) {
        if (s_loop)
            ag_loop_cancel(s_loop);
        return;
    }
    static const char msg[] = "\njupyter-agent ask: interrupted again; "
                              "quitting (the notebook holds the last step)\n";
    ssize_t n = write(2, msg, sizeof msg - 1);
    (void)n;
    _exit(ERR_INTERRUPTED);
}

/* ---- helpers ------------------------------------------------------------- */

#define NO_RUNTIME_DIR                                                         \
    "no Jupyter runtime dir (neither JUPYTER_RUNTIME_DIR nor a home "          \
    "directory is known); pass the kernel's connection file"

/* The newest kernel-*.json in the Jupyter runtime dir, or NULL + err. */
static char *
s_newest_connection_file(err_t *err)
{
    char *dir = jpaths_runtime_dir();
    if (!dir) {
        err_set(err, ERR_USAGE, "--existing: " NO_RUNTIME_DIR);
        return NULL;
    }
    DIR *d = opendir(dir);
    if (!d) {
        err_set(err, ERR_USAGE,
                "--existing: cannot read the Jupyter runtime dir %s: %s; pass "
                "the kernel's connection file",
                dir, strerror(errno));
        free(dir);
        return NULL;
    }
    char *best = NULL;
    struct timespec best_t = {0, 0};
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (strncmp(de->d_name, "kernel-", 7) != 0 || n < 12 ||
            strcmp(de->d_name + n - 5, ".json") != 0)
            continue;
        char *path = xasprintf("%s/%s", dir, de->d_name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
            (!best || st.st_mtim.tv_sec > best_t.tv_sec ||
             (st.st_mtim.tv_sec == best_t.tv_sec &&
              st.st_mtim.tv_nsec > best_t.tv_nsec))) {
            free(best);
            best = path;
            best_t = st.st_mtim;
        } else {
            free(path);
        }
    }
    closedir(d);
    if (!best)
        err_set(err, ERR_USAGE,
                "--existing: no kernel-*.json in %s; start a kernel (e.g. "
                "jupyter console) or pass its connection file",
                dir);
    free(dir);
    return best;
}

/* A connection file named on the command line: a path, or a name in the
 * runtime dir as `jupyter console --existing` accepts. */
static char *
s_resolve_connection_file(const char *name, err_t *err)
{
    if (access(name, R_OK) == 0 || strchr(name, '/'))
        return xstrdup(name);
    char *dir = jpaths_runtime_dir();
    char *p = dir ? xasprintf("%s/%s", dir, name) : NULL;
    free(dir);
    if (p && access(p, R_OK) == 0)
        return p;
    free(p);
    err_set(err, ERR_USAGE, "--existing: no connection file %s", name);
    return NULL;
}

static char *
s_read_stdin(void)
{
    buf_t b;
    buf_init(&b, 0);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
        buf_append(&b, chunk, n);
    return buf_detach(&b, NULL);
}

static void
s_thousands(long long v, char *out, size_t size)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%lld", v < 0 ? -v : v);
    size_t n = strlen(digits), o = 0;
    if (v < 0 && o + 1 < size)
        out[o++] = '-';
    for (size_t i = 0; i < n && o + 2 < size; i++) {
        if (i && (n - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
}

static int
s_by_path(const void *a, const void *b)
{
    const char *pa =
        json_string_value(json_object_get(*(json_t *const *)a, "path"));
    const char *pb =
        json_string_value(json_object_get(*(json_t *const *)b, "path"));
    return strcmp(pa ? pa : "", pb ? pb : "");
}

/* The files under out/ of a remote kernel's working directory, as
 * sb_sandbox_list_files lists a box's ([{path, size}], paths starting with
 * "out/"); an empty list when it has no out/ or cannot say. */
static json_t *
s_remote_list(kb_kernel_t *k, const kb_files_opts_t *fo)
{
    err_t err;
    json_t *got = kb_files_list(k, "out", 10000, fo, &err);
    json_t *all = json_array();
    size_t i;
    json_t *f;
    json_array_foreach(got, i, f)
    {
        const char *p = json_string_value(json_object_get(f, "path"));
        if (!p)
            continue;
        char *full =
            strncmp(p, "out/", 4) == 0 ? xstrdup(p) : xasprintf("out/%s", p);
        json_array_append_new(all, json_pack("{s:s, s:O}", "path", full, "size",
                                             json_object_get(f, "size")));
        free(full);
    }
    json_decref(got);
    return all;
}

/* Copy /mnt/data/out/ to files_dir; prints what came out. */
static void
s_copy_out(ask_ui_t *ui, ag_session_t *session, const char *files_dir)
{
    sb_sandbox_t *box = session ? ag_session_sandbox(session) : NULL;
    kb_kernel_t *remote =
        session && kb_kernel_gateway_url(ag_session_kernel(session))
            ? ag_session_kernel(session)
            : NULL;
    if (!box && !remote)
        return;
    /* A kernel on a gateway shares no filesystem with us: its out/ (in the
     * session's own directory there) comes through the kernel itself
     * (kb_files). */
    kb_files_opts_t fo;
    kb_files_opts_init(&fo);
    fo.kernel_dir = remote ? kb_kernel_workdir(remote) : NULL;
    json_t *all =
        box ? sb_sandbox_list_files(box, 10000) : s_remote_list(remote, &fo);
    json_t *outs = json_array();
    size_t i;
    json_t *f;
    json_array_foreach(all, i, f)
    {
        const char *p = json_string_value(json_object_get(f, "path"));
        /* What copy-out takes: not dot-names (it names those it skips). */
        if (p && strncmp(p, "out/", 4) == 0 && !strstr(p, "/."))
            json_array_append(outs, f);
    }
    json_decref(all);
    size_t n = json_array_size(outs);
    json_t **sorted = xcalloc(n ? n : 1, sizeof *sorted);
    for (i = 0; i < n; i++)
        sorted[i] = json_array_get(outs, i);
    qsort(sorted, n, sizeof *sorted, s_by_path);
    json_t *ordered = json_array();
    for (i = 0; i < n; i++)
        json_array_append(ordered, sorted[i]);
    free(sorted);
    json_decref(outs);
    outs = ordered;
    if (json_array_size(outs) == 0) {
        json_decref(outs);
        return;
    }
    err_t cerr = {0};
    sb_files_out_opts_t o;
    size_t copied = 0;
    int rc;
    if (box) {
        sb_policy_out_opts(sb_sandbox_policy(box), &o);
        rc = sb_sandbox_copy_out(box, "out", files_dir, &o, &copied, &cerr);
    } else {
        sb_policy_t def;
        sb_policy_init_default(&def);
        sb_policy_out_opts(&def, &o);
        rc = kb_files_copy_out(remote, "out", files_dir, &o, &fo, &copied,
                               &cerr);
        sb_policy_release(&def);
    }
    if (copied) {
        /* Names come from the box: escaped, so they cannot move the cursor,
         * retitle the terminal, write the clipboard or forge a line. */
        buf_t line;
        buf_init(&line, 0);
        json_array_foreach(outs, i, f)
        {
            char sz[32];
            buf_puts(&line, i ? ", " : " ");
            esc_append(&line, json_string_value(json_object_get(f, "path")) + 4,
                       strlen(json_string_value(json_object_get(f, "path"))) -
                           4,
                       ESC_NAME);
            buf_printf(&line, " (%s)",
                       ag_tools_human_size(
                           json_integer_value(json_object_get(f, "size")), sz,
                           sizeof sz));
        }
        printf("%sfiles:%s    %s/ (%zu):%s\n", cmd_ask_c(ui, "\033[1m"),
               cmd_ask_c(ui, "\033[0m"), files_dir, json_array_size(outs),
               buf_cstr(&line));
        buf_release(&line);
    }
    if (rc < 0)
        fprintf(stderr, "jupyter-agent ask: copying files out: %s\n",
                cerr.text);
    json_decref(outs);
}

static bool
s_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

/* ---- the command --------------------------------------------------------- */

static int
s_exit_code(int rc, const err_t *err, const ag_loop_stats_t *st)
{
    if (rc == 0)
        return st->answered ? 0 : ERR_USER_CODE;
    switch (err->code) {
    case ERR_INTERRUPTED:
    case ERR_KERNEL:
    case ERR_SANDBOX:
    case ERR_IO:
        return err->code;
    default:
        return ERR_PROVIDER; /* the model failed us (replay exhausted too) */
    }
}

/* What the command line asked for. */
typedef struct ask_args {
    const char *model;          /* --model, or NULL for the environment's */
    const char *output;         /* -o, or NULL for session-STAMP.ipynb */
    const char *record;         /* --record FILE, or NULL */
    const char *existing_arg;   /* --existing's connection file, or NULL */
    ag_archive_flags_t archive; /* --archive ZIP, --archive-key KEY */
    bool existing;              /* --existing given (with or without FILE) */
    bool allow_unsigned;        /* --allow-unsigned */
    bool quiet;                 /* -q */
    int max_steps;              /* --max-steps */
    ag_session_opts_t sopts;    /* the session's and sandbox's flags */
    char *question;             /* owned; never empty once parsed */
} ask_args_t;

static int
s_parse_max_steps(const char *v, int *out, err_t *err)
{
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (!end || *end || n < 1 || n > 10000)
        return err_set(err, ERR_USAGE,
                       "--max-steps '%s' is not a number from 1 to 10000", v);
    *out = (int)n;
    return 0;
}

/* The question: the words after the options, or stdin for "-". */
static int
s_take_question(int argc, char **argv, int first, ask_args_t *a, err_t *err)
{
    if (first >= argc)
        return err_set(err, ERR_USAGE,
                       "no question; usage: jupyter-agent ask \"QUESTION\" "
                       "(see --help)");
    if (first + 1 == argc && strcmp(argv[first], "-") == 0) {
        a->question = s_read_stdin();
        size_t n = strlen(a->question);
        while (n && strchr(" \t\r\n", a->question[n - 1]))
            a->question[--n] = '\0';
    } else {
        buf_t q;
        buf_init(&q, 0);
        for (int i = first; i < argc; i++)
            buf_printf(&q, "%s%s", i > first ? " " : "", argv[i]);
        a->question = buf_detach(&q, NULL);
    }
    if (!a->question[strspn(a->question, " \t\r\n")])
        return err_set(err, ERR_USAGE, "the question is empty");
    return 0;
}

static int
s_on_opt(void *arg, const ag_cmd_opt_t *o, err_t *err)
{
    ask_args_t *a = arg;
    switch (o->opt) {
    case 'm':
        a->model = o->value;
        return 0;
    case 'o':
        a->output = o->value;
        return 0;
    case 'S':
        return s_parse_max_steps(o->value, &a->max_steps, err);
    case 'r':
        a->record = o->value;
        return 0;
    case 'e':
        /* "--existing FILE.json" too: the optional value may be the
         * next word when it names a connection file. */
        a->existing = true;
        a->existing_arg = o->value;
        if (!o->value && optind < o->argc && o->argv[optind][0] != '-' &&
            s_ends_with(o->argv[optind], ".json"))
            a->existing_arg = o->argv[optind++];
        return 0;
    case 'U':
        a->allow_unsigned = true;
        return 0;
    case 'q':
        a->quiet = true;
        return 0;
    default:
        return 1;
    }
}

/* Parse argv into `a` (initialised). 0: go on; 1: --help was printed;
 * -1: a usage error in err. */
static int
s_parse_args(int argc, char **argv, ask_args_t *a, err_t *err)
{
    static const struct option own[] = {
        {"model", required_argument, 0, 'm'},
        {"output", required_argument, 0, 'o'},
        {"max-steps", required_argument, 0, 'S'},
        {"record", required_argument, 0, 'r'},
        {"existing", optional_argument, 0, 'e'},
        {"allow-unsigned", no_argument, 0, 'U'},
        {"quiet", no_argument, 0, 'q'},
        {0, 0, 0, 0}};
    static const ag_cmd_spec_t spec = {.name = "ask",
                                       .shortopts = "m:o:qh",
                                       .own = own,
                                       .usage = s_usage,
                                       .usage_tail = s_usage_tail,
                                       .on_opt = s_on_opt};
    cliopt_group_t archive = ag_archive_flags(&a->archive);
    int rc =
        ag_cmd_parse_session(&spec, argc, argv, &a->sopts, &archive, a, err);
    if (rc == 0)
        rc = s_take_question(argc, argv, optind, a, err);
    if (rc == 0 && a->existing && a->sopts.nfiles)
        rc = err_set(err, ERR_USAGE,
                     "--file copies into a sandbox; it does not work with "
                     "--existing (the kernel sees your files already)");
    return rc;
}

/* -o, else session-YYYYmmdd-HHMMSS.ipynb in the current directory. */
static char *
s_notebook_path(const char *output)
{
    if (output)
        return xstrdup(output);
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    return xasprintf("session-%s.ipynb", stamp);
}

/* Before the first model call: the notebook must be new (or --force
 * replaces it; never a device, FIFO or link) and SESSION_files/ new or
 * empty (or --force adds to it, as for every files-out directory), so a
 * whole session is not run to be refused at the end. */
static int
s_check_outputs(const ask_args_t *a, const char *nb_path, err_t *err)
{
    if (a->output && strcmp(a->output, "-") == 0)
        return err_set(err, ERR_USAGE,
                       "-o -: ask shows the conversation on standard output "
                       "and copies files next to the notebook; name a "
                       "notebook file");
    if (file_check_output(nb_path, "-o", err))
        return -1;
    struct stat st;
    if (!a->sopts.policy.out_force && lstat(nb_path, &st) == 0)
        return err_set(err, ERR_USAGE,
                       "-o %s already exists; choose another -o, or pass "
                       "--force to replace it",
                       nb_path);
    if (a->existing) /* no box: no files come out */
        return 0;
    sb_files_out_opts_t o;
    sb_policy_out_opts(&a->sopts.policy, &o);
    char *files_dir = nb_path_sibling(nb_path, "_files");
    int rc = sb_outdir_check(files_dir, &o, err);
    if (rc < 0)
        err_prefix(err, "-o %s: its files go to %s/", nb_path, files_dir);
    free(files_dir);
    return rc;
}

/* A kernel to work in: attached (--existing) or a new sandboxed one. */
static ag_session_t *
s_open_session(const ask_args_t *a, err_t *err)
{
    if (!a->existing)
        return ag_session_start(&a->sopts, err);
    char *conn = a->existing_arg
                     ? s_resolve_connection_file(a->existing_arg, err)
                     : s_newest_connection_file(err);
    if (!conn) {
        err->code = ERR_USAGE;
        return NULL;
    }
    ag_session_t *s = ag_session_attach(conn, a->allow_unsigned, err);
    free(conn);
    return s;
}

/* The closing line: how it ended, steps, cells, tokens, time. */
static void
s_print_summary(ask_ui_t *ui, ag_loop_t *loop, const ag_loop_stats_t *st,
                int rc, const err_t *err, int64_t t0)
{
    ag_usage_t u = ag_provider_usage(ag_loop_provider(loop));
    char in[32], outk[32];
    s_thousands(u.input_tokens, in, sizeof in);
    s_thousands(u.output_tokens, outk, sizeof outk);
    const char *how = st->answered        ? "done"
                      : st->hit_max_steps ? "stopped at --max-steps"
                      : rc < 0 && err->code == ERR_INTERRUPTED ? "interrupted"
                                                               : "failed";
    char tokens[96] = "";
    if (u.input_tokens || u.output_tokens)
        snprintf(tokens, sizeof tokens, " · %s tokens in, %s out", in, outk);
    printf("\n%s── %s ── %d step%s · %d cell%s%s · %.1f s%s\n",
           cmd_ask_c(ui, "\033[1m"), how, st->steps, st->steps == 1 ? "" : "s",
           st->cells, st->cells == 1 ? "" : "s", tokens,
           (clock_mono_ms() - t0) / 1000.0, cmd_ask_c(ui, "\033[0m"));
}

/* --archive: pack (and with --archive-key sign) the saved session. */
static int
s_archive(ask_ui_t *ui, const ask_args_t *a, ag_session_t *session,
          const char *nb_path, int status)
{
    err_t aerr = {0};
    if (ag_archive_session(session, nb_path, a->archive.path, a->archive.key,
                           &aerr) == 0) {
        printf("%sarchive:%s  %s%s\n", cmd_ask_c(ui, "\033[1m"),
               cmd_ask_c(ui, "\033[0m"), a->archive.path,
               a->archive.key ? "" : " (not signed: no --archive-key)");
        return status;
    }
    fprintf(stderr, "jupyter-agent ask: --archive: %s\n", aerr.text);
    return status == 0 ? (aerr.code ? aerr.code : ERR_IO) : status;
}

/* Ask the question in `loop`, then save the notebook (and pack the
 * archive) and copy the files out, also after a failure or Ctrl-C.
 * Returns the exit status. */
static int
s_ask_and_save(ask_ui_t *ui, const ask_args_t *a, ag_loop_t *loop,
               ag_session_t *session, const char *nb_path)
{
    const char *question = a->question;
    err_t err = {0};
    ag_loop_ui_t lui = cmd_ask_ui_hooks(ui);
    ag_loop_stats_t st = {0};
    int64_t t0 = clock_mono_ms();
    int rc = ag_loop_ask(loop, question, &lui, &st, &err);
    cmd_ask_ui_end(ui);

    err_t serr = {0};
    bool saved = ag_loop_save(loop, nb_path, &serr) == 0;
    int status = s_exit_code(rc, &err, &st);
    if (rc < 0) {
        if (err.code == ERR_INTERRUPTED)
            fprintf(stderr, "jupyter-agent ask: interrupted\n");
        else
            fprintf(stderr, "jupyter-agent ask: %s\n", err.text);
    }
    s_print_summary(ui, loop, &st, rc, &err, t0);
    if (saved) {
        printf("%snotebook:%s %s%s\n", cmd_ask_c(ui, "\033[1m"),
               cmd_ask_c(ui, "\033[0m"), nb_path,
               rc < 0 ? " (the session so far)" : "");
    } else {
        fprintf(stderr, "jupyter-agent ask: %s\n", serr.text);
        if (status == 0)
            status = ERR_IO;
    }
    char *files_dir = nb_path_sibling(nb_path, "_files");
    s_copy_out(ui, session, files_dir);
    free(files_dir);
    /* After the copy-out: the archive holds SESSION_files/ as outputs/. */
    if (saved && a->archive.path)
        status = s_archive(ui, a, session, nb_path, status);

    fflush(stdout);
    return status;
}

int
ag_cmd_ask(int argc, char **argv)
{
    ask_args_t a = {.max_steps = AG_LOOP_MAX_STEPS};
    ag_session_opts_init(&a.sopts);
    a.sopts.outputs_data = true; /* docs/outputs.md */
    err_t err = {0};
    int status = 0;
    char *nb_path = NULL;
    ag_provider_t *provider = NULL;
    ag_session_t *session = NULL;
    ag_loop_t *loop = NULL;
    ask_ui_t ui = {.at_bol = true, .render = {.out = stdout, .err = stderr}};
    buf_init(&ui.turn_text, 0);

    int parsed = s_parse_args(argc, argv, &a, &err);
    if (parsed != 0) {
        status = parsed > 0 ? 0 : ERR_USAGE;
        if (parsed < 0)
            fprintf(stderr, "jupyter-agent ask: %s\n", err.text);
        goto out;
    }
    /* The provider and the outputs first: a configuration mistake should
     * not cost a sandbox start. */
    provider = ag_provider_new(a.model, &err);
    if (!provider ||
        (a.record && ag_provider_set_record(provider, a.record, &err) < 0)) {
        fprintf(stderr, "jupyter-agent ask: %s\n", err.text);
        status = ERR_USAGE; /* a bad --model, --record or configuration */
        goto out;
    }
    nb_path = s_notebook_path(a.output);
    if (s_check_outputs(&a, nb_path, &err) < 0) {
        fprintf(stderr, "jupyter-agent ask: %s\n", err.text);
        status = ERR_USAGE;
        goto out;
    }

    ui.tty = isatty(1);
    const char *no_color = getenv("NO_COLOR");
    ui.color = ui.tty && !(no_color && *no_color);
    ui.render.color = ui.color && isatty(2);
    ui.quiet = a.quiet;

    session = s_open_session(&a, &err);
    if (!session) {
        fprintf(stderr, "jupyter-agent ask: %s\n", err.text);
        status = err.code ? err.code : ERR_KERNEL;
        goto out;
    }
    ag_session_print_warnings(session, stderr);

    ag_loop_opts_t lo = {.provider = &provider,
                         .session = session,
                         .timeout_ms = a.sopts.timeout_ms,
                         .max_steps = a.max_steps,
                         .autosave = nb_path};
    lo.env.max_output_bytes = a.sopts.max_output_bytes;
    loop = ag_loop_new(&lo, &err);
    if (!loop) {
        fprintf(stderr, "jupyter-agent ask: %s\n", err.text);
        status = err.code;
        goto out;
    }
    s_loop = loop;
    struct sigaction sa = {.sa_handler = s_on_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    status = s_ask_and_save(&ui, &a, loop, session, nb_path);
    ag_loop_destroy(&loop);
    err_t kerr = {0};
    if (ag_session_end(&session, &kerr) < 0) {
        fprintf(stderr, "jupyter-agent ask: %s\n", kerr.text);
        if (status == 0)
            status = kerr.code ? kerr.code : ERR_IO;
    }

out:
    s_loop = NULL;
    signal(SIGINT, SIG_DFL);
    ag_loop_destroy(&loop);
    ag_provider_destroy(&provider);
    ag_session_hand_off(&session);
    ag_session_opts_release(&a.sopts);
    buf_release(&ui.turn_text);
    free(a.question);
    free(nb_path);
    return status;
}
