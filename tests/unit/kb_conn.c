/* Unit tests for kernel-bridge/kb_conn: connection files. */
#include "../tap.h"

#include "kernel-bridge/kb_conn.h"

#include <ctype.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_dir[] = "/tmp/kb_conn_test.XXXXXX";

static char *
s_path(const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", s_dir, name);
    return buf;
}

static void
s_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

/* Parse `json` and return the error text ("" on success). */
static const char *
s_parse_err(const char *json)
{
    static err_t err;
    kb_conn_t c;
    err_clear(&err);
    if (kb_conn_parse(&c, json, strlen(json), "test.json", &err) == 0) {
        kb_conn_release(&c);
        return "";
    }
    kb_conn_release(&c);
    return err.text;
}

static int
s_has(const char *text, const char *needle)
{
    if (strstr(text, needle))
        return 1;
    diag("  '%s' does not contain '%s'", text, needle);
    return 0;
}

#define PORTS                                                                  \
    "\"shell_port\": 5001, \"iopub_port\": 5002, \"stdin_port\": 5003, "       \
    "\"control_port\": 5004, \"hb_port\": 5005"

static int
s_is_hex64(const char *k)
{
    if (!k || strlen(k) != 64)
        return 0;
    for (const char *p = k; *p; p++)
        if (!isxdigit((unsigned char)*p) || isupper((unsigned char)*p))
            return 0;
    return 1;
}

int
main(void)
{
    err_t err;
    kb_conn_t a, b;
    char ep[256];

    err_clear(&err);
    if (!mkdtemp(s_dir)) {
        perror("mkdtemp");
        return 1;
    }

    /* --- fresh connections ------------------------------------------ */
    ok(kb_conn_init_ipc(&a, "/run/x/kernel", &err) == 0,
       "an ipc connection can be created");
    is_str(a.transport, "ipc", "an ipc connection uses the ipc transport");
    ok(a.ports[KB_SHELL] == 1 && a.ports[KB_HB] == 5,
       "ipc ports are 1..5 like jupyter_client");
    ok(s_is_hex64(a.key), "a fresh key is 64 lowercase hex characters");
    is_str(a.signature_scheme, "hmac-sha256", "a fresh key uses hmac-sha256");
    ok(kb_conn_init_ipc(&b, "/run/x/kernel", &err) == 0 &&
           strcmp(a.key, b.key) != 0,
       "two fresh connections get different keys");
    kb_conn_release(&b);
    ok(kb_conn_endpoint(&a, KB_SHELL, ep, sizeof ep) == 0, "endpoint fits");
    is_str(ep, "ipc:///run/x/kernel-1", "ipc endpoint is ipc://{ip}-{port}");
    kb_conn_endpoint(&a, KB_HB, ep, sizeof ep);
    is_str(ep, "ipc:///run/x/kernel-5", "the heartbeat uses its own port");
    is_int(kb_conn_endpoint(&a, KB_SHELL, ep, 10), -1,
           "an endpoint that does not fit is refused, not cut");

    /* --- round trip ---------------------------------------------------- */
    free(a.kernel_name);
    a.kernel_name = strdup("python3");
    ok(kb_conn_save(&a, s_path("ipc.json"), &err) == 0,
       "an ipc connection saves");
    struct stat st;
    ok(stat(s_path("ipc.json"), &st) == 0 && (st.st_mode & 0777) == 0600,
       "a saved connection file has mode 0600 (it holds the key)");
    ok(kb_conn_load(&b, s_path("ipc.json"), &err) == 0,
       "a saved connection file loads: %s", err.text);
    ok(!strcmp(a.key, b.key) && !strcmp(a.ip, b.ip) &&
           !strcmp(a.transport, b.transport) &&
           !memcmp(a.ports, b.ports, sizeof a.ports) &&
           !strcmp(b.kernel_name, "python3"),
       "save then load gives back the same connection");
    kb_conn_release(&b);
    /* Atomic replace: saving again over an existing file works, and no
     * temporary file is left behind. */
    ok(kb_conn_save(&a, s_path("ipc.json"), &err) == 0,
       "saving over an existing connection file replaces it");
    char cmd[700];
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -eq 1", s_dir);
    ok(system(cmd) == 0, "saving leaves no temporary file behind");
    kb_conn_release(&a);

    ok(kb_conn_init_tcp(&a, "127.0.0.1", &err) == 0,
       "a tcp connection can be created: %s", err.text);
    int distinct = 1;
    for (int i = 0; i < KB_NCHANNELS; i++)
        for (int j = 0; j < i; j++)
            if (a.ports[i] == a.ports[j] || a.ports[i] <= 0)
                distinct = 0;
    ok(distinct, "tcp ports are five distinct real ports");
    snprintf(cmd, sizeof cmd, "tcp://127.0.0.1:%d", a.ports[KB_IOPUB]);
    kb_conn_endpoint(&a, KB_IOPUB, ep, sizeof ep);
    is_str(ep, cmd, "tcp endpoint is tcp://ip:port");
    ok(kb_conn_save(&a, s_path("tcp.json"), &err) == 0 &&
           kb_conn_load(&b, s_path("tcp.json"), &err) == 0 &&
           !memcmp(a.ports, b.ports, sizeof a.ports) && !strcmp(a.key, b.key),
       "a tcp connection round-trips through a file");
    kb_conn_release(&a);
    kb_conn_release(&b);
    is_int(kb_conn_init_tcp(&a, "localhost", &err), -1,
           "a tcp connection needs a numeric address");
    ok(s_has(err.text, "'localhost' is not a numeric IP address"),
       "a non-numeric address is named in the error");
    strcpy(a.transport, "tcp");
    a.ip = strdup("::1");
    for (int i = 0; i < KB_NCHANNELS; i++)
        a.ports[i] = 6000 + i;
    kb_conn_endpoint(&a, KB_SHELL, ep, sizeof ep);
    is_str(ep, "tcp://[::1]:6000", "an IPv6 endpoint is bracketed");
    kb_conn_release(&a);
    is_str(kb_channel_name(KB_CONTROL), "control", "channels have names");
    is_str(kb_channel_name(KB_NCHANNELS), "?", "a bad channel has no name");

    /* --- jupyter_client's own files ---------------------------------- */
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'from jupyter_client.connect import "
             "write_connection_file as w; w(\"%s\", ip=\"127.0.0.1\", "
             "key=b\"s3cr3t\", kernel_name=\"python3\")' 2>/dev/null",
             s_path("jc.json"));
    if (access("/usr/bin/python3", X_OK) == 0 && system(cmd) == 0) {
        ok(kb_conn_load(&a, s_path("jc.json"), &err) == 0,
           "a connection file written by jupyter_client loads: %s", err.text);
        is_str(a.key, "s3cr3t", "jupyter_client's key is read as written");
        is_str(a.kernel_name, "python3", "the kernel name is read");
        kb_conn_release(&a);
    } else {
        skip("jupyter_client is not installed for /usr/bin/python3");
        skip("jupyter_client is not installed");
        skip("jupyter_client is not installed");
    }
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'from jupyter_client.connect import "
             "write_connection_file as w; w(\"%s\", ip=\"%s/k\", "
             "transport=\"ipc\", key=b\"k\")' 2>/dev/null",
             s_path("jcipc.json"), s_dir);
    if (access("/usr/bin/python3", X_OK) == 0 && system(cmd) == 0) {
        ok(kb_conn_load(&a, s_path("jcipc.json"), &err) == 0 &&
               !strcmp(a.transport, "ipc"),
           "an ipc connection file written by jupyter_client loads: %s",
           err.text);
        kb_conn_release(&a);
    } else {
        skip("jupyter_client is not installed for /usr/bin/python3");
    }

    /* --- malformed files, each with its own message ------------------ */
    is_int(kb_conn_load(&a, s_path("nope.json"), &err), -1,
           "a missing file fails");
    ok(s_has(err.text, "nope.json") &&
           s_has(err.text, "cannot read connection file"),
       "an unreadable file is named in the error");
    is_int(err.code, ERR_IO, "an unreadable file is an I/O error");
    s_write(s_path("bad.json"), "{\n  \"ip\": \"127.0.0.1\",\n  oops\n}\n");
    is_int(kb_conn_load(&a, s_path("bad.json"), &err), -1, "bad JSON fails");
    ok(s_has(err.text, "bad.json") && s_has(err.text, "bad JSON") &&
           s_has(err.text, "line 3"),
       "bad JSON is reported with file and line");
    kb_conn_release(&a); /* safe after a failed load */

    ok(s_has(s_parse_err("[1,2]"), "expected a JSON object"),
       "a JSON array is not a connection file");
    ok(s_has(s_parse_err("{\"ip\":\"127.0.0.1\", \"key\":\"\"}"),
             "test.json: missing \"shell_port\""),
       "a missing port is named");
    ok(s_has(s_parse_err("{\"ip\":\"127.0.0.1\", \"shell_port\":\"5001\", "
                         "\"iopub_port\": 5002, \"stdin_port\": 5003, "
                         "\"control_port\": 5004, \"hb_port\": 5005}"),
             "\"shell_port\" is not an integer"),
       "a port given as a string is refused");
    ok(s_has(s_parse_err("{\"ip\":\"127.0.0.1\", \"shell_port\": 70000, "
                         "\"iopub_port\": 5002, \"stdin_port\": 5003, "
                         "\"control_port\": 5004, \"hb_port\": 5005}"),
             "\"shell_port\" is 70000, out of range"),
       "a port above 65535 is refused");
    ok(s_has(s_parse_err("{\"ip\":\"127.0.0.1\", \"shell_port\": 5001, "
                         "\"iopub_port\": 5002, \"stdin_port\": 5003, "
                         "\"control_port\": 5004, \"hb_port\": 0}"),
             "\"hb_port\" is 0, out of range"),
       "port 0 (unset) is refused");
    ok(s_has(s_parse_err("{\"ip\":\"127.0.0.1\", \"shell_port\": 5001, "
                         "\"iopub_port\": 5001, \"stdin_port\": 5003, "
                         "\"control_port\": 5004, \"hb_port\": 5005}"),
             "\"shell_port\" and \"iopub_port\" are both 5001"),
       "two channels on one port are refused");
    ok(s_has(s_parse_err("{\"transport\":\"udp\", \"ip\":\"127.0.0.1\", " PORTS
                         "}"),
             "unknown transport 'udp'"),
       "an unknown transport is refused");
    ok(s_has(s_parse_err("{\"ip\":\"127.0.0.1\", \"key\":\"k\", "
                         "\"signature_scheme\":\"hmac-md5\", " PORTS "}"),
             "unsupported signature_scheme 'hmac-md5' (only hmac-sha256"),
       "an unsupported signature scheme is refused");
    ok(s_has(s_parse_err("{\"ip\":\"127.0.0.1\", \"key\": 42, " PORTS "}"),
             "\"key\" is not a string"),
       "a non-string key is refused");
    ok(s_has(s_parse_err("{\"ip\":\"127.0.0.1\", \"key\":\"a\\u0000b\", " PORTS
                         "}"),
             "is not allowed"),
       "a key with a NUL byte is refused");
    ok(s_has(s_parse_err("{" PORTS "}"), "missing \"ip\""),
       "a missing ip is refused");
    ok(s_has(s_parse_err("{\"ip\":\"\", " PORTS "}"), "\"ip\" is empty"),
       "an empty ip is refused");
    char longjson[600], prefix[200];
    memset(prefix, 'a', 110);
    prefix[0] = '/';
    prefix[110] = '\0';
    snprintf(longjson, sizeof longjson,
             "{\"transport\":\"ipc\", \"ip\":\"%s\", " PORTS "}", prefix);
    ok(s_has(s_parse_err(longjson), "too long for a unix socket path"),
       "an ipc prefix too long for sun_path is refused");
    /* 108 bytes incl. NUL: prefix + "-5001" (5) + NUL must be <= 108. */
    prefix[102] = '\0';
    snprintf(longjson, sizeof longjson,
             "{\"transport\":\"ipc\", \"ip\":\"%s\", " PORTS "}", prefix);
    is_str(s_parse_err(longjson), "",
           "an ipc path of exactly 107 bytes is accepted");
    prefix[102] = 'a';
    prefix[103] = '\0';
    snprintf(longjson, sizeof longjson,
             "{\"transport\":\"ipc\", \"ip\":\"%s\", " PORTS "}", prefix);
    ok(s_has(s_parse_err(longjson), "needs 109 bytes, at most 108"),
       "an ipc path of 108 bytes (no room for the NUL) is refused");
    memset(prefix, 'a', 106); /* "-1" and the NUL make 109 */
    prefix[0] = '/';
    prefix[106] = '\0';
    is_int(kb_conn_init_ipc(&a, prefix, &err), -1,
           "a fresh ipc connection with a too-long prefix is refused");
    prefix[105] = '\0';
    ok(kb_conn_init_ipc(&a, prefix, &err) == 0,
       "a fresh ipc connection with a 105-byte prefix fits exactly");
    kb_conn_release(&a);

    is_str(s_parse_err("{\"ip\":\"127.0.0.1\", " PORTS "}"), "",
           "transport, key and scheme default like jupyter_client");
    const char *minimal = "{\"ip\":\"127.0.0.1\", " PORTS "}";
    kb_conn_parse(&a, minimal, strlen(minimal), NULL, &err);
    is_str(a.key, "", "a file without a key means unsigned (empty key)");
    is_str(a.transport, "tcp", "a file without transport means tcp");
    kb_conn_release(&a);
    ok(s_has(s_parse_err("{\"ip\":\"127.0.0.1\", \"ip\":\"x\", " PORTS "}"),
             "duplicate"),
       "a duplicated field is refused, not silently resolved");

    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    if (system(cmd) != 0)
        diag("could not remove %s", s_dir);
    return done_testing();
}
