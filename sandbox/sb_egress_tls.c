/*
 * sb_egress_tls: TLS termination for --net-secret hosts (see
 * sb_egress_tls.h). The contexts are built once, before the proxy drops
 * privileges, and only read afterwards by the connections' threads.
 */
#include "sandbox/sb_egress_tls.h"

#include "common/clock.h"
#include "common/xalloc.h"
#include "sandbox/sb_egress_ca.h"
#include "sandbox/sb_egress_h1.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define S_HANDSHAKE_MS 10000 /* each handshake, as for the ClientHello */
#define S_IO 16384           /* one read or write */
#define S_OUT_HIGH 65536     /* stop reading the box past this much queued */

static sb_egress_conf_t s_conf;
static SSL_CTX *s_box_ctx[SB_EGRESS_MAX_SECRETS]; /* per host: its leaf */
static SSL_CTX *s_up_ctx;

static const unsigned char s_h11[] = "\x08http/1.1";

static int
s_ossl(err_t *err, const char *what)
{
    return sb_egress_ossl_fail(err, "egress proxy", what);
}

/* ALPN: http/1.1 when offered, else none (the client then speaks 1.1). */
static int
s_alpn(SSL *s, const unsigned char **out, unsigned char *outlen,
       const unsigned char *in, unsigned inlen, void *arg)
{
    (void)s;
    (void)arg;
    unsigned char *o = NULL;
    if (SSL_select_next_proto(&o, outlen, s_h11, sizeof s_h11 - 1, in, inlen) ==
        OPENSSL_NPN_NEGOTIATED) {
        *out = o;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

/* The SNI must be the CONNECT host (the SSL's app data). */
static int
s_sni(SSL *s, int *al, void *arg)
{
    (void)arg;
    const char *want = SSL_get_app_data(s);
    const char *got = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name);
    if (!want || !got || strcasecmp(got, want) != 0) {
        *al = SSL_AD_UNRECOGNIZED_NAME;
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *
s_box_ctx_new(const char *key_pem, const char *chain_pem, err_t *err)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    BIO *kb = BIO_new_mem_buf(key_pem, -1);
    BIO *cb = BIO_new_mem_buf(chain_pem, -1);
    EVP_PKEY *key = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
    X509 *leaf = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
    bool ok = ctx && key && leaf &&
              SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) &&
              SSL_CTX_use_certificate(ctx, leaf) &&
              SSL_CTX_use_PrivateKey(ctx, key) &&
              SSL_CTX_check_private_key(ctx);
    X509 *more;
    while (ok && cb && (more = PEM_read_bio_X509(cb, NULL, NULL, NULL))) {
        ok = SSL_CTX_add0_chain_cert(ctx, more);
        if (!ok)
            X509_free(more);
    }
    ERR_clear_error(); /* the end of the chain's PEM */
    X509_free(leaf);
    EVP_PKEY_free(key);
    BIO_free(kb);
    BIO_free(cb);
    if (!ok) {
        SSL_CTX_free(ctx);
        s_ossl(err, "loading a leaf certificate");
        return NULL;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET |
                                 SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_alpn_select_cb(ctx, s_alpn, NULL);
    SSL_CTX_set_tlsext_servername_callback(ctx, s_sni);
    return ctx;
}

static SSL_CTX *
s_up_ctx_new(const char *extra_pem, err_t *err)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
        !SSL_CTX_set_default_verify_paths(ctx) ||
        SSL_CTX_set_alpn_protos(ctx, s_h11, sizeof s_h11 - 1) != 0) {
        SSL_CTX_free(ctx);
        s_ossl(err, "setting up upstream TLS with the host's trust store");
        return NULL;
    }
    if (extra_pem) { /* --net-ca */
        X509_STORE *st = SSL_CTX_get_cert_store(ctx);
        BIO *b = BIO_new_mem_buf(extra_pem, -1);
        X509 *x;
        int n = 0;
        while (b && (x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
            X509_STORE_add_cert(st, x);
            X509_free(x);
            n++;
        }
        BIO_free(b);
        ERR_clear_error();
        if (n == 0) {
            SSL_CTX_free(ctx);
            err_set(err, ERR_USAGE,
                    "egress proxy: --net-ca holds no PEM certificate");
            return NULL;
        }
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return ctx;
}

int
sb_egress_tls_load(int fd, err_t *err)
{
    buf_t b;
    buf_init(&b, SB_EGRESS_CONF_MAX);
    char chunk[4096];
    int rc = -1;
    for (;;) {
        ssize_t n = pread(fd, chunk, sizeof chunk, (off_t)b.len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err_errno(err, ERR_SANDBOX, "egress proxy: reading fd %d", fd);
            goto out;
        }
        if (n == 0)
            break;
        if (buf_append(&b, chunk, (size_t)n) < 0) {
            err_set(err, ERR_SANDBOX, "egress proxy: configuration too big");
            goto out;
        }
    }
    if (sb_egress_conf_decode(b.data ? b.data : "", b.len, &s_conf, err) < 0)
        goto out;
    if (s_conf.n && !(s_up_ctx = s_up_ctx_new(s_conf.upstream_ca_pem, err)))
        goto out;
    for (size_t i = 0; i < s_conf.n; i++)
        if (!(s_box_ctx[i] = s_box_ctx_new(s_conf.leaf_key_pem,
                                           s_conf.s[i].chain_pem, err)))
            goto out;
    rc = 0;
out:
    /* The leaf key now lives in the contexts only. */
    if (s_conf.leaf_key_pem)
        OPENSSL_cleanse(s_conf.leaf_key_pem, strlen(s_conf.leaf_key_pem));
    if (b.data)
        OPENSSL_cleanse(b.data, b.len);
    OPENSSL_cleanse(chunk, sizeof chunk);
    buf_release(&b);
    return rc;
}

static int
s_index(const char *host)
{
    for (size_t i = 0; i < s_conf.n; i++)
        if (strcmp(s_conf.s[i].host, host) == 0)
            return (int)i;
    return -1;
}

const sb_egress_secret_t *
sb_egress_tls_secret(const char *host)
{
    int i = s_index(host);
    return i < 0 ? NULL : &s_conf.s[i];
}

/* Drive a handshake on non-blocking `fd` until done or `deadline`. */
static int
s_handshake(SSL *s, int fd, int64_t deadline)
{
    for (;;) {
        int r = SSL_do_handshake(s);
        if (r == 1)
            return 0;
        int e = SSL_get_error(s, r);
        short ev = e == SSL_ERROR_WANT_READ    ? POLLIN
                   : e == SSL_ERROR_WANT_WRITE ? POLLOUT
                                               : 0;
        int64_t left = deadline - clock_mono_ms();
        if (!ev || left <= 0)
            return -1;
        struct pollfd pf = {.fd = fd, .events = ev};
        if (poll(&pf, 1, (int)left) == 0)
            return -1;
    }
}

static const char *
s_ossl_why(void)
{
    static __thread char e[200];
    unsigned long code = ERR_get_error();
    ERR_clear_error();
    if (!code)
        return "the peer closed or went silent";
    ERR_error_string_n(code, e, sizeof e);
    return e;
}

static int
s_charge(uint64_t max, uint64_t *mine, uint64_t *shared, uint64_t n)
{
    uint64_t total =
        shared ? __atomic_add_fetch(shared, n, __ATOMIC_RELAXED) : *mine + n;
    *mine += n;
    return max && total > max ? -1 : 0;
}

/* The two TLS streams of one terminated connection. */
typedef struct s_tunnel {
    SSL *box, *up;
    int box_fd, up_fd;
    sb_egress_h1_t *h1;
    sb_egress_inject_t inj;
    buf_t to_up;     /* rewritten requests not yet written upstream */
    size_t up_off;   /* written of to_up */
    size_t up_retry; /* length of a write to retry (OpenSSL's rule) */
    char dn[S_IO];   /* a response piece for the box */
    size_t dn_len, dn_off;
    bool box_eof, up_eof, up_closed, refused;
    short box_ev, up_ev; /* what the last attempts wait for */
} s_tunnel_t;

static void
s_want(SSL *s, int r, short *ev, bool *eof)
{
    int e = SSL_get_error(s, r);
    if (e == SSL_ERROR_WANT_READ)
        *ev |= POLLIN;
    else if (e == SSL_ERROR_WANT_WRITE)
        *ev |= POLLOUT;
    else {
        ERR_clear_error();
        *eof = true;
    }
}

/* A refusal the box reads as the answer to its request. */
static void
s_refuse_request(s_tunnel_t *t, int status, const char *why)
{
    char body[600];
    int bn = snprintf(body, sizeof body,
                      "jupyter-agent egress: refused a request to %s: %s\n",
                      t->inj.host, why);
    if (bn < 0 || (size_t)bn >= sizeof body)
        bn = (int)sizeof body - 1;
    int n = snprintf(t->dn, sizeof t->dn,
                     "HTTP/1.1 %d Refused by the egress proxy\r\nContent-Type: "
                     "text/plain; charset=utf-8\r\nContent-Length: %d\r\n"
                     "Connection: close\r\n\r\n%s",
                     status, bn, body);
    t->dn_len = n > 0 && (size_t)n < sizeof t->dn ? (size_t)n : 0;
    t->dn_off = 0;
    t->refused = true;
    t->up_eof = true; /* nothing more from upstream reaches the box */
}

/* Move what can move without waiting; true if anything did. -1 when a
 * cap ends the connection (`end` says which). */
static int
s_step(s_tunnel_t *t, sb_egress_tls_job_t *j, sb_egress_pump_end_t *end)
{
    int moved = 0;
    sb_egress_pump_t *pp = j->pp;
    char in[S_IO];
    if (!t->box_eof && !t->refused && t->to_up.len - t->up_off < S_OUT_HIGH) {
        int r = SSL_read(t->box, in, sizeof in);
        if (r > 0) {
            int status = 0;
            const char *why = NULL;
            if (sb_egress_h1_feed(t->h1, &t->inj, in, (size_t)r, &t->to_up,
                                  &status, &why) < 0) {
                snprintf(j->why, sizeof j->why, "refused a request (%d): %s",
                         status, why);
                /* Responses still queued go first, then the refusal. */
                while (t->dn_len > t->dn_off) {
                    int w = SSL_write(t->box, t->dn + t->dn_off,
                                      (int)(t->dn_len - t->dn_off));
                    if (w <= 0)
                        break;
                    t->dn_off += (size_t)w;
                }
                s_refuse_request(t, status, why);
            }
            moved = 1;
        } else {
            s_want(t->box, r, &t->box_ev, &t->box_eof);
            moved |= t->box_eof;
        }
    }
    if (t->to_up.len > t->up_off) {
        size_t len = t->up_retry ? t->up_retry : t->to_up.len - t->up_off;
        if (len > S_IO)
            len = S_IO;
        int r = SSL_write(t->up, t->to_up.data + t->up_off, (int)len);
        if (r > 0) {
            t->up_retry = 0;
            t->up_off += (size_t)r;
            if (s_charge(pp->max_up, &pp->up, pp->shared_up, (uint64_t)r)) {
                *end = SB_PUMP_CAP_UP;
                return -1;
            }
            if (t->up_off == t->to_up.len) {
                buf_reset(&t->to_up);
                t->up_off = 0;
            }
            moved = 1;
        } else {
            t->up_retry = len;
            bool gone = false;
            s_want(t->up, r, &t->up_ev, &gone);
            if (gone) {
                *end = SB_PUMP_ERROR;
                return -1;
            }
        }
    } else if ((t->box_eof || t->refused) && !t->up_closed) {
        SSL_shutdown(t->up); /* the box is done sending: close_notify */
        t->up_closed = true;
        moved = 1;
    }
    if (!t->up_eof && t->dn_len == 0) {
        int r = SSL_read(t->up, t->dn, sizeof t->dn);
        if (r > 0) {
            t->dn_len = (size_t)r;
            t->dn_off = 0;
            if (s_charge(pp->max_down, &pp->down, pp->shared_down,
                         (uint64_t)r)) {
                *end = SB_PUMP_CAP_DOWN;
                return -1;
            }
            moved = 1;
        } else {
            s_want(t->up, r, &t->up_ev, &t->up_eof);
            moved |= t->up_eof;
        }
    }
    if (t->dn_len > t->dn_off) {
        int r =
            SSL_write(t->box, t->dn + t->dn_off, (int)(t->dn_len - t->dn_off));
        if (r > 0) {
            t->dn_off += (size_t)r;
            if (t->dn_off == t->dn_len)
                t->dn_len = t->dn_off = 0;
            moved = 1;
        } else {
            bool gone = false;
            s_want(t->box, r, &t->box_ev, &gone);
            if (gone) {
                *end = SB_PUMP_ERROR;
                return -1;
            }
        }
    }
    return moved;
}

/* Pump the tunnel until both ways are done, a cap or a time limit. */
static sb_egress_pump_end_t
s_run(s_tunnel_t *t, sb_egress_tls_job_t *j)
{
    sb_egress_pump_t *pp = j->pp;
    int64_t last = clock_mono_ms();
    for (;;) {
        t->box_ev = t->up_ev = 0;
        sb_egress_pump_end_t end = SB_PUMP_DONE;
        int m = s_step(t, j, &end);
        if (m < 0)
            return end;
        bool drained = t->dn_len == 0 && t->to_up.len == t->up_off;
        if (t->up_eof && t->dn_len == 0)
            return SB_PUMP_DONE; /* upstream done and all of it delivered */
        if (t->box_eof && drained && t->up_eof)
            return SB_PUMP_DONE;
        int64_t now = clock_mono_ms();
        if (m > 0) {
            last = now;
            continue;
        }
        if (!t->box_ev && !t->up_ev)
            return SB_PUMP_DONE; /* nothing left that could move */
        if (pp->deadline_ms && now >= pp->deadline_ms)
            return SB_PUMP_TIMEOUT;
        if (pp->idle_ms && now - last >= pp->idle_ms)
            return SB_PUMP_IDLE;
        int64_t wait = pp->idle_ms ? last + pp->idle_ms - now : 60000;
        if (pp->deadline_ms && pp->deadline_ms - now < wait)
            wait = pp->deadline_ms - now;
        struct pollfd pf[2] = {
            {.fd = t->box_ev ? t->box_fd : -1, .events = t->box_ev},
            {.fd = t->up_ev ? t->up_fd : -1, .events = t->up_ev}};
        if (poll(pf, 2, (int)wait) < 0 && errno != EINTR)
            return SB_PUMP_ERROR;
    }
}

static void
s_nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

int
sb_egress_tls_serve(sb_egress_tls_job_t *j)
{
    int i = s_index(j->host);
    const sb_egress_secret_t *sec = i >= 0 ? &s_conf.s[i] : NULL;
    s_tunnel_t *t = xcalloc(1, sizeof *t);
    int rc = -1;
    j->status = 502;
    buf_init(&t->to_up, 0);
    t->box_fd = j->box;
    t->up_fd = j->up;
    if (!sec || !s_up_ctx) {
        snprintf(j->why, sizeof j->why, "no TLS configuration for %s", j->host);
        goto out;
    }
    s_nonblock(j->up);
    t->up = SSL_new(s_up_ctx);
    if (!t->up || !SSL_set_fd(t->up, j->up) ||
        !SSL_set_tlsext_host_name(t->up, j->host) ||
        !SSL_set1_host(t->up, j->host)) {
        snprintf(j->why, sizeof j->why, "cannot set up TLS to %s: %s", j->host,
                 s_ossl_why());
        goto out;
    }
    SSL_set_connect_state(t->up);
    if (s_handshake(t->up, j->up, clock_mono_ms() + S_HANDSHAKE_MS) < 0) {
        long v = SSL_get_verify_result(t->up);
        if (v != X509_V_OK)
            snprintf(j->why, sizeof j->why,
                     "the upstream certificate of %s port %u is not trusted: "
                     "%s (checked against the host's trust store, --net-ca "
                     "and the name %s); nothing was sent",
                     j->host, j->port, X509_verify_cert_error_string(v),
                     j->host);
        else
            snprintf(j->why, sizeof j->why,
                     "the TLS handshake with %s port %u failed: %s", j->host,
                     j->port, s_ossl_why());
        ERR_clear_error();
        goto out;
    }
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    if (sb_egress_write_all(j->box, ok, sizeof ok - 1) < 0) {
        snprintf(j->why, sizeof j->why, "the box went away");
        goto out;
    }
    rc = 0; /* told 200: from here the connection counts as allowed */
    s_nonblock(j->box);
    t->box = SSL_new(s_box_ctx[i]);
    if (!t->box || !SSL_set_fd(t->box, j->box)) {
        snprintf(j->why, sizeof j->why, "cannot set up TLS to the box");
        goto out;
    }
    SSL_set_app_data(t->box, (void *)j->host);
    SSL_set_accept_state(t->box);
    if (s_handshake(t->box, j->box, clock_mono_ms() + S_HANDSHAKE_MS) < 0) {
        snprintf(j->why, sizeof j->why,
                 "the box's TLS handshake failed (its SNI must be %s and it "
                 "must trust the session CA): %s",
                 j->host, s_ossl_why());
        goto out;
    }
    t->h1 = xmalloc(sizeof *t->h1);
    sb_egress_h1_init(t->h1);
    t->inj = (sb_egress_inject_t){.host = j->host,
                                  .port = j->port,
                                  .header = sec->header,
                                  .value = sec->value,
                                  .value_len = sec->value_len};
    bool refused_before = false;
    sb_egress_pump_end_t end = s_run(t, j);
    refused_before = t->refused;
    if (t->refused) /* deliver the refusal */
        while (t->dn_len > t->dn_off) {
            int w = SSL_write(t->box, t->dn + t->dn_off,
                              (int)(t->dn_len - t->dn_off));
            if (w <= 0 && SSL_get_error(t->box, w) == SSL_ERROR_WANT_WRITE) {
                struct pollfd pf = {.fd = j->box, .events = POLLOUT};
                if (poll(&pf, 1, 2000) > 0)
                    continue;
            }
            if (w <= 0)
                break;
            t->dn_off += (size_t)w;
        }
    SSL_shutdown(t->box);
    j->requests = t->h1->requests;
    if (!refused_before)
        snprintf(j->why, sizeof j->why,
                 "%s; TLS terminated for the --net-secret (leaf for %s), %u "
                 "request%s with %s added",
                 sb_egress_pump_end_str(end), j->host, j->requests,
                 j->requests == 1 ? "" : "s", sec->header);
out:
    ERR_clear_error();
    if (t->h1)
        explicit_bzero(t->h1, sizeof *t->h1);
    free(t->h1);
    if (t->to_up.data)
        explicit_bzero(t->to_up.data, t->to_up.alloc);
    buf_release(&t->to_up);
    SSL_free(t->box);
    SSL_free(t->up);
    free(t);
    return rc;
}
