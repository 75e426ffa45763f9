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
#include <stdarg.h>
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

__attribute__((format(printf, 1, 2))) static int
s_usage_error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "jupyter-agent manifest: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nrun 'jupyter-agent manifest --help' for usage\n");
    return ERR_USAGE;
}

/* Match "--name VALUE" or "--name=VALUE" at argv[*i]; 1 matched, 0 not,
 * -1 when the value is missing. */
static int
s_opt(int argc, char **argv, int *i, const char *name, const char **val)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return 0;
    if (argv[*i][n] == '=') {
        *val = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != '\0')
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *val = argv[++*i];
    return 1;
}

static int
s_is_help(const char *a)
{
    return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

static int
s_keygen(int argc, char **argv)
{
    const char *out = NULL, *label = NULL;
    for (int i = 1; i < argc; i++) {
        int r;
        if (s_is_help(argv[i])) {
            fputs(s_usage_text, stdout);
            return 0;
        }
        if ((r = s_opt(argc, argv, &i, "-o", &out)) ||
            (r = s_opt(argc, argv, &i, "--output", &out)) ||
            (r = s_opt(argc, argv, &i, "--label", &label))) {
            if (r < 0)
                return s_usage_error("%s needs a value", argv[i]);
            continue;
        }
        return s_usage_error("keygen: unexpected argument '%s'", argv[i]);
    }
    if (!out || !*out)
        return s_usage_error("keygen needs -o KEY");
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
    const char *keypath = NULL, *dir = NULL;
    for (int i = 1; i < argc; i++) {
        int r;
        if (s_is_help(argv[i])) {
            fputs(s_usage_text, stdout);
            return 0;
        }
        if ((r = s_opt(argc, argv, &i, "--key", &keypath))) {
            if (r < 0)
                return s_usage_error("%s needs a value", argv[i]);
            continue;
        }
        if (argv[i][0] == '-' || dir)
            return s_usage_error("sign: unexpected argument '%s'", argv[i]);
        dir = argv[i];
    }
    if (!keypath || !dir)
        return s_usage_error("sign needs --key KEY and DIR");
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
    const char *dir = NULL;
    err_t err;
    err_clear(&err);
    int rc = 0;
    pk_manifest_t *m = NULL;
    pk_trust_t *trust = pk_trust_new();
    for (int i = 1; i < argc; i++) {
        int r;
        const char *val = NULL;
        if (s_is_help(argv[i])) {
            fputs(s_usage_text, stdout);
            goto out;
        }
        if ((r = s_opt(argc, argv, &i, "--trust", &val))) {
            if (r < 0) {
                rc = s_usage_error("%s needs a value", argv[i]);
                goto out;
            }
            if (pk_trust_add_arg(trust, val, &err)) {
                fprintf(stderr, "jupyter-agent manifest verify: --trust: %s\n",
                        err.text);
                rc = ERR_USAGE;
                goto out;
            }
            continue;
        }
        if (argv[i][0] == '-' || dir) {
            rc = s_usage_error("verify: unexpected argument '%s'", argv[i]);
            goto out;
        }
        dir = argv[i];
    }
    if (!dir) {
        rc = s_usage_error("verify needs DIR");
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
    if (s_is_help(sub) || strcmp(sub, "help") == 0) {
        fputs(s_usage_text, stdout);
        return 0;
    }
    if (strcmp(sub, "keygen") == 0)
        return s_keygen(argc - 1, argv + 1);
    if (strcmp(sub, "sign") == 0)
        return s_sign(argc - 1, argv + 1);
    if (strcmp(sub, "verify") == 0)
        return s_verify(argc - 1, argv + 1);
    return s_usage_error("unknown manifest command '%s' (keygen, sign, "
                         "verify)",
                         sub);
}
