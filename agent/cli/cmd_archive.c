/*
 * jupyter-agent archive pack | verify | rerun | show: reproducible report
 * archives (agent/session/ag_archive.h says what is inside).
 */
#include "agent/cli/ag_cmd.h"
#include "agent/cli/cmd_archive_impl.h"
#include "agent/session/ag_archive.h"
#include "agent/session/ag_envlock.h"
#include "agent/session/ag_session.h"
#include "common/buf.h"
#include "common/cliopt.h"
#include "common/err.h"
#include "common/escape.h"
#include "common/fileio.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_USAGE                                                                \
    "usage: jupyter-agent archive pack NOTEBOOK.ipynb [-o REPORT.zip] "        \
    "[--input PATH[:NAME]]...\n"                                               \
    "                             [--key KEY] [--outputs DIR] "                \
    "[--packages DIR] [--force]\n"                                             \
    "       jupyter-agent archive verify REPORT.zip [--trust KEY|FILE]... "    \
    "[--allow-unsigned]\n"                                                     \
    "       jupyter-agent archive rerun REPORT.zip [-o RERUN.ipynb] "          \
    "[--tolerance PCT] [--timeout S]\n"                                        \
    "                             [--memory SIZE] [--pids N] ... (sandbox "    \
    "limits)\n"                                                                \
    "       jupyter-agent archive show REPORT.zip\n"                           \
    "\n"                                                                       \
    "A report archive is one zip file holding a session's notebook, its\n"     \
    "inputs (the --file files, found through the notebook's metadata and\n"    \
    "checked against the SHA-256 recorded then), its outputs (the\n"           \
    "SESSION_files/ folder), signed packages, the environment it ran in,\n"    \
    "an RO-Crate description, a sha256sum-style manifest, and an in-toto\n"    \
    "statement of every file's hash signed with an Ed25519 key from\n"         \
    "'jupyter-agent manifest keygen' (DSSE envelope).\n"                       \
    "\n"                                                                       \
    "pack     write the archive (default NOTEBOOK.zip); --key signs it;\n"     \
    "         a fresh sandboxed kernel records the Python environment\n"       \
    "         (--no-probe skips that)\n"                                       \
    "verify   check the signature against trusted keys (--trust, and the\n"    \
    "         *.pub files in $JUPYTER_AGENT_TRUSTED_KEYS or\n"                 \
    "         ~/.config/jupyter-agent/trusted-keys/), every hash, nothing\n"   \
    "         missing or added, and safe entry names; exit 8 names the file\n" \
    "rerun    verify, unpack the inputs into a fresh sandbox with the\n"       \
    "         recorded limits (each checked as its flag checks it, exit 8\n"   \
    "         when the flag would refuse it; none above this machine's:\n"     \
    "         the sandbox flags given to rerun, else the defaults), run\n"     \
    "         the notebook as 'run' does, and compare\n"                       \
    "         every cell's outputs (text exactly after normalising memory\n"   \
    "         addresses and colours; PNG images by size and pixels, a pixel\n" \
    "         differing when a channel moves by more than 2 of 255, and\n"     \
    "         --tolerance PCT percent of pixels allowed, default 0). Prints\n" \
    "         'N of M cells reproduced' and each difference; exit 0 only\n"    \
    "         when all reproduce, else 9\n"                                    \
    "show     verify, then summarise: files, signer, environment\n"            \
    "\n"                                                                       \
    "options:\n"                                                               \
    "  -o, --output PATH      pack: the archive ('-': standard output);\n"     \
    "                         rerun: the re-run notebook. A new path or a\n"   \
    "                         regular file, never a device, FIFO or link\n"    \
    "      --input PATH[:NAME]  pack: add an input, or give the file for a\n"  \
    "                         recorded input NAME that moved or changed\n"     \
    "      --key KEY          pack: sign with this secret key\n"               \
    "      --outputs DIR      pack: the outputs folder (default\n"             \
    "                         NOTEBOOK_files/ when it exists)\n"               \
    "      --packages DIR     pack: include a signed wheel directory\n"        \
    "      --force            pack: replace an existing archive\n"             \
    "      --no-probe         pack: do not start a kernel to record the\n"     \
    "                         environment\n"                                   \
    "      --trust KEY|FILE   trust this public key (repeatable)\n"            \
    "      --allow-unsigned   accept an archive packed without --key\n"        \
    "      --tolerance PCT    rerun: percent of an image's pixels that may\n"  \
    "                         differ (default 0)\n"                            \
    "      --timeout S        rerun: limit per cell (default 60; 0 = none)\n"  \
    "\n"                                                                       \
    "exit codes: 0 ok, 2 usage, 3 kernel, 4 sandbox, 7 I/O, 8 verification\n"  \
    "failed (the file is named), 9 rerun did not reproduce every cell.\n"
static const char s_usage[] = S_USAGE;
/* rerun's --help adds the policy flags after this. */
static const char s_usage_rerun[] =
    S_USAGE "\nrerun: the most a recorded limit may ask for\n";

static void
s_push(char ***v, size_t *n, char *s)
{
    *v = xrealloc(*v, (*n + 2) * sizeof **v);
    (*v)[(*n)++] = s;
    (*v)[*n] = NULL;
}

/* Every string that comes from an archive is the signer's notebook's, and
 * a hostile notebook is signed as faithfully as any: it reaches the
 * terminal only through these. */

/* Escaped copies kept until the command's output is done. */
typedef struct esc_pool {
    char **v; /* owned strings */
    size_t n;
} esc_pool_t;

/* `s` escaped (every control, ESC_NAME), or "?" for NULL; owned by `p`. */
static const char *
s_esc(esc_pool_t *p, const char *s)
{
    char *e = esc_dup(s ? s : "?", ESC_NAME);
    p->v = xrealloc(p->v, (p->n + 1) * sizeof *p->v);
    p->v[p->n++] = e;
    return e;
}

static void
s_pool_release(esc_pool_t *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->v[i]);
    free(p->v);
    p->v = NULL;
    p->n = 0;
}

/* `prefix`, then text of several lines we composed around archive strings
 * (a diff, an error): each line escaped, the line breaks kept. Ends with
 * '\n'. */
void
cmd_archive_put_lines(FILE *f, const char *prefix, const char *s)
{
    buf_t b;
    buf_init(&b, 0);
    buf_puts(&b, prefix);
    for (;;) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        esc_append(&b, s, len, ESC_NAME);
        buf_puts(&b, "\n");
        if (!nl || !nl[1])
            break;
        s = nl + 1;
    }
    fwrite(buf_cstr(&b), 1, b.len, f);
    buf_release(&b);
}

static int
s_on_opt(void *arg, const ag_cmd_opt_t *o, err_t *err)
{
    archive_args_t *a = arg;
    switch (o->opt) {
    case 'o':
        a->out = o->value;
        return 0;
    case 'i':
        /* optarg is o->value, as the mutable string argv holds. */
        s_push(&a->inputs, &a->ninputs, optarg);
        return 0;
    case 'k':
        a->key = o->value;
        return 0;
    case 'O':
        a->outputs = o->value;
        return 0;
    case 'P':
        a->packages = o->value;
        return 0;
    case 'f':
        a->force = true;
        return 0;
    case 'n':
        a->no_probe = true;
        return 0;
    case 't':
        s_push(&a->trusts, &a->ntrusts, optarg);
        return 0;
    case 'u':
        a->allow_unsigned = true;
        return 0;
    case 'T': {
        char *end;
        a->tolerance = strtod(o->value, &end);
        if (*end || a->tolerance < 0 || a->tolerance > 100)
            return err_set(err, ERR_USAGE,
                           "--tolerance takes a percentage from 0 to 100, "
                           "not '%s'",
                           o->value);
        return 0;
    }
    case 's':
        return ag_parse_seconds(o->value, &a->timeout_ms, err) ? -1 : 0;
    default:
        return 1;
    }
}

static int
s_parse(int argc, char **argv, archive_args_t *a, err_t *err)
{
    static const struct option own[] = {
        {"output", required_argument, 0, 'o'},
        {"input", required_argument, 0, 'i'},
        {"key", required_argument, 0, 'k'},
        {"outputs", required_argument, 0, 'O'},
        {"packages", required_argument, 0, 'P'},
        {"force", no_argument, 0, 'f'},
        {"no-probe", no_argument, 0, 'n'},
        {"trust", required_argument, 0, 't'},
        {"allow-unsigned", no_argument, 0, 'u'},
        {"tolerance", required_argument, 0, 'T'},
        {"timeout", required_argument, 0, 's'},
        {0, 0, 0, 0}};
    a->timeout_ms = 60000;
    /* rerun takes the sandbox's policy flags: the most a recorded limit
     * may ask for. */
    cliopt_group_t policy = sb_policy_flags(&a->policy);
    bool rerun = strcmp(a->verb, "rerun") == 0;
    const ag_cmd_spec_t spec = {.name = "archive",
                                .shortopts = "o:h",
                                .own = own,
                                .usage = rerun ? s_usage_rerun : s_usage,
                                .on_opt = s_on_opt};
    /* argv[1] is the verb: parse from there, as its own argv[0]. */
    int rc =
        ag_cmd_parse(&spec, argc - 1, argv + 1, &policy, rerun ? 1 : 0, a, err);
    optind++; /* back to an index into argv */
    if (rc)
        return rc;
    if (optind != argc - 1)
        return err_set(err, ERR_USAGE,
                       "archive %s takes one %s; see 'jupyter-agent archive "
                       "--help'",
                       a->verb,
                       strcmp(a->verb, "pack") == 0 ? "notebook" : "archive");
    a->target = argv[optind];
    return 0;
}

static pk_trust_t *
s_trust(const archive_args_t *a, err_t *err)
{
    pk_trust_t *t = pk_trust_new();
    for (size_t i = 0; i < a->ntrusts; i++)
        if (pk_trust_add_arg(t, a->trusts[i], err)) {
            err_prefix(err, "--trust");
            pk_trust_destroy(&t);
            return NULL;
        }
    if (pk_trust_add_defaults(t, err)) {
        pk_trust_destroy(&t);
        return NULL;
    }
    return t;
}

/* "1a2b3c4d5e6f7a8b (label), trusted by ORIGIN" or "nobody (unsigned)",
 * escaped. */
char *
cmd_archive_signer(const ag_archive_t *ar)
{
    if (!ar->is_signed)
        return xstrdup("nobody: the archive is not signed");
    char *origin =
        esc_dup(ar->signer_origin ? ar->signer_origin : "?", ESC_NAME);
    char *label = esc_dup(ar->signer.label, ESC_NAME);
    char *s =
        xasprintf("key %s%s%s%s, trusted through %s", ar->signer.id,
                  label[0] ? " (" : "", label, label[0] ? ")" : "", origin);
    free(origin);
    free(label);
    return s;
}

/* environment.json's string at A(.B), escaped into `p`; "?" if none. */
static const char *
s_env_str(esc_pool_t *p, const ag_archive_t *ar, const char *a, const char *b)
{
    json_t *j = json_object_get(ar->environment, a);
    if (b)
        j = json_object_get(j, b);
    return s_esc(p, json_string_value(j));
}

/* ---- pack --------------------------------------------------------------- */

/* The environment lock from a fresh sandboxed kernel of the notebook's
 * kind. NULL (with a warning printed) when it cannot be had. */
static json_t *
s_probe_environment(const nb_notebook_t *nb)
{
    ag_session_opts_t so;
    ag_session_opts_init(&so);
    so.kernel_name = json_string_value(json_object_get(
        json_object_get(nb_notebook_metadata(nb), "kernelspec"), "name"));
    so.warm = AG_WARM_COLD;
    err_t err = {0};
    json_t *lock = NULL;
    ag_session_t *s = ag_session_start(&so, &err);
    if (s)
        lock = ag_envlock_capture(ag_session_kernel(s), nb, PROBE_TIMEOUT_MS,
                                  &err);
    if (!lock)
        cmd_archive_put_lines(
            stderr,
            "jupyter-agent archive: warning: the environment was not "
            "recorded: ",
            err.text);
    ag_session_destroy(&s);
    ag_session_opts_release(&so);
    return lock;
}

/* -o -: the archive, packed into a private directory, to stdout. */
static int
s_copy_to_stdout(const char *path, err_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_errno(err, ERR_IO, "cannot read back %s", path);
    char buf[65536];
    ssize_t n;
    int rc = 0;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n) {
            n = -1;
            break;
        }
    if (n < 0 || fflush(stdout) != 0)
        rc = err_errno(err, ERR_IO,
                       "cannot write the archive to standard "
                       "output");
    close(fd);
    return rc;
}

static int
s_pack(const archive_args_t *a, err_t *err)
{
    bool to_stdout = a->out && strcmp(a->out, "-") == 0;
    if (to_stdout && isatty(1))
        return err_set(err, ERR_USAGE,
                       "-o - writes a zip file to standard output, which is "
                       "a terminal; redirect it (> REPORT.zip) or name a "
                       "file");
    if (!to_stdout) {
        /* Before the probe's kernel: a refused -o costs nothing. */
        char *o = a->out ? xstrdup(a->out) : nb_path_sibling(a->target, ".zip");
        struct stat st;
        int bad = file_check_output(o, "-o", err);
        if (!bad && !a->force && lstat(o, &st) == 0)
            bad = err_set(err, ERR_USAGE,
                          "%s exists; choose another -o or add --force", o);
        free(o);
        if (bad)
            return -1;
    }
    nb_notebook_t *nb = nb_notebook_read_file(a->target, err);
    if (!nb)
        return -1;
    if (a->key) { /* a bad key fails before the probe's kernel starts */
        pk_seckey_t *key = pk_seckey_load(a->key, err);
        if (!key) {
            err_prefix(err, "--key");
            nb_notebook_destroy(&nb);
            return -1;
        }
        pk_seckey_destroy(&key);
    }
    /* A notebook that records no inputs packs into an archive whose cells
     * cannot read the files they read when it ran. */
    json_t *ja = json_object_get(nb_notebook_metadata(nb), "jupyter_agent");
    if (!json_is_array(json_object_get(ja, "inputs")) && a->ninputs == 0) {
        char *t = esc_dup(a->target, ESC_NAME);
        fprintf(stderr,
                "jupyter-agent archive: warning: %s records no inputs "
                "(metadata.jupyter_agent.inputs: a session of 'ask', 'run' "
                "or 'mcp' with --file writes it), so the archive holds none "
                "and 'archive rerun' cannot give its cells the files they "
                "read; add each with --input PATH[:NAME]\n",
                t);
        free(t);
    }
    json_t *lock = a->no_probe ? NULL : s_probe_environment(nb);
    char *tmpdir = NULL;
    if (to_stdout) {
        const char *t = getenv("TMPDIR");
        tmpdir =
            xasprintf("%s/jupyter-agent-pack-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmpdir)) {
            err_errno(err, ERR_IO, "-o -: cannot make a temporary directory %s",
                      tmpdir);
            free(tmpdir);
            json_decref(lock);
            nb_notebook_destroy(&nb);
            return -1;
        }
    }
    char *out = to_stdout ? xasprintf("%s/archive.zip", tmpdir)
                : a->out  ? xstrdup(a->out)
                          : nb_path_sibling(a->target, ".zip");
    ag_archive_pack_opts_t po = {.notebook_path = a->target,
                                 .nb = nb,
                                 .out_path = out,
                                 .inputs = a->inputs,
                                 .outputs_dir = a->outputs,
                                 .packages_dir = a->packages,
                                 .key_path = a->key,
                                 .envlock = lock,
                                 .force = a->force};
    size_t n = 0;
    int rc = ag_archive_pack(&po, &n, err);
    if (rc == 0 && to_stdout)
        rc = s_copy_to_stdout(out, err);
    if (rc == 0)
        fprintf(to_stdout ? stderr : stdout,
                "jupyter-agent archive: wrote %s: %zu files, %s\n",
                to_stdout ? "the archive to standard output" : out, n,
                a->key ? "signed" : "NOT signed (no --key)");
    if (tmpdir) {
        unlink(out);
        rmdir(tmpdir);
        free(tmpdir);
    }
    json_decref(lock);
    nb_notebook_destroy(&nb);
    free(out);
    return rc;
}

/* ---- verify and show ---------------------------------------------------- */

ag_archive_t *
cmd_archive_open(const archive_args_t *a, int extract_dirfd, err_t *err)
{
    pk_trust_t *trust = s_trust(a, err);
    if (!trust)
        return NULL;
    ag_archive_t *ar = ag_archive_open(a->target, extract_dirfd, trust,
                                       a->allow_unsigned, err);
    if (ar && ar->signer_origin)
        ar->signer_origin = xstrdup(ar->signer_origin);
    pk_trust_destroy(&trust);
    if (!ar)
        err_prefix(err, "%s", a->target);
    return ar;
}

void
cmd_archive_close(ag_archive_t **ar)
{
    if (*ar)
        free((char *)(*ar)->signer_origin);
    ag_archive_destroy(ar);
}

static int
s_verify(const archive_args_t *a, err_t *err)
{
    ag_archive_t *ar = cmd_archive_open(a, -1, err);
    if (!ar)
        return -1;
    esc_pool_t p = {0};
    char *who = cmd_archive_signer(ar);
    printf("jupyter-agent archive: %s verified: %zu files, every hash "
           "matches; signed by %s; packed %s\n",
           s_esc(&p, a->target), ar->files->nfiles, who,
           s_env_str(&p, ar, "packed", NULL));
    free(who);
    s_pool_release(&p);
    cmd_archive_close(&ar);
    return 0;
}

static void
s_show_group(esc_pool_t *p, const ag_archive_t *ar, const char *prefix,
             const char *title)
{
    size_t n = strlen(prefix), count = 0;
    for (size_t i = 0; i < ar->files->nfiles; i++) {
        const nb_archive_file_t *f = &ar->files->files[i];
        if (strncmp(f->name, prefix, n) != 0)
            continue;
        if (count++ == 0)
            printf("%s:\n", title);
        printf("  %-40s %12llu bytes  sha256 %.16s...\n", s_esc(p, f->name + n),
               (unsigned long long)f->size, f->sha256);
    }
    if (count == 0)
        printf("%s: none\n", title);
}

/* "openai:gpt-4o": the model as the user named it. The recorded model is
 * the --model spec, which carries its provider already ("openai:gpt-4o"
 * with provider "openai"); a model without it gets "(provider P)". */
static const char *
s_model(esc_pool_t *p, const ag_archive_t *ar)
{
    const char *prov = json_string_value(
        json_object_get(json_object_get(ar->environment, "model"), "provider"));
    const char *model = json_string_value(
        json_object_get(json_object_get(ar->environment, "model"), "model"));
    size_t n = prov ? strlen(prov) : 0;
    if (!model)
        return s_esc(p, prov);
    if (!prov || (strncmp(model, prov, n) == 0 && model[n] == ':'))
        return s_esc(p, model);
    char *both = xasprintf("%s (provider %s)", model, prov);
    const char *r = s_esc(p, both);
    free(both);
    return r;
}

static int
s_show(const archive_args_t *a, err_t *err)
{
    ag_archive_t *ar = cmd_archive_open(a, -1, err);
    if (!ar)
        return -1;
    esc_pool_t p = {0};
    char *who = cmd_archive_signer(ar);
    printf("archive:     %s (%llu bytes, %zu files, verified)\n",
           s_esc(&p, a->target), (unsigned long long)ar->files->archive_bytes,
           ar->files->nfiles);
    printf("signed by:   %s\n", who);
    printf("packed:      %s by jupyter-agent %s\n",
           s_env_str(&p, ar, "packed", NULL),
           s_env_str(&p, ar, "jupyter_agent", NULL));
    printf("session:     %s to %s, status %s\n",
           s_env_str(&p, ar, "session", "started"),
           s_env_str(&p, ar, "session", "ended"),
           s_env_str(&p, ar, "session", "status"));
    printf("kernel:      %s; Python %s\n",
           s_env_str(&p, ar, "kernelspec", "display_name"),
           s_env_str(&p, ar, "python", "python"));
    if (json_object_get(ar->environment, "model"))
        printf("model:       %s\n", s_model(&p, ar));
    json_t *sandbox = json_object_get(ar->environment, "sandbox");
    if (json_is_object(json_object_get(sandbox, "limits")))
        sandbox = json_object_get(sandbox, "limits");
    if (json_is_object(sandbox))
        printf("sandbox:     memory %lld bytes, %g CPUs, %lld pids, "
               "network %s\n",
               (long long)json_integer_value(
                   json_object_get(sandbox, "memory_bytes")),
               json_number_value(json_object_get(sandbox, "cpus")),
               (long long)json_integer_value(json_object_get(sandbox, "pids")),
               json_is_true(json_object_get(sandbox, "network")) ? "on"
                                                                 : "off");
    json_t *lock = json_object_get(ar->environment, "python");
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(lock, "notebook_imports"), i, m)
    {
        const char *name = json_string_value(m);
        json_t *mod = json_object_get(json_object_get(lock, "modules"), name);
        const char *deb =
            json_string_value(json_object_get(mod, "debian_package"));
        printf("  imports    %-14s %-12s %s%s\n", s_esc(&p, name),
               s_esc(&p, json_string_value(json_object_get(mod, "version"))),
               deb ? "Debian " : "", deb ? s_esc(&p, deb) : "");
    }
    printf("notebook:    %s, %zu cells\n", AG_ARCHIVE_NOTEBOOK,
           nb_notebook_ncells(ar->nb));
    s_show_group(&p, ar, "inputs/", "inputs");
    s_show_group(&p, ar, "outputs/", "outputs");
    s_show_group(&p, ar, "packages/", "packages");
    free(who);
    s_pool_release(&p);
    cmd_archive_close(&ar);
    return 0;
}

int
ag_cmd_archive(int argc, char **argv)
{
    archive_args_t a = {0};
    err_t err = {0};
    int status = 0, rc;
    if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        fputs(s_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? ERR_USAGE : 0;
    }
    a.verb = argv[1];
    sb_policy_init_default(&a.policy);
    rc = s_parse(argc, argv, &a, &err);
    if (rc > 0)
        goto out;
    if (rc == 0) {
        if (strcmp(a.verb, "pack") == 0)
            rc = s_pack(&a, &err);
        else if (strcmp(a.verb, "verify") == 0)
            rc = s_verify(&a, &err);
        else if (strcmp(a.verb, "rerun") == 0)
            rc = cmd_archive_rerun(&a, &err);
        else if (strcmp(a.verb, "show") == 0)
            rc = s_show(&a, &err);
        else
            rc = err_set(&err, ERR_USAGE,
                         "unknown verb '%s': pack, verify, rerun or show",
                         a.verb);
    }
    if (rc) {
        /* Errors quote the archive (names, the kernelspec): escaped. */
        cmd_archive_put_lines(stderr, "jupyter-agent archive: ", err.text);
        status = err.code ? err.code : ERR_USAGE;
    }
out:
    free(a.inputs);
    free(a.trusts);
    sb_policy_release(&a.policy);
    return status;
}
