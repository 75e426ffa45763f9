/*
 * sb_egress_secret: --net-secret specs and the proxy's TLS configuration
 * (see sb_egress_secret.h).
 */
#include "sandbox/sb_egress_secret.h"

#include "common/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int
sb_egress_secret_spec_parse(const char *spec, sb_egress_secret_spec_t *s,
                            err_t *err)
{
    memset(s, 0, sizeof *s);
    const char *p = spec;
    if (strncasecmp(p, "http://", 7) == 0) {
        s->plain = true;
        p += 7;
    } else if (strncasecmp(p, "https://", 8) == 0) {
        p += 8;
    }
    const char *colon = strchr(p, ':');
    const char *eq = colon ? strchr(colon, '=') : NULL;
    if (!colon || !eq || eq[1] != '@' || !eq[2])
        return err_set(err, ERR_USAGE,
                       "--net-secret: '%.80s' is not HOST:HEADER=@FILE "
                       "(e.g. api.example.org:Authorization=@token.txt)",
                       spec);
    size_t hn = (size_t)(colon - p), nn = (size_t)(eq - colon - 1);
    if (hn == 0 || hn > SB_EGRESS_HOST_MAX)
        return err_set(err, ERR_USAGE, "--net-secret: no host in '%.80s'",
                       spec);
    memcpy(s->host, p, hn);
    s->host[hn] = '\0';
    uint8_t lit[16];
    int fam;
    if (sb_egress_ip_literal(s->host, lit, &fam) ||
        sb_egress_norm_host(s->host) < 0 || strchr(s->host, '*'))
        return err_set(err, ERR_USAGE,
                       "--net-secret: '%.80s' is not a DNS name (one host, "
                       "no IP address, no wildcard, no port)",
                       s->host);
    if (nn > SB_EGRESS_HEADER_MAX)
        nn = SB_EGRESS_HEADER_MAX + 1; /* refused below */
    char name[SB_EGRESS_HEADER_MAX + 2];
    memcpy(name, colon + 1, nn < sizeof name ? nn : sizeof name - 1);
    name[nn < sizeof name ? nn : sizeof name - 1] = '\0';
    if (nn > SB_EGRESS_HEADER_MAX || !sb_egress_h1_header_ok(name))
        return err_set(err, ERR_USAGE,
                       "--net-secret: '%.70s' cannot be a secret's header "
                       "(a token of at most %d characters, not one that "
                       "frames or routes the request: Host, Content-Length, "
                       "Transfer-Encoding, Connection, Upgrade, Proxy-*...)",
                       name, SB_EGRESS_HEADER_MAX);
    memcpy(s->header, name, nn + 1); /* nn <= SB_EGRESS_HEADER_MAX */
    s->file = eq + 2;
    return 0;
}

int
sb_egress_secret_value_ok(const char *v, size_t len, const char **why)
{
    if (len == 0) {
        *why = "it is empty";
        return -1;
    }
    if (len > SB_EGRESS_SECRET_MAX) {
        *why = "it is over 8 KiB";
        return -1;
    }
    for (size_t i = 0; i < len; i++)
        if (v[i] == '\r' || v[i] == '\n' || v[i] == '\0') {
            *why = "it holds a line break or NUL byte (only one trailing "
                   "newline is dropped)";
            return -1;
        }
    return 0;
}

static int
s_put(buf_t *out, const char *tag, const char *data, size_t len)
{
    if (!data)
        return 0;
    if (buf_printf(out, "%s %zu\n", tag, len) < 0 ||
        buf_append(out, data, len) < 0 || buf_append(out, "\n", 1) < 0)
        return -1;
    return 0;
}

int
sb_egress_conf_encode(const sb_egress_conf_t *c, buf_t *out)
{
    int rc = s_put(out, "key", c->leaf_key_pem,
                   c->leaf_key_pem ? strlen(c->leaf_key_pem) : 0);
    rc |= s_put(out, "upca", c->upstream_ca_pem,
                c->upstream_ca_pem ? strlen(c->upstream_ca_pem) : 0);
    for (size_t i = 0; i < c->n; i++) {
        const sb_egress_secret_t *s = &c->s[i];
        rc |= s_put(out, "host", s->host, strlen(s->host));
        rc |= s_put(out, "header", s->header, strlen(s->header));
        rc |= s_put(out, "plain", s->plain ? "1" : "0", 1);
        rc |= s_put(out, "value", s->value, s->value_len);
        rc |= s_put(out, "chain", s->chain_pem,
                    s->chain_pem ? strlen(s->chain_pem) : 0);
    }
    return rc ? -1 : 0;
}

/* A copy of n bytes, NUL-terminated. */
static char *
s_dup(const char *p, size_t n)
{
    char *d = xmalloc(n + 1);
    memcpy(d, p, n);
    d[n] = '\0';
    return d;
}

int
sb_egress_conf_decode(const char *data, size_t len, sb_egress_conf_t *c,
                      err_t *err)
{
    memset(c, 0, sizeof *c);
    size_t at = 0;
    sb_egress_secret_t *cur = NULL;
    while (at < len) {
        const char *nl = memchr(data + at, '\n', len - at);
        const char *sp =
            nl ? memchr(data + at, ' ', (size_t)(nl - data - at)) : NULL;
        if (!sp)
            goto bad;
        char tag[8] = "";
        size_t tl = (size_t)(sp - data - at);
        if (tl >= sizeof tag)
            goto bad;
        memcpy(tag, data + at, tl);
        char *end = NULL;
        unsigned long n = strtoul(sp + 1, &end, 10);
        if (end != nl || n > len)
            goto bad;
        size_t v = (size_t)(nl + 1 - data);
        if (v + n + 1 > len || data[v + n] != '\n')
            goto bad;
        const char *val = data + v;
        at = v + n + 1;
        if (strcmp(tag, "key") == 0 && !c->leaf_key_pem) {
            c->leaf_key_pem = s_dup(val, n);
        } else if (strcmp(tag, "upca") == 0 && !c->upstream_ca_pem) {
            c->upstream_ca_pem = s_dup(val, n);
        } else if (strcmp(tag, "host") == 0) {
            if (c->n == SB_EGRESS_MAX_SECRETS || n == 0 ||
                n > SB_EGRESS_HOST_MAX)
                goto bad;
            cur = &c->s[c->n++];
            memcpy(cur->host, val, n);
        } else if (!cur) {
            goto bad;
        } else if (strcmp(tag, "header") == 0 && n <= SB_EGRESS_HEADER_MAX) {
            memcpy(cur->header, val, n);
            cur->header[n] = '\0';
        } else if (strcmp(tag, "plain") == 0 && n == 1) {
            cur->plain = val[0] == '1';
        } else if (strcmp(tag, "value") == 0 && !cur->value) {
            cur->value = s_dup(val, n);
            cur->value_len = n;
        } else if (strcmp(tag, "chain") == 0 && !cur->chain_pem) {
            cur->chain_pem = s_dup(val, n);
        } else {
            goto bad;
        }
    }
    for (size_t i = 0; i < c->n; i++) {
        const char *why = NULL;
        if (!c->s[i].value || !c->s[i].chain_pem ||
            !sb_egress_h1_header_ok(c->s[i].header) ||
            sb_egress_secret_value_ok(c->s[i].value, c->s[i].value_len, &why) <
                0)
            goto bad;
    }
    if (c->n && !c->leaf_key_pem)
        goto bad;
    return 0;
bad:
    sb_egress_conf_release(c);
    return err_set(err, ERR_USAGE,
                   "egress proxy: the TLS configuration (fd 7) is malformed");
}

static void
s_wipe_free(char *p)
{
    if (p) {
        explicit_bzero(p, strlen(p));
        free(p);
    }
}

void
sb_egress_conf_release(sb_egress_conf_t *c)
{
    s_wipe_free(c->leaf_key_pem);
    s_wipe_free(c->upstream_ca_pem);
    for (size_t i = 0; i < c->n; i++) {
        if (c->s[i].value) {
            explicit_bzero(c->s[i].value, c->s[i].value_len);
            free(c->s[i].value);
        }
        free(c->s[i].chain_pem);
    }
    memset(c, 0, sizeof *c);
}
