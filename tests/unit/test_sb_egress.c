/*
 * The --allow-net judgement without sockets: rules as written, names and
 * ports they allow, the special ranges refused against DNS rebinding, the
 * TLS server name of a ClientHello, and the proxy's request heads.
 */
#include "sandbox/sb_egress_http.h"
#include "sandbox/sb_egress_rule.h"
#include "sandbox/sb_egress_sni.h"
#include "tests/tap.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static sb_egress_rules_t s_rs;

static int
s_parse(const char *list)
{
    memset(&s_rs, 0, sizeof s_rs);
    return sb_egress_rules_parse(&s_rs, list, NULL);
}

static const char *
s_name_rule(const char *host, unsigned port)
{
    const sb_egress_rule_t *r = sb_egress_match_name(&s_rs, host, port);
    return r ? r->text : "(none)";
}

static const char *
s_class(const char *ip)
{
    uint8_t a[16];
    int fam = 0;
    if (!sb_egress_ip_literal(ip, a, &fam))
        return "(not an IP)";
    const char *c = sb_egress_addr_class(a, fam);
    return c ? c : "public";
}

static const char *
s_addr_rule(const char *ip, unsigned port)
{
    uint8_t a[16];
    int fam = 0;
    if (!sb_egress_ip_literal(ip, a, &fam))
        return "(not an IP)";
    const sb_egress_rule_t *r = sb_egress_match_addr(&s_rs, a, fam, port);
    return r ? r->text : "(none)";
}

/* A ClientHello record naming `name` (or none), built by hand. */
static size_t
s_hello(unsigned char *out, const char *name)
{
    unsigned char body[512];
    size_t n = 0;
    body[n++] = 3, body[n++] = 3;     /* legacy version */
    memset(body + n, 7, 32), n += 32; /* random */
    body[n++] = 0;                    /* session id */
    body[n++] = 0, body[n++] = 2;     /* cipher suites */
    body[n++] = 0x13, body[n++] = 0x01;
    body[n++] = 1, body[n++] = 0; /* compression */
    size_t ext_at = n;
    n += 2;
    if (name) {
        size_t l = strlen(name);
        body[n++] = 0, body[n++] = 0; /* server_name */
        body[n++] = 0, body[n++] = (unsigned char)(l + 5);
        body[n++] = 0, body[n++] = (unsigned char)(l + 3);
        body[n++] = 0; /* host_name */
        body[n++] = 0, body[n++] = (unsigned char)l;
        memcpy(body + n, name, l), n += l;
    }
    body[ext_at] = (unsigned char)((n - ext_at - 2) >> 8);
    body[ext_at + 1] = (unsigned char)(n - ext_at - 2);
    size_t hl = n + 4;
    out[0] = 22, out[1] = 3, out[2] = 1;
    out[3] = (unsigned char)(hl >> 8), out[4] = (unsigned char)hl;
    out[5] = 1, out[6] = 0, out[7] = (unsigned char)(n >> 8);
    out[8] = (unsigned char)n;
    memcpy(out + 9, body, n);
    return n + 9;
}

int
main(void)
{
    /* Rules as written. */
    ok(s_parse("pypi.org,*.pythonhosted.org,data.test:8443,10.0.0.0/8,"
               "[fd00::1]:443,fd00::/8,127.0.0.2") == 0 &&
           s_rs.n == 7,
       "host, *.domain, host:port, CIDR, [v6]:port, v6 CIDR and an IP parse");
    is_str(s_name_rule("pypi.org", 443), "pypi.org", "host allows port 443");
    is_str(s_name_rule("pypi.org", 80), "pypi.org", "host allows port 80");
    is_str(s_name_rule("pypi.org", 22), "(none)",
           "host alone does not allow another port");
    is_str(s_name_rule("files.pythonhosted.org", 443), "*.pythonhosted.org",
           "*.domain allows a name beneath it");
    is_str(s_name_rule("pythonhosted.org", 443), "(none)",
           "*.domain does not allow the domain itself");
    is_str(s_name_rule("evilpythonhosted.org", 443), "(none)",
           "*.domain matches at a label boundary only");
    is_str(s_name_rule("data.test", 8443), "data.test:8443",
           "host:port allows that port");
    is_str(s_name_rule("data.test", 443), "(none)",
           "host:port allows no other port");
    is_str(s_addr_rule("10.1.2.3", 443), "10.0.0.0/8",
           "a CIDR covers its addresses");
    is_str(s_addr_rule("11.0.0.1", 443), "(none)",
           "a CIDR covers nothing outside it");
    is_str(s_addr_rule("fd00::1", 443), "[fd00::1]:443",
           "[v6]:port names that address on that port");
    is_str(s_addr_rule("127.0.0.2", 0), "127.0.0.2",
           "an IP rule covers that address for a resolved name on any port");
    static const char *const bad[] = {
        "",   "a,,b",    "http://x",    "x:0",    "x:65536", "a..b",
        "*.", "a*b.org", "10.0.0.0/33", "name/8", "[::1",    "-:-"};
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sb_egress_rules_t rs;
        memset(&rs, 0, sizeof rs);
        err_t err = {0};
        refused += sb_egress_rules_parse(&rs, bad[i], &err) < 0 &&
                   err.code == ERR_USAGE && err.text[0];
    }
    is_int(refused, (int)(sizeof bad / sizeof bad[0]),
           "malformed rules are usage errors with a message");

    /* The ranges an allowed name may not resolve into. */
    is_str(s_class("127.0.0.3"), "loopback", "127/8 is loopback");
    is_str(s_class("10.9.9.9"), "private (RFC 1918)", "10/8 is private");
    is_str(s_class("192.168.1.1"), "private (RFC 1918)",
           "192.168/16 is private");
    is_str(s_class("172.31.0.1"), "private (RFC 1918)", "172.16/12 is private");
    is_str(s_class("169.254.169.254"), "link-local (incl. cloud metadata)",
           "the metadata address is link-local");
    is_str(s_class("100.64.0.1"), "shared CGNAT (100.64.0.0/10)",
           "100.64/10 is CGNAT");
    is_str(s_class("224.0.0.1"), "multicast", "224/4 is multicast");
    is_str(s_class("255.255.255.255"), "reserved or broadcast",
           "broadcast is refused");
    is_str(s_class("0.0.0.0"), "unspecified (0.0.0.0/8)", "0.0.0.0 is refused");
    is_str(s_class("::1"), "loopback", "::1 is loopback");
    is_str(s_class("::"), "unspecified", ":: is unspecified");
    is_str(s_class("::ffff:127.0.0.1"), "loopback",
           "a v4-mapped v6 address is judged as its v4 address");
    is_str(s_class("fd12::1"), "private (unique local fc00::/7)",
           "fc00::/7 is private");
    is_str(s_class("fe80::1"), "link-local (fe80::/10)",
           "fe80::/10 is link-local");
    is_str(s_class("ff02::1"), "multicast", "ff00::/8 is multicast");
    is_str(s_class("93.184.216.34"), "public", "a public v4 address passes");
    is_str(s_class("2606:2800:220:1::1"), "public",
           "a public v6 address passes");

    char buf[300];
    is_str(sb_egress_suggest("example.org", 443, buf, sizeof buf),
           "example.org", "the suggestion leaves out ports 80 and 443");
    is_str(sb_egress_suggest("::1", 8080, buf, sizeof buf), "[::1]:8080",
           "the suggestion brackets a v6 address with a port");

    /* The ClientHello's server name. */
    unsigned char h[600];
    char name[256];
    size_t n = s_hello(h, "data.test");
    ok(sb_egress_sni_parse(h, n, name, sizeof name) == SB_SNI_FOUND &&
           strcmp(name, "data.test") == 0,
       "the SNI of a ClientHello is read");
    ok(sb_egress_sni_parse(h, n - 1, name, sizeof name) == SB_SNI_MORE,
       "a ClientHello cut short asks for more bytes");
    n = s_hello(h, NULL);
    ok(sb_egress_sni_parse(h, n, name, sizeof name) == SB_SNI_NONE,
       "a ClientHello without server_name is told apart");
    n = s_hello(h, "data.test");
    h[9 + 2 + 32 + 1 + 1] = 0xff; /* cipher suites length past the end */
    ok(sb_egress_sni_parse(h, n, name, sizeof name) == SB_SNI_NOT_TLS,
       "a length pointing past the message is refused");
    const unsigned char ssh[] = "SSH-2.0-OpenSSH_9.6\r\n";
    ok(sb_egress_sni_parse(ssh, sizeof ssh - 1, name, sizeof name) ==
           SB_SNI_NOT_TLS,
       "a stream that is not TLS is refused");
    n = s_hello(h, "a-name-longer-than-the-buffer.test");
    ok(sb_egress_sni_parse(h, n, name, 8) == SB_SNI_NOT_TLS,
       "a name longer than the caller's buffer is refused, never cut");

    /* Request heads. */
    sb_egress_req_t r;
    const char *why = NULL;
    static const char c1[] = "CONNECT data.test:443 HTTP/1.1\r\n\r\n";
    ok(sb_egress_req_parse(c1, sizeof c1 - 1, &r, &why) == 0 && r.connect &&
           strcmp(r.host, "data.test") == 0 && r.port == 443,
       "CONNECT host:port parses");
    static const char c2[] = "CONNECT data.test HTTP/1.1\r\n\r\n";
    ok(sb_egress_req_parse(c2, sizeof c2 - 1, &r, &why) < 0 && why,
       "CONNECT without a port is refused");
    static const char g1[] = "GET http://data.test:8080/a?b HTTP/1.1\r\nHost: "
                             "data.test:8080\r\n\r\n";
    ok(sb_egress_req_parse(g1, sizeof g1 - 1, &r, &why) == 0 && !r.connect &&
           r.port == 8080 && sb_egress_req_host_matches(&r),
       "an absolute-form GET with a matching Host parses");
    static const char g2[] =
        "GET http://data.test/ HTTP/1.1\r\nHost: other.test\r\n\r\n";
    ok(sb_egress_req_parse(g2, sizeof g2 - 1, &r, &why) == 0 &&
           !sb_egress_req_host_matches(&r),
       "a Host that is not the target does not match");
    static const char g3[] =
        "GET http://data.test/ HTTP/1.1\r\nHost: data.test\r\nHost: x\r\n\r\n";
    ok(sb_egress_req_parse(g3, sizeof g3 - 1, &r, &why) < 0,
       "two Host headers are refused");
    static const char g4[] = "GET /relative HTTP/1.1\r\nHost: x\r\n\r\n";
    ok(sb_egress_req_parse(g4, sizeof g4 - 1, &r, &why) < 0,
       "an origin-form request (no target host) is refused");
    static const char g5[] =
        "GET http://user@data.test/ HTTP/1.1\r\nHost: data.test\r\n\r\n";
    ok(sb_egress_req_parse(g5, sizeof g5 - 1, &r, &why) < 0,
       "user info in the URL is refused");
    ok(sb_egress_req_hop_header("Proxy-Authorization: x", 22) &&
           !sb_egress_req_hop_header("Accept: */*", 11),
       "Proxy-* headers are dropped, others kept");
    return done_testing();
}
