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
#include "kernel-bridge/kb_wire.h"
#include "kernel-bridge/kb_wsmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define MIB ((size_t)1 << 20)

static long
s_peak_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
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

static void
t_kernel_message(void)
{
    static const char header[] =
        "{\"msg_id\":\"m1\",\"msg_type\":\"stream\",\"session\":\"s\","
        "\"username\":\"u\",\"date\":\"\",\"version\":\"5.3\"}";
    static const char parent[] = "{\"msg_id\":\"mine\"}";
    size_t clen;
    char *content =
        s_dense("{\"name\":\"stdout\",\"text\":\"x\",\"pad\":", 48 * MIB, "}",
                &clen);
    kb_key_t *key = kb_key_new("k", 1);
    kb_frame_t f[6] = {{KB_WIRE_DELIM, KB_WIRE_DELIM_LEN},
                       {NULL, 64},
                       {header, sizeof header - 1},
                       {parent, sizeof parent - 1},
                       {"{}", 2},
                       {content, clen}};
    char sig[65];
    kb_key_sign(key, &f[2], sig);
    f[1].data = sig;
    kb_wire_stats_t st = {0};
    err_t err = {0};
    long before = s_peak_mib();
    kb_msg_t *m = kb_wire_parse(f, 6, key, NULL, &st, &err);
    long grew = s_peak_mib() - before;
    ok(!m && st.malformed == 1,
       "a signed message of 48 MiB of [0,0,...] is refused and counted (%s)",
       err.text);
    ok(grew < 48, "parsing it grew the peak by %ld MiB (< 48: its size)",
       grew);
    diag("kernel message: peak RSS +%ld MiB for 48 MiB of dense JSON", grew);
    kb_msg_destroy(&m);

    /* The allowance a receiver gives (kb_client: its output budget). */
    size_t small;
    char *ok_content = s_dense("{\"name\":\"stdout\",\"text\":\"x\",\"pad\":",
                               64 << 10, "}", &small);
    f[5] = (kb_frame_t){ok_content, small};
    kb_key_sign(key, &f[2], sig);
    m = kb_wire_parse(f, 6, key, NULL, &st, &err);
    ok(m != NULL, "64 KiB of the same is parsed (within the allowance)");
    kb_msg_destroy(&m);
    free(ok_content);
    kb_key_destroy(&key);
    free(content);
}

static void
t_gateway_legacy(void)
{
    size_t len;
    char *text = s_dense(
        "{\"channel\":\"iopub\",\"header\":{\"msg_id\":\"m\",\"msg_type\":"
        "\"stream\"},\"parent_header\":{\"msg_id\":\"mine\"},\"metadata\":{},"
        "\"content\":{\"name\":\"stdout\",\"text\":\"x\",\"pad\":",
        48 * MIB, "}}", &len);
    kb_wire_stats_t st = {0};
    kb_channel_t ch;
    err_t err = {0};
    long before = s_peak_mib();
    kb_msg_t *m =
        kb_ws_decode(text, len, false, KB_WS_LEGACY, NULL, &st, &ch, &err);
    long grew = s_peak_mib() - before;
    ok(!m && st.malformed == 1,
       "a legacy gateway text frame of 48 MiB of [0,0,...] is refused (%s)",
       err.text);
    ok(grew < 48, "decoding it grew the peak by %ld MiB (< 48)", grew);
    diag("gateway legacy frame: peak RSS +%ld MiB for 48 MiB", grew);

    int rc = kb_ws_channel(text, len, false, KB_WS_LEGACY, &st, &ch, &err);
    ok(rc == 0 && ch == KB_IOPUB && s_peak_mib() - before < 48,
       "its channel is read off the top level without parsing it");

    /* Small and for someone else: dropped before any JSON is parsed. */
    static const char other[] =
        "{\"channel\":\"iopub\",\"header\":{\"msg_id\":\"m\",\"msg_type\":"
        "\"stream\"},\"parent_header\":{\"msg_id\":\"someone-else\"},"
        "\"metadata\":{},\"content\":{\"name\":\"stdout\",\"text\":\"x\"}}";
    kb_zmq_limits_t lim = {.parent_id = "mine-0123"};
    memset(&st, 0, sizeof st);
    m = kb_ws_decode(other, sizeof other - 1, false, KB_WS_LEGACY, &lim, &st,
                     &ch, &err);
    ok(!m && st.foreign == 1 && st.accepted == 0,
       "a legacy frame of another parent is dropped as foreign, unparsed");
    free(text);
}

static void
t_mcp(void)
{
    size_t len;
    char *body = s_dense(
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"p\":",
        AG_MCP_MAX_MESSAGE - 128, "}}", &len);
    json_t *perr = NULL;
    long before = s_peak_mib();
    json_t *msg = ag_mcp_parse(body, len, &perr);
    long grew = s_peak_mib() - before;
    char *e = perr ? json_dumps(perr, JSON_COMPACT) : NULL;
    ok(!msg && e && strstr(e, "refused"),
       "an MCP ping of 8 MiB of [0,0,...] is refused unparsed (%s)",
       e ? e : "parsed");
    ok(grew < 8, "parsing it grew the peak by %ld MiB (< 8)", grew);
    diag("MCP body: peak RSS +%ld MiB for 8 MiB", grew);
    free(e);
    json_decref(perr);
    json_decref(msg);
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
