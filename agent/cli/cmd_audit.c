/*
 * jupyter-agent audit verify LOG [--pub KEY|FILE]: check a --audit log's
 * hash chain and, with the public key, its seals (docs/audit.md).
 */
#include "agent/cli/ag_cmd.h"
#include "common/audit.h"
#include "common/escape.h"
#include "packages/pk_trust.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char s_usage[] =
    "usage: jupyter-agent audit verify LOG [--pub KEY|FILE]\n"
    "\n"
    "Check the hash chain of a log written with --audit LOG: each record\n"
    "holds the SHA-256 of the one before it. Prints one line (records,\n"
    "sessions, first and last time) and exits 0, or names the first broken\n"
    "record (line, seq, and what is wrong: edited, removed, reordered,\n"
    "truncated mid-line, a bad seal) and exits 8.\n"
    "\n"
    "options:\n"
    "      --pub KEY|FILE  the public key (KEY.pub of 'archive keygen', or\n"
    "                      the key text) of the --audit-key that sealed\n"
    "                      the log: every seal must verify with it, and\n"
    "                      the records after the last seal are counted\n"
    "                      as unsealed. Without it seals are checked only\n"
    "                      against the key they name, which proves nothing\n"
    "                      about who wrote them\n"
    "\n"
    "A log is tamper-evident, not tamper-proof: whoever can write it can\n"
    "cut its end or rewrite it whole. Only a seal checked with a key kept\n"
    "elsewhere shows that the records up to it are the ones written.\n";

typedef struct audit_args {
    const char *pub;
} audit_args_t;

static int
s_on_opt(void *arg, const ag_cmd_opt_t *o, err_t *err)
{
    (void)err;
    if (o->opt != 'p')
        return 1;
    ((audit_args_t *)arg)->pub = o->value;
    return 0;
}

static void
s_fail(const char *what, const err_t *err)
{
    char *text = esc_dup(err->text, ESC_NAME);
    fprintf(stderr, "jupyter-agent audit: %s%s%s\n", what ? what : "",
            what ? ": " : "", text);
    free(text);
}

static int
s_verify(const char *path, const audit_args_t *a)
{
    err_t err = {0};
    pk_trust_t *t = NULL;
    const pk_pubkey_t *key = NULL;
    if (a->pub) {
        t = pk_trust_new();
        if (pk_trust_add_arg(t, a->pub, &err)) {
            err_prefix(&err, "--pub");
            s_fail(NULL, &err);
            pk_trust_destroy(&t);
            return ERR_USAGE;
        }
        key = pk_trust_key(t, 0);
    }
    audit_summary_t sum;
    int rc = audit_verify(path, key ? key->pk : NULL, &sum, &err);
    char *p = esc_dup(path, ESC_NAME);
    if (rc == 0 && key && sum.seals == 0) {
        err_set(&err, ERR_VERIFY,
                "no seal: none of its %zu records is sealed (was the log "
                "written with --audit-key?)",
                sum.records);
        rc = -1;
    }
    if (rc) {
        if (err.code == ERR_VERIFY && sum.bad_line > 1)
            fprintf(stderr,
                    "jupyter-agent audit: %s: lines 1 to %zu chain "
                    "correctly\n",
                    p, sum.bad_line - 1);
        s_fail(p, &err);
        free(p);
        pk_trust_destroy(&t);
        return err.code ? err.code : ERR_VERIFY;
    }
    char *first = esc_dup(sum.first_ts, ESC_NAME);
    char *last = esc_dup(sum.last_ts, ESC_NAME);
    printf("jupyter-agent audit: %s verified: %zu records, %zu sessions, "
           "%s to %s; ",
           p, sum.records, sum.sessions, first, last);
    if (!key)
        printf("%zu seal(s) not checked against a key (no --pub)\n", sum.seals);
    else if (sum.unsealed == 0)
        printf("sealed by key %s through the last record (%zu seals)\n",
               key->id, sum.seals);
    else
        printf("sealed by key %s through line %zu (%zu seals); the %zu "
               "record(s) after it are UNSEALED\n",
               key->id, sum.last_seal_line, sum.seals, sum.unsealed);
    free(first);
    free(last);
    free(p);
    pk_trust_destroy(&t);
    return 0;
}

int
ag_cmd_audit(int argc, char **argv)
{
    static const struct option own[] = {{"pub", required_argument, 0, 'p'},
                                        {0, 0, 0, 0}};
    static const ag_cmd_spec_t spec = {.name = "audit",
                                       .shortopts = "h",
                                       .own = own,
                                       .usage = s_usage,
                                       .on_opt = s_on_opt};
    audit_args_t a = {0};
    err_t err = {0};
    int parsed = ag_cmd_parse(&spec, argc, argv, NULL, 0, &a, &err);
    if (parsed > 0)
        return 0;
    if (parsed < 0) {
        s_fail(NULL, &err);
        return ERR_USAGE;
    }
    if (optind >= argc || strcmp(argv[optind], "verify") != 0 ||
        optind + 2 != argc) {
        fprintf(stderr, "jupyter-agent audit: expected 'verify LOG'; see "
                        "'jupyter-agent audit --help'\n");
        return ERR_USAGE;
    }
    return s_verify(argv[optind + 1], &a);
}
