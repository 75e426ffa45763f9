/* agent/mcp without a kernel: JSON-RPC parsing and errors, revision
 * negotiation and batches, the Origin check, and the HTTP session table. */
#include "agent/mcp/ag_mcp_http.h"
#include "agent/mcp/ag_mcp_rpc.h"
#include "agent/mcp/ag_mcp_server.h"
#include "agent/mcp/ag_mcp_sessions.h"
#include "tests/tap.h"

#include <stdlib.h>
#include <string.h>

static int
s_code(const json_t *resp)
{
    return (int)json_integer_value(
        json_object_get(json_object_get(resp, "error"), "code"));
}

static json_t *
s_handle(ag_mcp_server_t *s, const char *text)
{
    json_t *err = NULL;
    json_t *msg = ag_mcp_parse(text, strlen(text), &err);
    if (!msg)
        return err;
    json_t *r = ag_mcp_server_handle(s, msg, NULL);
    json_decref(msg);
    return r;
}

int
main(void)
{
    /* ---- rpc ---- */
    json_t *err = NULL;
    ok(!ag_mcp_parse("{\"a\":", 5, &err) && s_code(err) == -32700,
       "truncated JSON is a parse error (-32700)");
    json_decref(err);
    ok(!ag_mcp_parse("{\"a\":1,\"a\":2}", 13, &err) && s_code(err) == -32700,
       "duplicate keys are refused, not silently merged");
    json_decref(err);
    char *big = malloc(AG_MCP_MAX_MESSAGE + 2);
    memset(big, ' ', AG_MCP_MAX_MESSAGE + 1);
    big[AG_MCP_MAX_MESSAGE + 1] = '\0';
    ok(!ag_mcp_parse(big, AG_MCP_MAX_MESSAGE + 1, &err) &&
           s_code(err) == -32600 &&
           strstr(json_string_value(json_object_get(
                      json_object_get(err, "error"), "message")),
                  "8 MiB"),
       "a message over the cap is refused and the cap is stated");
    json_decref(err);
    free(big);
    json_t *m = json_pack("{s:s, s:i, s:s}", "jsonrpc", "2.0", "id", 1,
                          "method", "ping");
    ok(ag_mcp_classify(m, NULL) == AG_MCP_REQUEST, "a request is a request");
    json_object_del(m, "id");
    ok(ag_mcp_classify(m, NULL) == AG_MCP_NOTIFICATION,
       "without an id it is a notification");
    json_object_set_new(m, "id", json_real(1.5));
    ok(ag_mcp_classify(m, NULL) == AG_MCP_INVALID,
       "a fractional id is invalid");
    json_object_set_new(m, "jsonrpc", json_string("1.0"));
    json_object_set_new(m, "id", json_integer(2));
    ok(ag_mcp_classify(m, NULL) == AG_MCP_INVALID, "jsonrpc 1.0 is invalid");
    json_decref(m);
    is_str(ag_mcp_negotiate("2025-06-18"), "2025-06-18",
           "2025-06-18 is spoken when asked for");
    is_str(ag_mcp_negotiate("2025-03-26"), "2025-03-26",
           "2025-03-26 is spoken when asked for");
    is_str(ag_mcp_negotiate("2024-11-05"), "2025-11-25",
           "an unknown revision gets the newest");
    ok(ag_mcp_batches_allowed("2025-03-26") &&
           !ag_mcp_batches_allowed("2025-06-18") &&
           !ag_mcp_batches_allowed("2025-11-25") &&
           !ag_mcp_batches_allowed(NULL),
       "batches exist in 2025-03-26 only");

    /* ---- origin ---- */
    const char *extra[] = {"https://app.example"};
    ok(ag_mcp_http_origin_ok("http://localhost", NULL, 0) &&
           ag_mcp_http_origin_ok("http://127.0.0.1:8080", NULL, 0) &&
           ag_mcp_http_origin_ok("https://[::1]:443", NULL, 0),
       "loopback origins are accepted");
    ok(!ag_mcp_http_origin_ok("http://localhost.evil.example", NULL, 0) &&
           !ag_mcp_http_origin_ok("http://127.0.0.1.evil:80", NULL, 0) &&
           !ag_mcp_http_origin_ok("http://localhost:80x", NULL, 0) &&
           !ag_mcp_http_origin_ok("null", NULL, 0) &&
           !ag_mcp_http_origin_ok("http://evil.example", NULL, 0),
       "look-alike and foreign origins are refused");
    ok(ag_mcp_http_origin_ok("https://app.example", extra, 1) &&
           !ag_mcp_http_origin_ok("https://app.example.evil", extra, 1),
       "--allow-origin adds exact origins only");

    /* ---- server without a kernel ---- */
    ag_session_opts_t so;
    ag_session_opts_init(&so);
    ag_mcp_config_t cfg = {.session = &so};
    ag_mcp_server_t *s = ag_mcp_server_new(&cfg);
    json_t *r = s_handle(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
                            "\"tools/list\"}");
    is_int(s_code(r), -32600, "tools/list before initialize is -32600");
    json_decref(r);
    r = s_handle(s, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]");
    is_int(s_code(r), -32600, "a batch before any revision is -32600");
    json_decref(r);
    r = s_handle(s, "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":"
                    "\"initialize\",\"params\":{\"protocolVersion\":"
                    "\"2025-03-26\"}}");
    is_str(json_string_value(json_object_get(json_object_get(r, "result"),
                                             "protocolVersion")),
           "2025-03-26", "initialize negotiates 2025-03-26");
    json_decref(r);
    r = s_handle(s, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},"
                    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
                    "initialized\"},{\"jsonrpc\":\"2.0\",\"id\":2,"
                    "\"method\":\"initialize\",\"params\":"
                    "{\"protocolVersion\":\"2025-03-26\"}},{\"x\":1}]");
    ok(json_is_array(r) && json_array_size(r) == 3 &&
           s_code(json_array_get(r, 1)) == -32600 &&
           s_code(json_array_get(r, 2)) == -32600,
       "a 2025-03-26 batch: answers for requests, initialize and junk "
       "refused inside it, nothing for notifications");
    json_decref(r);
    r = s_handle(s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
                    "\"params\":{\"name\":\"install_packages\","
                    "\"arguments\":{}}}");
    is_int(s_code(r), -32602,
           "install_packages does not exist without --packages");
    json_decref(r);
    r = s_handle(s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":"
                    "\"logging/setLevel\",\"params\":{\"level\":\"loud\"}}");
    is_int(s_code(r), -32602, "an unknown log level is -32602");
    json_decref(r);

    /* ---- the session table ---- */
    ag_mcp_sessions_t *t = ag_mcp_sessions_new(2, 0, 0);
    ag_mcp_session_t *a = ag_mcp_sessions_add(t, &s);
    ok(a && !s, "a session takes the server");
    char id[AG_MCP_SESSION_ID_LEN + 1];
    snprintf(id, sizeof id, "%s", ag_mcp_session_id(a));
    ag_mcp_sessions_release(t, a, true);
    ag_mcp_server_t *s2 = ag_mcp_server_new(&cfg);
    ag_mcp_session_t *b = ag_mcp_sessions_add(t, &s2);
    ag_mcp_sessions_release(t, b, true);
    ag_mcp_server_t *s3 = ag_mcp_server_new(&cfg);
    ok(!ag_mcp_sessions_add(t, &s3) && !s3,
       "a session over the maximum is refused (and its server freed)");
    ag_mcp_session_t *again = ag_mcp_sessions_acquire(t, id, true);
    ok(again != NULL, "a live id is found");
    ag_mcp_sessions_release(t, again, true);
    char forged[AG_MCP_SESSION_ID_LEN + 1];
    snprintf(forged, sizeof forged, "%s", id);
    forged[0] = forged[0] == '0' ? '1' : '0';
    ok(!ag_mcp_sessions_acquire(t, forged, true),
       "an id differing in one character is not found");
    ok(!ag_mcp_sessions_acquire(t, "abc", true), "a short id is not found");
    is_int(ag_mcp_sessions_end(t, id), 0, "ending a live session works");
    ok(!ag_mcp_sessions_acquire(t, id, true), "an ended id is gone for good");
    is_int(ag_mcp_sessions_count(t), 1, "one session is left");
    ag_mcp_sessions_destroy(&t);
    ag_session_opts_release(&so);
    return done_testing();
}
