/*
 * sb_egress_proxy: the egress proxy process (see sb_egress_proxy.h).
 */
#include "sandbox/sb_egress_proxy.h"

#include "sandbox/sb_egress_http.h"
#include "sandbox/sb_egress_pump.h"
#include "sandbox/sb_egress_sni.h"
#include "sandbox/sb_egress_tls.h"

#include "common/clock.h"
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_HEAD_SECONDS 10 /* to send the request head, and the ClientHello */
#define S_NOBODY 65534
#define S_BUF (SB_EGRESS_HEAD_MAX + SB_EGRESS_HELLO_MAX + 64)

void
sb_egress_caps_default(sb_egress_caps_t *c)
{
    c->max_conns = 32;
    c->max_up = 1ULL << 30;
    c->max_down = 8ULL << 30;
    c->conn_seconds = 900;
    c->idle_seconds = 120;
    c->connect_seconds = 15;
}

/* One set of rules, shared by the connections accepted under it: a new
 * set (the rules pipe) replaces `s_cur` for the next connection. */
typedef struct s_rules_ref {
    sb_egress_rules_t rules;
    unsigned refs; /* under s_mu */
} s_rules_ref_t;

static pthread_mutex_t s_mu = PTHREAD_MUTEX_INITIALIZER;
static s_rules_ref_t *s_cur; /* under s_mu */
static unsigned s_live;      /* connections open, under s_mu */

static s_rules_ref_t *
s_rules_get(void)
{
    pthread_mutex_lock(&s_mu);
    s_rules_ref_t *r = s_cur;
    r->refs++;
    pthread_mutex_unlock(&s_mu);
    return r;
}

static void
s_rules_put(s_rules_ref_t *r)
{
    pthread_mutex_lock(&s_mu);
    bool last = --r->refs == 0;
    pthread_mutex_unlock(&s_mu);
    if (last)
        free(r);
}

/* One connection being served: what the record will say. */
typedef struct s_conn {
    int fd;             /* the client (the box) */
    int up;             /* upstream, or -1 */
    s_rules_ref_t *ref; /* the rules as they were when it was accepted */
    const sb_egress_rules_t *rules; /* ref's */
    const sb_egress_caps_t *caps;
    uint64_t *totals;    /* shared: [0] up, [1] down */
    sb_egress_rec_t rec; /* filled as we go */
    char host[SB_EGRESS_HOST_MAX + 3];
    char method[16];
    char address[INET6_ADDRSTRLEN + 8];
    char rule[SB_EGRESS_HOST_MAX + 16];
    char sni[SB_EGRESS_HOST_MAX + 1];
    char reason[1024];
    int64_t start_ms;
    const sb_egress_recorder_t *recorder;
    char buf[S_BUF]; /* the request head, then the ClientHello */
} s_conn_t;

/* Printable ASCII copy (for records and messages). */
static void
s_clean(char *dst, size_t size, const char *src)
{
    size_t i = 0;
    for (; src && src[i] && i + 1 < size; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? (char)c : '?';
    }
    dst[i] = '\0';
}

/* Refuse with `status` ("403 Forbidden"): the reason phrase and the body
 * both say `why`, so a client that shows only one still tells the user. */
static void
s_refuse(s_conn_t *c, int code, const char *why)
{
    snprintf(c->reason, sizeof c->reason, "%s", why);
    char msg[1200];
    snprintf(msg, sizeof msg, "jupyter-agent egress: refused %s %s: %s",
             c->method[0] ? c->method : "request",
             c->host[0] ? c->host : "(unparsed)", why);
    char phrase[1200];
    s_clean(phrase, sizeof phrase, msg);
    char head[2600];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; "
                     "charset=utf-8\r\nContent-Length: %zu\r\nConnection: "
                     "close\r\n\r\n%s\n",
                     code, phrase, strlen(msg) + 1, msg);
    if (n > 0)
        sb_egress_write_all(c->fd, head,
                            (uint64_t)n < sizeof head ? (uint64_t)n
                                                      : sizeof head - 1);
}

/* Read the head (to the blank line) into buf; its length, extra bytes
 * after it are kept (*have). -1 on timeout, EOF or overflow. */
static ssize_t
s_read_head(int fd, char *buf, size_t size, size_t *have, int64_t deadline)
{
    *have = 0;
    for (;;) {
        if (*have >= 4) {
            char *e = memmem(buf, *have, "\r\n\r\n", 4);
            if (e)
                return e + 4 - buf;
        }
        if (*have == size)
            return -1;
        int64_t left = deadline - clock_mono_ms();
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
            return -1;
        ssize_t n = read(fd, buf + *have, size - *have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        *have += (size_t)n;
    }
}

static void
s_format_addr(const struct sockaddr *sa, char *buf, size_t size)
{
    const void *a =
        sa->sa_family == AF_INET
            ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
            : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (!inet_ntop(sa->sa_family, a, buf, (socklen_t)size))
        snprintf(buf, size, "?");
}

static const uint8_t *
s_addr_bytes(const struct sockaddr *sa)
{
    return sa->sa_family == AF_INET
               ? (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr
               : (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
}

/* Connect to `sa` within connect_seconds. The socket, or -1. */
static int
s_dial(const struct sockaddr *sa, socklen_t len, int seconds)
{
    int fd =
        socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, sa, len) < 0 && errno != EINPROGRESS)
        goto fail;
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    if (poll(&pf, 1, seconds * 1000) <= 0)
        goto fail;
    int e = 0;
    socklen_t el = sizeof e;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 || e) {
        errno = e;
        goto fail;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
fail:;
    int keep = errno;
    close(fd);
    errno = keep;
    return -1;
}

/* Judge host:port and connect. 0 with c->up open, or -1 after a
 * refusal was sent. */
static int
s_judge_and_dial(s_conn_t *c, unsigned port)
{
    char why[1024], hint[SB_EGRESS_HOST_MAX + 16];
    uint8_t lit[16];
    int fam = 0;
    sb_egress_suggest(c->host, port, hint, sizeof hint);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t sl = 0;
    if (sb_egress_ip_literal(c->host, lit, &fam)) {
        const sb_egress_rule_t *r =
            sb_egress_match_addr(c->rules, lit, fam, port);
        if (!r) {
            snprintf(why, sizeof why,
                     "no rule names the IP address %s on port %u; to allow "
                     "it, add --allow-net %s",
                     c->host, port, hint);
            s_refuse(c, 403, why);
            return -1;
        }
        snprintf(c->rule, sizeof c->rule, "%s", r->text);
        if (fam == AF_INET) {
            struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
            s4->sin_family = AF_INET;
            memcpy(&s4->sin_addr, lit, 4);
            s4->sin_port = htons((uint16_t)port);
            sl = sizeof *s4;
        } else {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
            s6->sin6_family = AF_INET6;
            memcpy(&s6->sin6_addr, lit, 16);
            s6->sin6_port = htons((uint16_t)port);
            sl = sizeof *s6;
        }
    } else {
        char name[SB_EGRESS_HOST_MAX + 3];
        snprintf(name, sizeof name, "%s", c->host);
        if (sb_egress_norm_host(name) < 0) {
            s_refuse(c, 400, "the host is not a DNS name or IP address");
            return -1;
        }
        snprintf(c->host, sizeof c->host, "%s", name);
        sb_egress_suggest(c->host, port, hint, sizeof hint);
        const sb_egress_rule_t *r = sb_egress_match_name(c->rules, name, port);
        if (!r) {
            snprintf(why, sizeof why,
                     "%s port %u is not on the --allow-net list; to allow "
                     "it, add --allow-net %s",
                     name, port, hint);
            s_refuse(c, 403, why);
            return -1;
        }
        snprintf(c->rule, sizeof c->rule, "%s", r->text);
        struct addrinfo hints = {.ai_family = AF_UNSPEC,
                                 .ai_socktype = SOCK_STREAM};
        struct addrinfo *res = NULL;
        char ps[8];
        snprintf(ps, sizeof ps, "%u", port);
        int g = getaddrinfo(name, ps, &hints, &res);
        if (g) {
            snprintf(why, sizeof why, "cannot resolve %s: %s", name,
                     gai_strerror(g));
            s_refuse(c, 502, why);
            return -1;
        }
        why[0] = '\0';
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
                continue;
            const uint8_t *b = s_addr_bytes(ai->ai_addr);
            const char *cls = sb_egress_addr_class(b, ai->ai_family);
            if (cls && !sb_egress_match_addr(c->rules, b, ai->ai_family, 0)) {
                if (!why[0]) {
                    char a[INET6_ADDRSTRLEN];
                    s_format_addr(ai->ai_addr, a, sizeof a);
                    snprintf(c->address, sizeof c->address, "%s", a);
                    snprintf(why, sizeof why,
                             "%s resolves to %s, a %s address, which no "
                             "rule names (refused against DNS rebinding); "
                             "to allow it, add --allow-net %s (or its "
                             "range)",
                             name, a, cls, a);
                }
                continue;
            }
            memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
            sl = ai->ai_addrlen;
            break;
        }
        freeaddrinfo(res);
        if (!sl) {
            s_refuse(c, 403, why[0] ? why : "no usable address");
            return -1;
        }
    }
    s_format_addr((struct sockaddr *)&ss, c->address, sizeof c->address);
    c->up = s_dial((struct sockaddr *)&ss, sl, c->caps->connect_seconds);
    if (c->up >= 0) {
        int one = 1; /* the box's writes go out as they come */
        setsockopt(c->up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (c->up < 0) {
        snprintf(why, sizeof why, "cannot connect to %s port %u (%s): %s",
                 c->host, port, c->address, strerror(errno));
        s_refuse(c, 502, why);
        return -1;
    }
    return 0;
}

/* CONNECT: answer 200, then read the ClientHello and hold its SNI to
 * the CONNECT host before a byte goes upstream. 0 or -1 (refused). */
static int
s_check_hello(s_conn_t *c, char *buf, size_t size, size_t have)
{
    static const unsigned char alert[] = {21, 3, 1, 0, 2, 2, 112};
    int64_t deadline = clock_mono_ms() + S_HEAD_SECONDS * 1000;
    uint8_t lit[16];
    int fam;
    bool is_ip = sb_egress_ip_literal(c->host, lit, &fam);
    for (;;) {
        char name[SB_EGRESS_HOST_MAX + 2];
        sb_egress_sni_rc_t rc = sb_egress_sni_parse((const unsigned char *)buf,
                                                    have, name, sizeof name);
        if (rc == SB_SNI_FOUND) {
            s_clean(c->sni, sizeof c->sni, name);
            if (sb_egress_norm_host(name) == 0 && !is_ip &&
                strcmp(name, c->host) == 0)
                break;
            snprintf(c->reason, sizeof c->reason,
                     "the TLS server name (SNI) '%s' is not the CONNECT "
                     "host '%s'",
                     c->sni, c->host);
            goto refuse;
        }
        if (rc == SB_SNI_NONE) {
            if (is_ip)
                break;
            snprintf(c->reason, sizeof c->reason,
                     "the TLS ClientHello names no server (SNI); CONNECT "
                     "to %s needs it",
                     c->host);
            goto refuse;
        }
        if (rc == SB_SNI_NOT_TLS) {
            snprintf(c->reason, sizeof c->reason,
                     "what followed CONNECT is not a TLS ClientHello; "
                     "only TLS may go through CONNECT");
            goto refuse;
        }
        int64_t left = deadline - clock_mono_ms();
        struct pollfd pf = {.fd = c->fd, .events = POLLIN};
        if (have == size || left <= 0 || poll(&pf, 1, (int)left) <= 0) {
            snprintf(c->reason, sizeof c->reason,
                     "no complete TLS ClientHello within %d s", S_HEAD_SECONDS);
            goto refuse;
        }
        ssize_t n = read(c->fd, buf + have, size - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(c->reason, sizeof c->reason,
                     "the client closed before its ClientHello");
            goto refuse;
        }
        have += (size_t)n;
    }
    c->rec.bytes_up += have;
    return sb_egress_write_all(c->up, buf, have);
refuse:
    sb_egress_write_all(c->fd, alert, sizeof alert);
    return -1;
}

/* Plain HTTP: the head again in origin form, hop-by-hop headers out,
 * "Connection: close" in (one request per connection: a second request
 * could name another host). */
static int
s_forward_plain(s_conn_t *c, const sb_egress_req_t *r, const char *head,
                size_t head_len, const char *rest, size_t rest_len,
                const sb_egress_secret_t *sec)
{
    char out[SB_EGRESS_HEAD_MAX + SB_EGRESS_SECRET_MAX + SB_EGRESS_HEADER_MAX +
             64];
    size_t at = 0;
    const char *path = head + r->path_off;
    int n = snprintf(out, sizeof out, "%s %s%.*s", r->method,
                     r->path_len && path[0] == '/' ? "" : "/", (int)r->path_len,
                     path);
    if (n < 0 || (size_t)n >= sizeof out)
        return -1;
    at = (size_t)n;
    const char *p = head + r->version_off; /* " HTTP/1.x\r\n" */
    const char *eol = memchr(p, '\n', head_len - r->version_off);
    size_t vl = (size_t)(eol + 1 - p);
    memcpy(out + at, p, vl);
    at += vl;
    p = eol + 1;
    const char *end = head + head_len;
    while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        size_t ln = (size_t)(e + 1 - p);
        if (ln == 2) /* the blank line */
            break;
        if (!sb_egress_req_hop_header(p, ln - 2) &&
            !(sec && sb_egress_h1_is_header(p, ln - 2, sec->header))) {
            memcpy(out + at, p, ln);
            at += ln;
        }
        p = e + 1;
    }
    if (sec) { /* --net-secret given as http://HOST: in the clear */
        n = snprintf(out + at, sizeof out - at, "%s: %.*s\r\n", sec->header,
                     (int)sec->value_len, sec->value);
        if (n < 0 || (size_t)n >= sizeof out - at - 32)
            return -1;
        at += (size_t)n;
    }
    static const char close_hdr[] = "Connection: close\r\n\r\n";
    memcpy(out + at, close_hdr, sizeof close_hdr - 1);
    at += sizeof close_hdr - 1;
    c->rec.bytes_up += at + rest_len;
    if (sb_egress_write_all(c->up, out, at) < 0)
        return -1;
    return rest_len ? sb_egress_write_all(c->up, rest, rest_len) : 0;
}

static void
s_pump_init(const s_conn_t *c, sb_egress_pump_t *pp)
{
    *pp = (sb_egress_pump_t){
        .deadline_ms = c->start_ms + (int64_t)c->caps->conn_seconds * 1000,
        .idle_ms = c->caps->idle_seconds * 1000,
        .max_up = c->caps->max_up,
        .max_down = c->caps->max_down,
        .shared_up = &c->totals[0],
        .shared_down = &c->totals[1]};
}

/* CONNECT to a --net-secret host: TLS terminated (sb_egress_tls.h). */
static void
s_serve_tls(s_conn_t *c, unsigned port, size_t early)
{
    if (early) {
        s_refuse(c, 400,
                 "TLS bytes came before the answer to CONNECT; a host with "
                 "a --net-secret needs the ClientHello after the 200");
        return;
    }
    sb_egress_pump_t pp;
    s_pump_init(c, &pp);
    sb_egress_tls_job_t j = {
        .box = c->fd, .up = c->up, .host = c->host, .port = port, .pp = &pp};
    if (sb_egress_tls_serve(&j) < 0) {
        s_refuse(c, j.status, j.why);
        return;
    }
    snprintf(c->sni, sizeof c->sni, "%.*s", (int)sizeof c->sni - 1, c->host);
    c->rec.allowed = true;
    c->rec.bytes_up += pp.up;
    c->rec.bytes_down = pp.down;
    snprintf(c->reason, sizeof c->reason, "%s", j.why);
}

static void
s_serve_one(s_conn_t *c)
{
    char *buf = c->buf;
    size_t have = 0;
    int64_t deadline = c->start_ms + S_HEAD_SECONDS * 1000;
    ssize_t hl = s_read_head(c->fd, buf, SB_EGRESS_HEAD_MAX, &have, deadline);
    if (hl < 0) {
        s_refuse(c, 400,
                 "no complete request head (at most 16 KiB) within 10 s");
        return;
    }
    sb_egress_req_t r;
    const char *why = NULL;
    if (sb_egress_req_parse(buf, (size_t)hl, &r, &why) < 0) {
        s_refuse(c, 400, why);
        return;
    }
    s_clean(c->method, sizeof c->method, r.method);
    s_clean(c->host, sizeof c->host, r.host);
    c->rec.port = r.port;
    if (!r.connect && !sb_egress_req_host_matches(&r)) {
        char msg[600];
        snprintf(msg, sizeof msg,
                 "the Host header '%.*s' is not the request's target '%s'", 200,
                 r.host_header, r.authority);
        char clean[600];
        s_clean(clean, sizeof clean, msg);
        s_refuse(c, 403, clean);
        return;
    }
    if (s_judge_and_dial(c, r.port) < 0)
        return;
    size_t extra = have - (size_t)hl;
    const sb_egress_secret_t *sec = sb_egress_tls_secret(c->host);
    if (sec && r.connect) {
        s_serve_tls(c, r.port, extra);
        return;
    }
    if (sec && !sec->plain) {
        char plain[900];
        snprintf(plain, sizeof plain,
                 "%s has a --net-secret, sent over HTTPS only; use https://%s "
                 "(or give the secret as http://%s:... to send it in clear)",
                 c->host, c->host, c->host);
        s_refuse(c, 403, plain);
        return;
    }
    if (r.connect) {
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        if (sb_egress_write_all(c->fd, ok, sizeof ok - 1) < 0)
            return;
        memmove(buf, buf + hl, extra);
        if (s_check_hello(c, buf, S_BUF, extra) < 0) {
            if (!c->reason[0])
                snprintf(c->reason, sizeof c->reason, "upstream write failed");
            return;
        }
    } else if (s_forward_plain(c, &r, buf, (size_t)hl, buf + hl, extra, sec) <
               0) {
        snprintf(c->reason, sizeof c->reason, "upstream write failed");
        return;
    }
    c->rec.allowed = true;
    sb_egress_pump_t pp;
    s_pump_init(c, &pp);
    sb_egress_pump_end_t end = sb_egress_pump_run(c->fd, c->up, &pp);
    c->rec.bytes_up += pp.up;
    c->rec.bytes_down = pp.down;
    snprintf(c->reason, sizeof c->reason, "%s", sb_egress_pump_end_str(end));
}

/* A connection's own thread: serve, record, close. */
static void *
s_conn_thread(void *arg)
{
    s_conn_t *c = arg;
    s_serve_one(c);
    c->rec.method = c->method[0] ? c->method : "?";
    c->rec.host = c->host;
    c->rec.address = c->address;
    c->rec.rule = c->rule;
    c->rec.sni = c->sni;
    c->rec.reason = c->reason;
    c->rec.ms = clock_mono_ms() - c->start_ms;
    if (c->recorder && c->recorder->record)
        c->recorder->record(c->recorder->ctx, &c->rec);
    close(c->fd);
    if (c->up >= 0)
        close(c->up);
    s_rules_put(c->ref);
    free(c);
    pthread_mutex_lock(&s_mu);
    s_live--;
    pthread_mutex_unlock(&s_mu);
    return NULL;
}

/* Refuse at the connection cap, from the accepting thread (no pump). */
static void
s_refuse_cap(int fd, const sb_egress_caps_t *caps,
             const sb_egress_recorder_t *rec)
{
    s_conn_t *c = calloc(1, sizeof *c);
    if (c) {
        c->fd = fd;
        char why[160];
        snprintf(why, sizeof why,
                 "%u connections are open, the session's cap; close one "
                 "and try again",
                 caps->max_conns);
        s_refuse(c, 503, why);
        c->rec.method = "?";
        c->rec.host = "";
        c->rec.reason = c->reason;
        if (rec && rec->record)
            rec->record(rec->ctx, &c->rec);
        free(c);
    }
    close(fd);
}

void
sb_egress_proxy_set_rules(const sb_egress_rules_t *rules)
{
    s_rules_ref_t *r = malloc(sizeof *r);
    if (!r)
        return;
    r->rules = *rules;
    r->refs = 1; /* s_cur's */
    pthread_mutex_lock(&s_mu);
    s_rules_ref_t *old = s_cur;
    s_cur = r;
    pthread_mutex_unlock(&s_mu);
    if (old)
        s_rules_put(old);
}

/* A line from the rules pipe ("RULE,RULE\n"; an empty line: none):
 * parsed and made current; true if it was. Bad lines are ignored (the
 * launcher parsed them first). */
static bool
s_rules_line(const char *line)
{
    sb_egress_rules_t *rs = calloc(1, sizeof *rs);
    err_t err = {0};
    bool ok = rs && (!line[0] || sb_egress_rules_parse(rs, line, &err) == 0);
    if (ok)
        sb_egress_proxy_set_rules(rs);
    free(rs);
    return ok;
}

/* Read what the rules pipe has; -1 at its EOF (no more changes). */
static int
s_rules_read(int fd, char *buf, size_t size, size_t *have)
{
    ssize_t n = read(fd, buf + *have, size - 1 - *have);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0)
        return -1;
    *have += (size_t)n;
    char *nl;
    while ((nl = memchr(buf, '\n', *have))) {
        *nl = '\0';
        /* "+" (in force) or "-" back: the launcher waits for it, so the
         * next connection is judged by the new rules. */
        ssize_t w = write(fd, s_rules_line(buf) ? "+" : "-", 1);
        (void)w;
        size_t used = (size_t)(nl + 1 - buf);
        memmove(buf, nl + 1, *have - used);
        *have -= used;
    }
    if (*have == size - 1)
        *have = 0; /* a line too long: dropped */
    return 0;
}

void
sb_egress_proxy_serve(int listen_fd, int life_fd, int rules_fd,
                      const sb_egress_rules_t *rules,
                      const sb_egress_caps_t *caps,
                      const sb_egress_recorder_t *rec)
{
    /* Session byte totals, shared by every connection's thread. */
    static uint64_t totals[2];
    sb_egress_proxy_set_rules(rules);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    static char rbuf[SB_EGRESS_MAX_RULES * (SB_EGRESS_HOST_MAX + 16) + 2];
    size_t rhave = 0;
    for (;;) {
        struct pollfd pf[3] = {{.fd = listen_fd, .events = POLLIN},
                               {.fd = life_fd, .events = POLLIN},
                               {.fd = rules_fd, .events = POLLIN}};
        int pr = poll(pf, 3, -1);
        if (pr < 0 && errno != EINTR)
            break;
        if (pr < 0)
            continue;
        if (pf[1].revents)
            break; /* the launcher closed its end, or died */
        if (pf[2].revents &&
            s_rules_read(rules_fd, rbuf, sizeof rbuf, &rhave) < 0)
            rules_fd = -1; /* poll ignores it from now on */
        if (!(pf[0].revents & POLLIN))
            continue;
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        pthread_mutex_lock(&s_mu);
        bool full = s_live >= caps->max_conns;
        if (!full)
            s_live++;
        pthread_mutex_unlock(&s_mu);
        if (full) {
            s_refuse_cap(fd, caps, rec);
            continue;
        }
        s_conn_t *c = calloc(1, sizeof *c);
        pthread_t t;
        if (c) {
            c->fd = fd;
            c->up = -1;
            c->ref = s_rules_get();
            c->rules = &c->ref->rules;
            c->caps = caps;
            c->totals = totals;
            c->recorder = rec;
            c->start_ms = clock_mono_ms();
        }
        if (!c || pthread_create(&t, &attr, s_conn_thread, c) != 0) {
            if (c) {
                s_rules_put(c->ref);
                free(c);
            }
            close(fd);
            pthread_mutex_lock(&s_mu);
            s_live--;
            pthread_mutex_unlock(&s_mu);
        }
    }
    pthread_attr_destroy(&attr);
}

/* Become nobody when run as root: the proxy needs no privilege. */
static int
s_drop(void)
{
    struct rlimit zero = {0, 0};
    setrlimit(RLIMIT_CORE, &zero);
    if (geteuid() == 0) {
        if (setgroups(0, NULL) < 0 || setresgid(S_NOBODY, S_NOBODY, S_NOBODY) ||
            setresuid(S_NOBODY, S_NOBODY, S_NOBODY))
            return -1;
    }
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

int
sb_egress_proxy_main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "%s: internal command of the --allow-net proxy\n",
                argv[0]);
        return 2;
    }
    sb_egress_rules_t *rules = calloc(1, sizeof *rules);
    err_t err = {0};
    if (!rules || (argv[1][0] && /* "": no rules (until the pipe says) */
                   sb_egress_rules_parse(rules, argv[1], &err) < 0)) {
        fprintf(stderr, "egress proxy: %s\n", err.text);
        return 2;
    }
    /* --net-secret: the TLS configuration, read before the drop (the
     * host's trust store). */
    if (fcntl(7, F_GETFD) >= 0) {
        if (sb_egress_tls_load(7, &err) < 0) {
            fprintf(stderr, "%s\n", err.text);
            return 2;
        }
        close(7);
    }
    if (s_drop() < 0) {
        fprintf(stderr, "egress proxy: dropping privileges: %s\n",
                strerror(errno));
        return 4;
    }
    signal(SIGPIPE, SIG_IGN);
    int log_fd = fcntl(5, F_GETFD) >= 0 ? 5 : -1;
    sb_egress_recorder_t rec = {sb_egress_log_jsonl, &log_fd};
    sb_egress_caps_t caps;
    sb_egress_caps_default(&caps);
    int rules_fd = fcntl(6, F_GETFD) >= 0 ? 6 : -1;
    sb_egress_proxy_serve(3, 4, rules_fd, rules, &caps, &rec);
    free(rules);
    return 0;
}
