/*
 * sb_sandbox_egress_tls: --net-secret and --net-ca on the launcher's
 * side. The session CA (sb_egress_ca) is made once per sandbox, before its
 * first spawn; its certificate goes into the box's CA bundle with the
 * host's trust store and --net-ca; the leaves, their key, the secrets
 * (read from their files at each proxy start, so a rotated file takes
 * effect at the next restart) and --net-ca reach the proxy through a
 * sealed memfd, never through argv, the environment or a file.
 */
#include "sandbox/sb_egress_ca.h"
#include "sandbox/sb_egress_secret.h"
#include "sandbox/sb_sandbox.h"

#include "common/buf.h"
#include "common/fileio.h"
#include "common/xalloc.h"

#include <openssl/crypto.h>
#include <openssl/x509.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/sb_sandbox_impl.h"

#define S_STORE_MAX (16 << 20) /* bytes of the host's trust store file */
#define S_CA_MAX (1 << 20)     /* bytes of a --net-ca file */

int
sb_box_egress_ca(sb_sandbox_t *sb, err_t *err)
{
    const sb_policy_t *p = &sb->policy;
    if (!p->n_net_secret || sb->egress_ca)
        return 0;
    if (!p->allow_net)
        return err_set(err, ERR_USAGE,
                       "--net-secret needs --allow-net naming its host (the "
                       "secret is added at the egress proxy)");
    sb_egress_rules_t *rs = xcalloc(1, sizeof *rs);
    sb_egress_rules_parse(rs, p->allow_net, NULL);
    const char *hosts[SB_EGRESS_MAX_SECRETS];
    sb_egress_secret_spec_t spec[SB_EGRESS_MAX_SECRETS];
    size_t n = 0;
    int rc = -1;
    for (size_t i = 0; i < p->n_net_secret && n < SB_EGRESS_MAX_SECRETS; i++) {
        if (sb_egress_secret_spec_parse(p->net_secret[i], &spec[n], err) < 0)
            goto out;
        bool allowed =
            sb_egress_match_name(rs, spec[n].host, 443) ||
            (spec[n].plain && sb_egress_match_name(rs, spec[n].host, 80));
        for (size_t r = 0; !allowed && r < rs->n; r++)
            allowed = rs->rule[r].port &&
                      sb_egress_match_name(rs, spec[n].host, rs->rule[r].port);
        if (!allowed) {
            err_set(err, ERR_USAGE,
                    "--net-secret %s: no --allow-net rule allows %s; add "
                    "--allow-net %s",
                    spec[n].host, spec[n].host, spec[n].host);
            goto out;
        }
        hosts[n] = spec[n].host;
        n++;
    }
    sb->egress_ca = sb_egress_ca_new(hosts, n, err);
    rc = sb->egress_ca ? 0 : -1;
out:
    free(rs);
    return rc;
}

void
sb_box_egress_ca_free(sb_sandbox_t *sb)
{
    sb_egress_ca_destroy(&sb->egress_ca);
}

char *
sb_box_egress_bundle(const sb_sandbox_t *sb, size_t *len)
{
    const sb_policy_t *p = &sb->policy;
    if (!p->allow_net || (!sb->egress_ca && !p->net_ca))
        return NULL;
    buf_t b;
    buf_init(&b, 0);
    char *data = NULL;
    size_t n = 0;
    const char *store = X509_get_default_cert_file(); /* not $SSL_CERT_FILE:
                                                          the box's own */
    if (file_read_small(store, S_STORE_MAX, false, &data, &n) == 0) {
        buf_append(&b, data, n);
        if (n && data[n - 1] != '\n')
            buf_append(&b, "\n", 1);
        free(data);
    }
    if (p->net_ca &&
        file_read_small(p->net_ca, S_CA_MAX, false, &data, &n) == 0) {
        buf_printf(&b, "# --net-ca %s\n", p->net_ca);
        buf_append(&b, data, n);
        if (n && data[n - 1] != '\n')
            buf_append(&b, "\n", 1);
        free(data);
    }
    if (sb->egress_ca)
        buf_printf(&b,
                   "# jupyter-agent: this box's egress session CA "
                   "(--net-secret)\n%s",
                   sb_egress_ca_cert_pem(sb->egress_ca));
    return buf_detach(&b, len);
}

/* The secret's value from its file: one trailing newline dropped. */
static int
s_read_secret(const sb_egress_secret_spec_t *s, sb_egress_secret_t *out,
              err_t *err)
{
    char *v = NULL;
    size_t n = 0;
    if (file_read_small(s->file, SB_EGRESS_SECRET_MAX + 2, false, &v, &n) < 0)
        return err_errno(err, ERR_USAGE, "--net-secret %s: cannot read %s",
                         s->host, s->file);
    if (n && v[n - 1] == '\n')
        n--;
    if (n && v[n - 1] == '\r')
        n--;
    const char *why = NULL;
    if (sb_egress_secret_value_ok(v, n, &why) < 0) {
        explicit_bzero(v, n);
        free(v);
        return err_set(err, ERR_USAGE,
                       "--net-secret %s: the value in %s cannot be a header "
                       "value: %s",
                       s->host, s->file, why);
    }
    v[n] = '\0';
    out->value = v;
    out->value_len = n;
    return 0;
}

int
sb_box_egress_conf_fd(sb_sandbox_t *sb, int *fd, err_t *err)
{
    const sb_policy_t *p = &sb->policy;
    *fd = -1;
    if (!sb->egress_ca)
        return 0;
    sb_egress_conf_t *c = xcalloc(1, sizeof *c);
    buf_t out;
    buf_init(&out, SB_EGRESS_CONF_MAX);
    int rc = -1, mfd = -1;
    size_t n = 0;
    for (size_t i = 0; i < p->n_net_secret && i < SB_EGRESS_MAX_SECRETS; i++) {
        sb_egress_secret_spec_t s;
        if (sb_egress_secret_spec_parse(p->net_secret[i], &s, err) < 0)
            goto out;
        sb_egress_secret_t *e = &c->s[c->n++];
        snprintf(e->host, sizeof e->host, "%s", s.host);
        snprintf(e->header, sizeof e->header, "%s", s.header);
        e->plain = s.plain;
        const char *chain = sb_egress_ca_chain_pem(sb->egress_ca, s.host);
        e->chain_pem = chain ? xstrdup(chain) : NULL;
        if (!chain || s_read_secret(&s, e, err) < 0) {
            if (!chain)
                err_set(err, ERR_SANDBOX, "--net-secret %s: no leaf", s.host);
            goto out;
        }
    }
    c->leaf_key_pem = xstrdup(sb_egress_ca_leaf_key_pem(sb->egress_ca));
    if (p->net_ca) {
        if (file_read_small(p->net_ca, S_CA_MAX, false, &c->upstream_ca_pem,
                            &n) < 0) {
            err_errno(err, ERR_USAGE, "--net-ca: cannot read %s", p->net_ca);
            goto out;
        }
    }
    if (sb_egress_conf_encode(c, &out) < 0) {
        err_set(err, ERR_USAGE, "--net-secret: the secrets are too large");
        goto out;
    }
    mfd = memfd_create("jupyter-agent-egress-tls",
                       MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mfd < 0 ||
        (out.len && write(mfd, out.data, out.len) != (ssize_t)out.len) ||
        fcntl(mfd, F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
        err_errno(err, ERR_SANDBOX, "--net-secret: the proxy's memfd");
        goto out;
    }
    *fd = mfd;
    mfd = -1;
    rc = 0;
out:
    if (mfd >= 0)
        close(mfd);
    if (out.data)
        OPENSSL_cleanse(out.data, out.alloc);
    buf_release(&out);
    sb_egress_conf_release(c);
    free(c);
    return rc;
}
