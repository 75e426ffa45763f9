/*
 * jupyter-agent manifest keygen | sign | verify
 *
 * The operator's side of "packages without network": make an Ed25519 key,
 * sign a directory of wheels, and check a signed directory the way the
 * installer will. The work is in sandbox/pk_key, pk_trust and pk_manifest;
 * this file parses flags and prints.
 */
#include "agent/cli/ag_cmd.h"
#include "common/err.h"
#include "packages/pk_key.h"
#include "packages/pk_manifest.h"
#include "packages/pk_trust.h"

#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char s_usage_text[] =
    "usage: jupyter-agent manifest keygen -o KEY [--label NAME]\n"
    "       jupyter-agent manifest sign --key KEY DIR\n"
    "       jupyter-agent manifest verify [--trust PUBKEY|FILE]... DIR\n"
    "\n"
    "keygen  write a new Ed25519 secret key to KEY (mode 0600, never\n"
    "        overwritten) and its public key to KEY.pub; print the public\n"
    "        key as one line 'ed25519:<base64> [NAME]' for --trust.\n"
    "sign    hash every wheel (*.whl) in DIR and write DIR/manifest.json\n"
    "        and DIR/manifest.sig. Any other file, directory or symlink in\n"
    "        DIR is refused; hidden dot-files are ignored.\n"
    "verify  check DIR/manifest.sig with a trusted key, then the size and\n"
    "        SHA-256 of every listed wheel. Trusted keys: each --trust (a\n"
    "        key string or a .pub file) plus the *.pub files in\n"
    "        $JUPYTER_AGENT_TRUSTED_KEYS if set, else in\n"
    "        ~/.config/jupyter-agent/trusted-keys/ and\n"
    "        /etc/jupyter-agent/trusted-keys/. Any trusted key may sign.\n"
    "\n"
    "exit codes: 0 ok, 2 usage, 7 I/O, 8 verification failed\n";

/* A subcommand's flags, filled by s_on_opt. */
typedef struct {
    const char *out, *label, *key;
    pk_trust_t *trust; /* verify's --trust keys; NULL for the others */
} s_args_t;

static int
s_on_opt(void *arg, const ag_cmd_opt_t *o, err_t *err)
{
    s_args_t *a = arg;
    switch (o->opt) {
    case 'o':
        a->out = o->value;
        return 0;
    case 'l':
        a->label = o->value;
        return 0;
    case 'k':
        a->key = o->value;
        return 0;
    case 't':
        if (pk_trust_add_arg(a->trust, o->value, err))
            return err_prefix(err, "--trust");
        return 0;
    default:
        return 1;
    }
}

/* Parse `jupyter-agent manifest SUB` (argv[0] = SUB) with its own
 * options, then take at most `max_operands` operands. 0 parsed, 1 --help
 * printed, or an exit code after printing the usage error. */
static int
s_parse(const char *name, const struct option *own, const char *shortopts,
        int argc, char **argv, s_args_t *a, int max_operands)
{
    const ag_cmd_spec_t spec = {.name = name,
                                .shortopts = shortopts,
                                .own = own,
                                .usage = s_usage_text,
                                .on_opt = s_on_opt};
    err_t err;
    err_clear(&err);
    int rc = ag_cmd_parse(&spec, argc, argv, NULL, 0, a, &err);
    if (rc == 0 && argc - optind > max_operands)
        rc = err_set(&err, ERR_USAGE,
                     "unexpected argument '%s'; see 'jupyter-agent manifest "
                     "--help'",
                     argv[optind + max_operands]);
    if (rc < 0) {
        fprintf(stderr, "jupyter-agent %s: %s\n", name, err.text);
        return err.code ? err.code : ERR_USAGE;
    }
    return rc;
}

static int
s_usage_error(const char *name, const char *what)
{
    fprintf(stderr,
            "jupyter-agent %s: %s\nrun 'jupyter-agent manifest --help' for "
            "usage\n",
            name, what);
    return ERR_USAGE;
}

static int
s_keygen(int argc, char **argv)
{
    static const struct option own[] = {{"output", required_argument, 0, 'o'},
                                        {"label", required_argument, 0, 'l'},
                                        {0, 0, 0, 0}};
    s_args_t a = {0};
    int parsed = s_parse("manifest keygen", own, "ho:", argc, argv, &a, 0);
    if (parsed)
        return parsed == 1 ? 0 : parsed;
    const char *out = a.out, *label = a.label;
    if (!out || !*out)
        return s_usage_error("manifest keygen", "keygen needs -o KEY");
    err_t err;
    err_clear(&err);
    pk_pubkey_t pub;
    if (pk_key_generate(out, label, &pub, &err)) {
        fprintf(stderr, "jupyter-agent manifest keygen: %s\n", err.text);
        return err.code ? err.code : ERR_IO;
    }
    char *line = pk_pubkey_format(&pub);
    fprintf(stderr,
            "secret key: %s (mode 0600; keep it private and off the machines "
            "that verify)\n"
            "public key: %s.pub (key id %s); give this line to --trust or "
            "copy the .pub file into a trusted-keys directory:\n",
            out, out, pub.id);
    printf("%s%s%s\n", line, pub.label[0] ? " " : "", pub.label);
    free(line);
    return 0;
}

static void
s_print_entry(const char *status, const pk_manifest_entry_t *e)
{
    printf("  %-6s %s %s  %s  %llu bytes  sha256 %.16s...\n", status, e->name,
           e->version, e->filename, (unsigned long long)e->size, e->sha256);
}

static int
s_sign(int argc, char **argv)
{
    static const struct option own[] = {{"key", required_argument, 0, 'k'},
                                        {0, 0, 0, 0}};
    s_args_t a = {0};
    int parsed = s_parse("manifest sign", own, "h", argc, argv, &a, 1);
    if (parsed)
        return parsed == 1 ? 0 : parsed;
    const char *keypath = a.key, *dir = optind < argc ? argv[optind] : NULL;
    if (!keypath || !dir)
        return s_usage_error("manifest sign", "sign needs --key KEY and DIR");
    err_t err;
    err_clear(&err);
    int rc = 0;
    pk_manifest_t *m = NULL;
    pk_seckey_t *key = pk_seckey_load(keypath, &err);
    if (!key)
        goto fail;
    m = pk_manifest_sign_dir(dir, key, &err);
    if (!m)
        goto fail;
    const pk_pubkey_t *pub = pk_seckey_public(key);
    printf("signed %zu wheel%s in %s with key %s%s%s%s at %s:\n",
           pk_manifest_count(m), pk_manifest_count(m) == 1 ? "" : "s", dir,
           pub->id, pub->label[0] ? " (" : "", pub->label,
           pub->label[0] ? ")" : "", pk_manifest_created(m));
    for (size_t i = 0; i < pk_manifest_count(m); i++)
        s_print_entry("signed", pk_manifest_entry(m, i));
    printf("wrote %s/%s and %s/%s\n", dir, PK_MANIFEST_JSON, dir,
           PK_MANIFEST_SIG);
    goto out;
fail:
    fprintf(stderr, "jupyter-agent manifest sign: %s\n", err.text);
    rc = err.code ? err.code : ERR_IO;
out:
    pk_manifest_destroy(&m);
    pk_seckey_destroy(&key);
    return rc;
}

/* Mention files in dir that the manifest does not list (never used). */
static void
s_note_unlisted(const pk_manifest_t *m, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, PK_MANIFEST_JSON) == 0 ||
            strcmp(e->d_name, PK_MANIFEST_SIG) == 0)
            continue;
        int listed = 0;
        for (size_t i = 0; i < pk_manifest_count(m) && !listed; i++)
            listed = strcmp(pk_manifest_entry(m, i)->filename, e->d_name) == 0;
        if (!listed)
            fprintf(stderr,
                    "note: %s/%s is not in the manifest and will never be "
                    "used\n",
                    dir, e->d_name);
    }
    closedir(d);
}

static int
s_verify(int argc, char **argv)
{
    static const struct option own[] = {{"trust", required_argument, 0, 't'},
                                        {0, 0, 0, 0}};
    err_t err;
    err_clear(&err);
    int rc = 0;
    pk_manifest_t *m = NULL;
    pk_trust_t *trust = pk_trust_new();
    s_args_t a = {.trust = trust};
    int parsed = s_parse("manifest verify", own, "h", argc, argv, &a, 1);
    if (parsed) {
        rc = parsed == 1 ? 0 : parsed;
        goto out;
    }
    const char *dir = optind < argc ? argv[optind] : NULL;
    if (!dir) {
        rc = s_usage_error("manifest verify", "verify needs DIR");
        goto out;
    }
    if (pk_trust_add_defaults(trust, &err)) {
        fprintf(stderr, "jupyter-agent manifest verify: %s\n", err.text);
        rc = ERR_USAGE;
        goto out;
    }
    m = pk_manifest_load_signed(dir, trust, &err);
    if (!m) {
        fprintf(stderr, "jupyter-agent manifest verify: %s\n", err.text);
        rc = err.code ? err.code : ERR_VERIFY;
        goto out;
    }
    const pk_pubkey_t *by = pk_manifest_signed_by(m);
    const char *origin = "?";
    for (size_t i = 0; i < pk_trust_count(trust); i++)
        if (memcmp(pk_trust_key(trust, i)->pk, by->pk, sizeof by->pk) == 0)
            origin = pk_trust_origin(trust, i);
    printf("signature ok: %s/%s signed by trusted key %s (%s%sfrom %s) at "
           "%s\n",
           dir, PK_MANIFEST_JSON, by->id, by->label, by->label[0] ? ", " : "",
           origin, pk_manifest_created(m));
    size_t n = pk_manifest_count(m), bad = 0;
    for (size_t i = 0; i < n; i++) {
        err_t ferr;
        err_clear(&ferr);
        if (pk_manifest_verify_entry(m, i, &ferr)) {
            bad++;
            s_print_entry("FAILED", pk_manifest_entry(m, i));
            fflush(stdout); /* keep the reason right after its line */
            fprintf(stderr, "jupyter-agent manifest verify: %s\n", ferr.text);
        } else
            s_print_entry("ok", pk_manifest_entry(m, i));
    }
    fflush(stdout);
    if (bad) {
        fprintf(stderr,
                "jupyter-agent manifest verify: %zu of %zu files in %s "
                "failed verification; nothing from it may be installed\n",
                bad, n, dir);
        rc = ERR_VERIFY;
        goto out;
    }
    s_note_unlisted(m, dir);
    printf("verified: %zu of %zu files in %s match the signed manifest\n", n, n,
           dir);
out:
    pk_manifest_destroy(&m);
    pk_trust_destroy(&trust);
    return rc;
}

int
ag_cmd_manifest(int argc, char **argv)
{
    if (argc < 2) {
        fputs(s_usage_text, stderr);
        return ERR_USAGE;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
        fputs(s_usage_text, stdout);
        return 0;
    }
    if (strcmp(sub, "keygen") == 0)
        return s_keygen(argc - 1, argv + 1);
    if (strcmp(sub, "sign") == 0)
        return s_sign(argc - 1, argv + 1);
    if (strcmp(sub, "verify") == 0)
        return s_verify(argc - 1, argv + 1);
    fprintf(stderr,
            "jupyter-agent manifest: unknown manifest command '%s' (keygen, "
            "sign, verify)\nrun 'jupyter-agent manifest --help' for usage\n",
            sub);
    return ERR_USAGE;
}
