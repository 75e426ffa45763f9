/*
 * --net-secret without sockets: the request stream rewritten inside a
 * terminated TLS connection (the secret's header in, the box's out, bodies
 * framed so keep-alive works, what cannot be framed safely refused), the
 * spec and the proxy's configuration, and the session CA's leaves.
 */
#include "sandbox/sb_egress_ca.h"
#include "sandbox/sb_egress_h1.h"
#include "sandbox/sb_egress_secret.h"
#include "tests/tap.h"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const sb_egress_inject_t s_inj = {.host = "api.test",
                                         .port = 443,
                                         .header = "Authorization",
                                         .value = "Bearer s3",
                                         .value_len = 9};

static sb_egress_h1_t s_p;
static buf_t s_out;
static int s_status;
static const char *s_why;

/* Feed `in` whole (step 0) or `step` bytes at a time. 0 or -1. */
static int
s_feed(const char *in, size_t step)
{
    sb_egress_h1_init(&s_p);
    buf_reset(&s_out);
    s_status = 0;
    s_why = NULL;
    size_t n = strlen(in);
    if (!step)
        step = n ? n : 1;
    for (size_t i = 0; i < n; i += step) {
        size_t k = n - i < step ? n - i : step;
        if (sb_egress_h1_feed(&s_p, &s_inj, in + i, k, &s_out, &s_status,
                              &s_why) < 0)
            return -1;
    }
    return 0;
}

static int
s_refused(const char *in)
{
    return s_feed(in, 0) < 0 ? s_status : 0;
}

static void
test_heads(void)
{
    is_int(
        s_feed("GET /x HTTP/1.1\r\nHost: api.test\r\nAccept: */*\r\n\r\n", 0),
        0, "a plain GET passes");
    is_str(buf_cstr(&s_out),
           "GET /x HTTP/1.1\r\nHost: api.test\r\nAccept: */*\r\n"
           "Authorization: Bearer s3\r\n\r\n",
           "the secret's header is added at the end of the head");
    s_feed("GET / HTTP/1.1\r\nauthorization: guess\r\nHost: api.test:443\r\n"
           "AUTHORIZATION: two\r\n\r\n",
           0);
    is_str(buf_cstr(&s_out),
           "GET / HTTP/1.1\r\nHost: api.test:443\r\nAuthorization: Bearer "
           "s3\r\n\r\n",
           "every header the box sent with that name is dropped (any case)");
    const char *two = "POST /a HTTP/1.1\r\nHost: api.test\r\nContent-Length: "
                      "5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: api.test\r\n\r\n";
    ok(s_feed(two, 0) == 0 && s_p.requests == 2 &&
           strstr(buf_cstr(&s_out), "\r\n\r\nhelloGET /b"),
       "a Content-Length body passes and the next request is found after it");
    char whole[1024];
    snprintf(whole, sizeof whole, "%s", buf_cstr(&s_out));
    ok(s_feed(two, 1) == 0 && strcmp(buf_cstr(&s_out), whole) == 0,
       "fed a byte at a time, the output is the same");
    const char *chunked =
        "POST /c HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n"
        "\r\n5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n"
        "Authorization: t\r\n\r\nGET /d HTTP/1.1\r\nHost: api.test\r\n\r\n";
    ok(s_feed(chunked, 0) == 0 && s_p.requests == 2 &&
           strstr(buf_cstr(&s_out), "0123456789\r\n0\r\nX-T: 1\r\n\r\nGET /d"),
       "a chunked body with trailers passes, then the next request");
    ok(!strstr(buf_cstr(&s_out), "Authorization: t"),
       "a trailer named like the secret's header is dropped");
    snprintf(whole, sizeof whole, "%s", buf_cstr(&s_out));
    ok(s_feed(chunked, 3) == 0 && strcmp(buf_cstr(&s_out), whole) == 0,
       "the chunked stream split anywhere gives the same output");
    ok(s_feed("GET /ws HTTP/1.1\r\nHost: api.test\r\nUpgrade: websocket\r\n"
              "\r\n\x81\x05hello GET / HTTP/1.1\r\n\r\n",
              0) == 0 &&
           s_p.state == SB_H1_RAW && s_p.requests == 1,
       "after an Upgrade the stream passes unparsed");
    ok(s_feed("OPTIONS * HTTP/1.1\r\nHost: api.test\r\n\r\n", 0) == 0,
       "OPTIONS * passes");
}

static void
test_refusals(void)
{
    is_int(s_refused("POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: "
                     "3\r\nTransfer-Encoding: chunked\r\n\r\n"),
           400, "Content-Length with Transfer-Encoding: 400 (smuggling)");
    is_int(s_refused("POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: "
                     "gzip, chunked\r\n\r\n"),
           501, "a transfer coding other than chunked: 501");
    is_int(s_refused("POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: "
                     "3\r\nContent-Length: 3\r\n\r\n"),
           400, "two Content-Length headers: 400");
    is_int(s_refused("POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: "
                     "+3\r\n\r\n"),
           400, "a Content-Length that is not digits: 400");
    is_int(s_refused("GET / HTTP/1.1\r\nHost: api.test\r\nX: a\r\n b\r\n\r\n"),
           400, "obsolete line folding: 400");
    is_int(s_refused("GET / HTTP/1.1\r\nHost: api.test\nX: a\r\n\r\n"), 400,
           "a bare LF: 400");
    is_int(s_refused("GET / HTTP/1.1\r\nHost: other.test\r\n\r\n"), 403,
           "a Host other than the CONNECT host: 403");
    is_int(s_refused("GET / HTTP/1.1\r\nHost: api.test:8443\r\n\r\n"), 403,
           "the right host on another port: 403");
    is_int(s_refused("GET / HTTP/1.1\r\nHost: api.test\r\nHost: api.test\r\n"
                     "\r\n"),
           400, "two Host headers: 400");
    is_int(s_refused("GET / HTTP/1.1\r\nAccept: x\r\n\r\n"), 400,
           "no Host: 400");
    is_int(s_refused("TRACE / HTTP/1.1\r\nHost: api.test\r\n\r\n"), 405,
           "TRACE: 405 (it would echo the secret)");
    is_int(s_refused("CONNECT a:1 HTTP/1.1\r\nHost: api.test\r\n\r\n"), 405,
           "CONNECT inside the tunnel: 405");
    is_int(
        s_refused("GET http://other.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n"),
        400, "an absolute-form target: 400");
    is_int(s_refused("GET / HTTP/2.0\r\nHost: api.test\r\n\r\n"), 400,
           "a version other than HTTP/1.x: 400");
    is_int(s_refused("POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: "
                     "chunked\r\n\r\n1ffffffffffffffff\r\n"),
           400, "a chunk size past 2^60: 400");
    is_int(s_refused("POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: "
                     "chunked\r\n\r\n2\r\nabXY"),
           400, "chunk data not followed by CRLF: 400");
    char *big = malloc(20000);
    memset(big, 'a', 19999);
    memcpy(big, "GET / HTTP/1.1\r\nHost: api.test\r\nX: ", 35);
    big[19999] = '\0';
    is_int(s_refused(big), 431, "a head over 16 KiB: 431");
    free(big);
    ok(sb_egress_h1_feed(&s_p, &s_inj, "GET", 3, &s_out, &s_status, &s_why) < 0,
       "after a refusal nothing more passes");
    ok(sb_egress_h1_header_ok("Authorization") &&
           sb_egress_h1_header_ok("X-Api-Key") &&
           !sb_egress_h1_header_ok("Host") &&
           !sb_egress_h1_header_ok("content-length") &&
           !sb_egress_h1_header_ok("Proxy-Authorization") &&
           !sb_egress_h1_header_ok("X Y") && !sb_egress_h1_header_ok(""),
       "a secret's header may not frame or route the request");
}

static void
test_spec_and_conf(void)
{
    sb_egress_secret_spec_t s;
    ok(sb_egress_secret_spec_parse("api.test:Authorization=@tok", &s, NULL) ==
               0 &&
           !strcmp(s.host, "api.test") && !strcmp(s.header, "Authorization") &&
           !strcmp(s.file, "tok") && !s.plain,
       "HOST:HEADER=@FILE parses");
    ok(sb_egress_secret_spec_parse("http://API.Test.:X-Key=@/a:b=c", &s,
                                   NULL) == 0 &&
           !strcmp(s.host, "api.test") && s.plain && !strcmp(s.file, "/a:b=c"),
       "http:// marks plain HTTP too; the host is normalised");
    err_t err = {0};
    ok(sb_egress_secret_spec_parse("10.0.0.1:A=@f", &s, &err) < 0 &&
           err.code == ERR_USAGE,
       "an IP address is refused (the CA names DNS hosts only)");
    ok(sb_egress_secret_spec_parse("*.test:A=@f", &s, NULL) < 0,
       "a wildcard is refused");
    ok(sb_egress_secret_spec_parse("api.test:Host=@f", &s, NULL) < 0,
       "a framing header is refused");
    ok(sb_egress_secret_spec_parse("api.test:A=f", &s, NULL) < 0,
       "a value without @FILE is refused (secrets never on the command line)");
    const char *why;
    ok(sb_egress_secret_value_ok("a\r\nX: y", 7, &why) < 0 &&
           sb_egress_secret_value_ok("Bearer x", 8, &why) == 0,
       "a value with a line break is refused (no header injection)");

    sb_egress_conf_t c = {0}, d;
    c.leaf_key_pem = strdup("KEY");
    c.n = 2;
    snprintf(c.s[0].host, sizeof c.s[0].host, "a.test");
    snprintf(c.s[0].header, sizeof c.s[0].header, "Authorization");
    c.s[0].value = strdup("v 1\tx");
    c.s[0].value_len = 5;
    c.s[0].chain_pem = strdup("PEM\nA\n");
    snprintf(c.s[1].host, sizeof c.s[1].host, "b.test");
    snprintf(c.s[1].header, sizeof c.s[1].header, "X-K");
    c.s[1].plain = true;
    c.s[1].value = strdup("w");
    c.s[1].value_len = 1;
    c.s[1].chain_pem = strdup("PEM B");
    buf_t b;
    buf_init(&b, 0);
    ok(sb_egress_conf_encode(&c, &b) == 0 &&
           sb_egress_conf_decode(b.data, b.len, &d, NULL) == 0 && d.n == 2 &&
           !strcmp(d.s[0].value, "v 1\tx") && d.s[1].plain &&
           !strcmp(d.s[1].header, "X-K") && !strcmp(d.leaf_key_pem, "KEY") &&
           !strcmp(d.s[0].chain_pem, "PEM\nA\n"),
       "the proxy's configuration round-trips");
    sb_egress_conf_release(&d);
    b.data[b.len - 2] ^= 1; /* inside the last record */
    b.data[5] = 'x';        /* the first length */
    ok(sb_egress_conf_decode(b.data, b.len, &d, NULL) < 0,
       "a malformed configuration is refused");
    buf_release(&b);
    sb_egress_conf_release(&c);
}

static void
test_ca(void)
{
    const char *hosts[] = {"api.test", "b.test"};
    err_t err = {0};
    sb_egress_ca_t *ca = sb_egress_ca_new(hosts, 2, &err);
    ok(ca != NULL, "a session CA is made (%s)", err.text);
    if (!ca)
        return;
    is_int((int)sb_egress_ca_leaves(ca), 2, "one leaf per secret host");
    ok(sb_egress_ca_chain_pem(ca, "other.test") == NULL,
       "no leaf for a host without a secret");
    X509_STORE *st = X509_STORE_new();
    BIO *cb = BIO_new_mem_buf(sb_egress_ca_cert_pem(ca), -1);
    X509 *cax = PEM_read_bio_X509(cb, NULL, NULL, NULL);
    X509_STORE_add_cert(st, cax);
    BIO *lb = BIO_new_mem_buf(sb_egress_ca_chain_pem(ca, "api.test"), -1);
    X509 *leaf = PEM_read_bio_X509(lb, NULL, NULL, NULL);
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    X509_STORE_CTX_init(ctx, st, leaf, NULL);
    X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(ctx), "api.test", 0);
    ok(X509_verify_cert(ctx) == 1, "api.test's leaf verifies against the CA");
    X509_STORE_CTX_cleanup(ctx);
    X509_STORE_CTX_init(ctx, st, leaf, NULL);
    X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(ctx), "b.test", 0);
    ok(X509_verify_cert(ctx) != 1, "and not for another name");
    ok(strstr(sb_egress_ca_leaf_key_pem(ca), "PRIVATE KEY") != NULL &&
           !strstr(sb_egress_ca_cert_pem(ca), "PRIVATE"),
       "the leaves' key is there; the CA's own key is not kept");
    X509_STORE_CTX_free(ctx);
    X509_free(leaf);
    X509_free(cax);
    BIO_free(lb);
    BIO_free(cb);
    X509_STORE_free(st);
    sb_egress_ca_destroy(&ca);
    ok(ca == NULL, "destroy clears the caller's pointer");
}

int
main(void)
{
    buf_init(&s_out, 0);
    test_heads();
    test_refusals();
    test_spec_and_conf();
    test_ca();
    buf_release(&s_out);
    return done_testing();
}
