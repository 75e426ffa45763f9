/*
 * ag_session_gateway: a session whose kernel runs on a Jupyter Server or
 * Enterprise Gateway (--gateway URL). The server's isolation is the
 * server's: flags that shape a local sandbox are refused, not ignored;
 * the token comes from --gateway-token-file or the environment and is
 * wiped after use; the kernel gets our KERNEL_* variables; each --file goes
 * through the kernel itself (kb_files), hash-checked, under the local
 * workspace cap.
 */
#include "agent/session/ag_session.h"
#include "agent/session/ag_session_impl.h"

#include "common/buf.h"
#include "common/secret.h"
#include "common/strv.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_files.h"
#include "kernel-bridge/transport/kb_gateway.h"
#include "sandbox/sb_files.h"
#include "sandbox/sb_policy.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The gateway's token: --gateway-token-file, else the environment.
 * 0 with *token a new string or NULL (no token), or -1. */
static int
s_gateway_token(const ag_session_opts_t *o, char **token, err_t *err)
{
    *token = NULL;
    if (!o->gateway_token_file) {
        const char *t = getenv("JUPYTER_GATEWAY_AUTH_TOKEN");
        if (t && *t)
            *token = xstrdup(t);
        return 0;
    }
    FILE *f = fopen(o->gateway_token_file, "r");
    if (!f)
        return err_errno(err, ERR_USAGE, "--gateway-token-file: cannot read %s",
                         o->gateway_token_file);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    bool more = fgetc(f) != EOF;
    fclose(f);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' ||
                 buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        n--;
    buf[n] = '\0';
    int rc = 0;
    if (more || n == 0 || strlen(buf) != n || strpbrk(buf, "\r\n"))
        rc = err_set(err, ERR_USAGE,
                     "--gateway-token-file: %s must hold the token on one "
                     "line (and at most 4 KiB)",
                     o->gateway_token_file);
    else
        *token = xstrdup(buf);
    sodium_memzero(buf, sizeof buf);
    return rc;
}

/* Flags that shape a local sandbox mean nothing to a remote kernel; say so
 * rather than ignore them. */
static int
s_refuse_local_flags(const ag_session_opts_t *o, err_t *err)
{
    static const char tail[] =
        "with --gateway the kernel runs on the server, and its isolation "
        "is the server's (see docs/gateway.md); drop the flag or "
        "the gateway";
    if (o->no_sandbox)
        return err_set(err, ERR_USAGE, "--no-sandbox: %s", tail);
    if (o->packages_dir || o->ninstalls || o->ntrusts)
        return err_set(err, ERR_USAGE,
                       "--packages/--install/--trust install into a local "
                       "sandbox: %s",
                       tail);
    if (o->warm != AG_WARM_AUTO)
        return err_set(err, ERR_USAGE, "--warm picks a local kernel: %s", tail);
    sb_policy_t def;
    sb_policy_init_default(&def);
    json_t *want = sb_policy_to_json(&def),
           *got = sb_policy_to_json(&o->policy);
    buf_t diff;
    buf_init(&diff, 512);
    const char *key;
    json_t *v;
    json_object_foreach(got, key, v)
    {
        if (!json_equal(v, json_object_get(want, key)))
            buf_printf(&diff, "%s%s", diff.len ? ", " : "", key);
    }
    int rc = 0;
    if (diff.len)
        rc = err_set(err, ERR_USAGE,
                     "sandbox flags were given (they set: %s): %s",
                     buf_cstr(&diff), tail);
    buf_release(&diff);
    json_decref(want);
    json_decref(got);
    sb_policy_release(&def);
    return rc;
}

/* KERNEL_* variables for the gateway: ours, plus KERNEL_USERNAME (what
 * jupyter_server's GatewayClient sends). New list. */
static char **
s_gateway_env(void)
{
    extern char **environ;
    char **env = NULL;
    size_t n = 0;
    bool have_user = false;
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, "KERNEL_", 7) == 0) {
            strv_push(&env, &n, xstrdup(*e));
            have_user |= strncmp(*e, "KERNEL_USERNAME=", 16) == 0;
        }
    const char *user = getenv("USER");
    if (!have_user && user && *user)
        strv_push(&env, &n, xasprintf("KERNEL_USERNAME=%s", user));
    return env;
}

ag_session_t *
ag_session_start_gateway(const ag_session_opts_t *o, err_t *err)
{
    char *token = NULL;
    if (s_refuse_local_flags(o, err) || s_gateway_token(o, &token, err))
        return NULL;
    /* Hashed before the kernel starts, as for a local session. */
    json_t *inputs = ag_session_inputs_new(o->files, err);
    if (!inputs) {
        secret_free(token);
        err_prefix(err, "--file");
        return NULL;
    }
    char **env = s_gateway_env();
    kb_gateway_opts_t gopts = {.url = o->gateway_url,
                               .token = token,
                               .ca_file = o->gateway_ca,
                               .env = env};
    kb_kernel_opts_t kopts = {.kernel_name = o->kernel_name,
                              .max_output_bytes = o->max_output_bytes,
                              .gateway = &gopts,
                              .private_dir = true};
    kb_kernel_t *k = kb_kernel_start(&kopts, err);
    strv_free(env);
    secret_free(token);
    if (!k) {
        json_decref(inputs);
        return NULL;
    }
    /* No shared filesystem: each --file goes through the kernel itself,
     * chunk by chunk, hash-checked (kb_files), into the session's own
     * directory there (kb_kernel_opts_t.private_dir: other sessions on
     * the server have theirs), under the same size cap as a local
     * /mnt/data. */
    kb_files_opts_t fo;
    kb_files_opts_init(&fo);
    fo.kernel_dir = kb_kernel_workdir(k);
    for (size_t i = 0; i < o->nfiles; i++) {
        char *path, *name;
        ag_session_split_file_arg(o->files[i], &path, &name);
        int rc =
            sb_files_check_name(name, err) ||
            kb_files_push(k, path, name, o->policy.workspace_bytes, &fo, err);
        free(path);
        free(name);
        if (rc) {
            err_prefix(err, "--file '%s'", o->files[i]);
            kb_kernel_hand_off(&k);
            json_decref(inputs);
            return NULL;
        }
    }
    ag_session_t *s = xcalloc(1, sizeof *s);
    s->kernel = k;
    s->inputs = inputs;
    s->kernel_name = o->kernel_name ? xstrdup(o->kernel_name) : NULL;
    s->warnings = xasprintf("note: the kernel runs on the Jupyter server at "
                            "%s (kernel %s); its isolation is that "
                            "server's.\n",
                            kb_kernel_gateway_url(k), kb_kernel_remote_id(k));
    if (ag_session_audit_begin(s, o, err)) {
        ag_session_destroy(&s);
        return NULL;
    }
    ag_session_outputs_begin(s, o);
    return s;
}
