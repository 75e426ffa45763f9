/*
 * Dense JSON from a peer cannot cost the agent a multiple of its size.
 *
 * Why: jansson spends ~40 bytes on a `0` that took 2 bytes to send, so one
 * signed message of 48 MiB of `[0,0,...]` cost the agent a GiB, however
 * small its output budget (issue 24, item 3). Every reader of untrusted
 * JSON now passes common/jsonlim's bound first: the tree may cost its
 * text's length plus an allowance, judged from the bytes before parsing.
 * Each check feeds one reader 48 MiB (8 MiB for MCP, its message cap) of
 * dense JSON and measures this process's peak RSS around the call:
 *   - a signed kernel message (kb_wire_parse, as every ZeroMQ and ZMTP
 *     receiver calls it) is refused and counted, and the peak grows by
 *     less than the message's size;
 *   - the same as a legacy gateway text frame (kb_ws_decode), and a legacy
 *     frame for another parent is dropped as foreign before any parse;
 *   - an MCP request body (ag_mcp_parse, stdio and HTTP alike);
 *   - JSON just under the bound still parses (the bound is not a cap on
 *     ordinary messages: a 48 MiB string is fine).
 */
#include "../tap.h"

#include "agent/mcp/ag_mcp_rpc.h"
#include "common/jsonlim.h"
#include "common/xalloc.h"
#include "kernel-bridge/wire/kb_wire.h"
#include "kernel-bridge/wire/kb_wsmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

static long
s_peak_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

/* What a measured call found, sent from the child that ran it. */
typedef struct s_res {
    bool refused;   /* the reader refused the input */
    long grew;      /* MiB the child's peak RSS grew by during the call */
    char why[1024]; /* the reader's words */
} s_res_t;

/* Run fn(arg, res) in a child of its own, so that each peak is measured
 * from the same start, whatever earlier checks cost. */
static s_res_t
s_measure(void (*fn)(void *, s_res_t *), void *arg)
{
    s_res_t r = {false, -1, "the child died"};
    int p[2];
    if (pipe(p) < 0)
        return r;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        s_res_t c = {false, 0, ""};
        fn(arg, &c);
        ssize_t w = write(p[1], &c, sizeof c);
        _exit(w == sizeof c ? 0 : 1);
    }
    close(p[1]);
    if (read(p[0], &r, sizeof r) != sizeof r)
        r.grew = -1;
    close(p[0]);
    waitpid(pid, NULL, 0);
    return r;
}

/* `pre` + `[0,0,...,0]` of `bytes` + `post`, as a new string. */
static char *
s_dense(const char *pre, size_t bytes, const char *post, size_t *len)
{
    size_t lp = strlen(pre), lq = strlen(post), n = bytes / 2;
    char *s = xmalloc(lp + 2 * n + 2 + lq + 1);
    size_t l = 0;
    memcpy(s + l, pre, lp);
    l += lp;
    s[l++] = '[';
    for (size_t i = 0; i < n; i++) {
        s[l++] = '0';
        s[l++] = ',';
    }
    s[l - 1] = ']';
    memcpy(s + l, post, lq);
    l += lq;
    s[l] = '\0';
    *len = l;
    return s;
}

typedef struct s_wire {
    kb_frame_t f[6];
    kb_key_t *key;
} s_wire_t;

static void
s_parse_wire(void *arg, s_res_t *r)
{
    s_wire_t *w = arg;
    kb_wire_stats_t st = {0};
    err_t err = {0};
    long before = s_peak_mib();
    kb_msg_t *m = kb_wire_parse(w->f, 6, w->key, NULL, &st, &err);
    r->grew = s_peak_mib() - before;
    r->refused = !m && st.malformed == 1;
    memcpy(r->why, err.text, sizeof r->why);
    kb_msg_destroy(&m);
}

static void
t_kernel_message(void)
{
    static const char header[] =
        "{\"msg_id\":\"m1\",\"msg_type\":\"stream\",\"session\":\"s\","
        "\"username\":\"u\",\"date\":\"\",\"version\":\"5.3\"}";
    static const char parent[] = "{\"msg_id\":\"mine\"}";
    size_t clen;
    char *content = s_dense(
        "{\"name\":\"stdout\",\"text\":\"x\",\"pad\":", 48 * MIB, "}", &clen);
    s_wire_t w = {{{KB_WIRE_DELIM, KB_WIRE_DELIM_LEN},
                   {NULL, 64},
                   {header, sizeof header - 1},
                   {parent, sizeof parent - 1},
                   {"{}", 2},
                   {content, clen}},
                  kb_key_new("k", 1)};
    char sig[65];
    kb_key_sign(w.key, &w.f[2], sig);
    w.f[1].data = sig;
    s_res_t r = s_measure(s_parse_wire, &w);
    ok(r.refused,
       "a signed message of 48 MiB of [0,0,...] is refused and counted (%s)",
       r.why);
    ok(r.grew >= 0 && r.grew < 48,
       "parsing it grew the peak by %ld MiB (< 48: its size)", r.grew);
    diag("kernel message: peak RSS +%ld MiB for 48 MiB of dense JSON", r.grew);

    /* Within the allowance a receiver gives (kb_client: its output
     * budget), the same shape parses. */
    size_t small;
    char *ok_content = s_dense(
        "{\"name\":\"stdout\",\"text\":\"x\",\"pad\":", 64 << 10, "}", &small);
    w.f[5] = (kb_frame_t){ok_content, small};
    kb_key_sign(w.key, &w.f[2], sig);
    r = s_measure(s_parse_wire, &w);
    ok(!r.refused && r.grew >= 0,
       "64 KiB of the same is parsed (within the allowance)");
    free(ok_content);
    kb_key_destroy(&w.key);
    free(content);
}

typedef struct s_text {
    const char *text;
    size_t len;
} s_text_t;

static void
s_decode_ws(void *arg, s_res_t *r)
{
    s_text_t *t = arg;
    kb_wire_stats_t st = {0};
    kb_channel_t ch;
    err_t err = {0};
    long before = s_peak_mib();
    kb_msg_t *m = kb_ws_decode(t->text, t->len, false, KB_WS_LEGACY, NULL, &st,
                               &ch, &err);
    r->grew = s_peak_mib() - before;
    r->refused = !m && st.malformed == 1;
    memcpy(r->why, err.text, sizeof r->why);
    kb_msg_destroy(&m);
}

static void
s_channel_ws(void *arg, s_res_t *r)
{
    s_text_t *t = arg;
    kb_channel_t ch = KB_SHELL;
    err_t err = {0};
    long before = s_peak_mib();
    int rc =
        kb_ws_channel(t->text, t->len, false, KB_WS_LEGACY, NULL, &ch, &err);
    r->grew = s_peak_mib() - before;
    r->refused = rc != 0 || ch != KB_IOPUB;
}

static void
t_gateway_legacy(void)
{
    s_text_t t;
    char *text = s_dense(
        "{\"channel\":\"iopub\",\"header\":{\"msg_id\":\"m\",\"msg_type\":"
        "\"stream\"},\"parent_header\":{\"msg_id\":\"mine\"},\"metadata\":{},"
        "\"content\":{\"name\":\"stdout\",\"text\":\"x\",\"pad\":",
        48 * MIB, "}}", &t.len);
    t.text = text;
    s_res_t r = s_measure(s_decode_ws, &t);
    ok(r.refused,
       "a legacy gateway text frame of 48 MiB of [0,0,...] is refused (%s)",
       r.why);
    ok(r.grew >= 0 && r.grew < 48,
       "decoding it grew the peak by %ld MiB (< 48)", r.grew);
    diag("gateway legacy frame: peak RSS +%ld MiB for 48 MiB", r.grew);
    r = s_measure(s_channel_ws, &t);
    ok(!r.refused && r.grew >= 0 && r.grew < 8,
       "its channel is read off the top level without parsing it (+%ld MiB)",
       r.grew);

    kb_wire_stats_t st = {0};
    kb_channel_t ch;
    err_t err = {0};
    kb_msg_t *m;
    /* Small and for someone else: dropped before any JSON is parsed. */
    static const char other[] =
        "{\"channel\":\"iopub\",\"header\":{\"msg_id\":\"m\",\"msg_type\":"
        "\"stream\"},\"parent_header\":{\"msg_id\":\"someone-else\"},"
        "\"metadata\":{},\"content\":{\"name\":\"stdout\",\"text\":\"x\"}}";
    kb_frames_limits_t lim = {.parent_id = "mine-0123"};
    m = kb_ws_decode(other, sizeof other - 1, false, KB_WS_LEGACY, &lim, &st,
                     &ch, &err);
    ok(!m && st.foreign == 1 && st.accepted == 0,
       "a legacy frame of another parent is dropped as foreign, unparsed");
    free(text);
}

static void
s_parse_mcp(void *arg, s_res_t *r)
{
    s_text_t *t = arg;
    json_t *perr = NULL;
    long before = s_peak_mib();
    json_t *msg = ag_mcp_parse(t->text, t->len, &perr);
    r->grew = s_peak_mib() - before;
    char *e = perr ? json_dumps(perr, JSON_COMPACT) : NULL;
    r->refused = !msg && e && strstr(e, "refused");
    snprintf(r->why, sizeof r->why, "%s", e ? e : "parsed");
    free(e);
    json_decref(perr);
    json_decref(msg);
}

static void
t_mcp(void)
{
    s_text_t t;
    char *body = s_dense(
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"p\":",
        AG_MCP_MAX_MESSAGE - 128, "}}", &t.len);
    t.text = body;
    s_res_t r = s_measure(s_parse_mcp, &t);
    ok(r.refused, "an MCP ping of 8 MiB of [0,0,...] is refused unparsed (%s)",
       r.why);
    ok(r.grew >= 0 && r.grew < 8, "parsing it grew the peak by %ld MiB (< 8)",
       r.grew);
    diag("MCP body: peak RSS +%ld MiB for 8 MiB", r.grew);
    free(body);
}

static void
t_strings_pass(void)
{
    size_t n = 48 * MIB;
    char *s = xmalloc(n + 3);
    s[0] = '"';
    memset(s + 1, 'a', n);
    s[n + 1] = '"';
    s[n + 2] = '\0';
    jsonlim_scan_t sc = jsonlim_scan(s, n + 2);
    ok(jsonlim_fits(&sc, n + 2, NULL, NULL, 0),
       "a 48 MiB string passes the bound (it costs about its length)");
    jsonlim_scan_t deep = jsonlim_scan("[[[[]]]]", 8);
    jsonlim_t two = {2, 0};
    ok(deep.depth == 4 && !jsonlim_fits(&deep, 8, &two, NULL, 0),
       "nesting past max_depth is refused");
    jsonlim_scan_t open = jsonlim_scan("[0,0", 4);
    ok(open.depth < 0 && !jsonlim_fits(&open, 4, NULL, NULL, 0),
       "unbalanced brackets are refused before jansson builds anything");
    free(s);
}

int
main(void)
{
#if defined(__SANITIZE_ADDRESS__)
    skip("peak RSS is not meaningful under ASan");
    return done_testing();
#endif
    t_kernel_message();
    t_gateway_legacy();
    t_mcp();
    t_strings_pass();
    return done_testing();
}
