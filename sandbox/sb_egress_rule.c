/*
 * sb_egress_rule: parsing --allow-net rules and judging destinations.
 */
#include "sandbox/sb_egress_rule.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

bool
sb_egress_ip_literal(const char *host, uint8_t addr[16], int *family)
{
    char tmp[64];
    size_t n = strlen(host);
    if (n >= sizeof tmp)
        return false;
    if (host[0] == '[' && n > 2 && host[n - 1] == ']') {
        memcpy(tmp, host + 1, n - 2);
        tmp[n - 2] = '\0';
    } else {
        memcpy(tmp, host, n + 1);
    }
    memset(addr, 0, 16);
    if (inet_pton(AF_INET, tmp, addr) == 1) {
        *family = AF_INET;
        return true;
    }
    if (inet_pton(AF_INET6, tmp, addr) == 1) {
        *family = AF_INET6;
        return true;
    }
    return false;
}

int
sb_egress_norm_host(char *host)
{
    size_t n = strlen(host);
    if (n && host[n - 1] == '.')
        host[--n] = '\0';
    if (n == 0 || n > SB_EGRESS_HOST_MAX)
        return -1;
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)host[i];
        if (c == '.') {
            if (label == 0)
                return -1;
            label = 0;
            continue;
        }
        if (!(isalnum(c) || c == '-' || c == '_') || ++label > 63)
            return -1;
        host[i] = (char)tolower(c);
    }
    return label ? 0 : -1;
}

static int
s_port(const char *s, unsigned *out)
{
    char *end = NULL;
    if (!isdigit((unsigned char)s[0]))
        return -1;
    unsigned long v = strtoul(s, &end, 10);
    if (*end || v == 0 || v > 65535)
        return -1;
    *out = (unsigned)v;
    return 0;
}

/* One rule `s` (NUL-terminated, no comma) into r. */
static int
s_parse_one(sb_egress_rule_t *r, const char *s, err_t *err)
{
    char buf[SB_EGRESS_HOST_MAX + 16];
    memset(r, 0, sizeof *r);
    if (strlen(s) >= sizeof buf)
        return err_set(err, ERR_USAGE,
                       "--allow-net: rule '%.40s...' is too "
                       "long",
                       s);
    snprintf(r->text, sizeof r->text, "%s", s);
    snprintf(buf, sizeof buf, "%s", s);
    /* Split off ":port": the last colon, unless the rest is a bare IPv6
     * literal (more than one colon, no brackets). */
    char *colon = NULL;
    if (buf[0] == '[') {
        char *close = strchr(buf, ']');
        if (!close)
            goto bad;
        if (close[1] == ':')
            colon = close + 1;
        else if (close[1] && close[1] != '/')
            goto bad;
    } else {
        char *first = strchr(buf, ':');
        if (first && first == strrchr(buf, ':'))
            colon = first;
    }
    if (colon) {
        if (s_port(colon + 1, &r->port) < 0)
            return err_set(err, ERR_USAGE,
                           "--allow-net: '%s': the port must be 1..65535", s);
        *colon = '\0';
    }
    char *slash = strchr(buf, '/');
    int prefix = -1;
    if (slash) {
        char *end = NULL;
        long v = strtol(slash + 1, &end, 10);
        if (!isdigit((unsigned char)slash[1]) || *end || v < 0 || v > 128)
            goto bad;
        prefix = (int)v;
        *slash = '\0';
    }
    if (sb_egress_ip_literal(buf, r->addr, &r->family)) {
        int max = r->family == AF_INET ? 32 : 128;
        if (prefix > max)
            goto bad;
        r->kind = SB_EGRESS_ADDR;
        r->prefix = prefix < 0 ? max : prefix;
        return 0;
    }
    if (prefix >= 0)
        goto bad;
    char *name = buf;
    r->kind = SB_EGRESS_HOST;
    if (strncmp(name, "*.", 2) == 0) {
        r->kind = SB_EGRESS_SUFFIX;
        name += 2;
    }
    if (strchr(name, '*') || sb_egress_norm_host(name) < 0)
        goto bad;
    memcpy(r->name, name, strlen(name) + 1); /* <= 253 (norm_host) */
    return 0;
bad:
    return err_set(err, ERR_USAGE,
                   "--allow-net: '%s' is not a rule; use host, *.domain, "
                   "host:port, an IP address or a CIDR such as 10.0.0.0/8",
                   s);
}

int
sb_egress_rules_parse(sb_egress_rules_t *rs, const char *list, err_t *err)
{
    const char *p = list ? list : "";
    if (!*p)
        return err_set(err, ERR_USAGE,
                       "--allow-net needs RULE[,RULE...] (host, *.domain, "
                       "host:port, IP or CIDR)");
    while (*p) {
        size_t n = strcspn(p, ",");
        char one[SB_EGRESS_HOST_MAX + 16];
        if (n == 0 || n >= sizeof one)
            return err_set(err, ERR_USAGE,
                           "--allow-net: empty or too long rule in '%.60s'",
                           list);
        if (rs->n == SB_EGRESS_MAX_RULES)
            return err_set(err, ERR_USAGE, "--allow-net: more than %d rules",
                           SB_EGRESS_MAX_RULES);
        memcpy(one, p, n);
        one[n] = '\0';
        if (s_parse_one(&rs->rule[rs->n], one, err) < 0)
            return -1;
        rs->n++;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

static bool
s_port_ok(const sb_egress_rule_t *r, unsigned port)
{
    if (r->port)
        return r->port == port;
    return port == 80 || port == 443;
}

const sb_egress_rule_t *
sb_egress_match_name(const sb_egress_rules_t *rs, const char *host,
                     unsigned port)
{
    size_t hn = strlen(host);
    for (size_t i = 0; i < rs->n; i++) {
        const sb_egress_rule_t *r = &rs->rule[i];
        if (!s_port_ok(r, port))
            continue;
        if (r->kind == SB_EGRESS_HOST && strcmp(r->name, host) == 0)
            return r;
        size_t rn = strlen(r->name);
        if (r->kind == SB_EGRESS_SUFFIX && hn > rn + 1 &&
            host[hn - rn - 1] == '.' && strcmp(host + hn - rn, r->name) == 0)
            return r;
    }
    return NULL;
}

static bool
s_in_prefix(const uint8_t *a, const uint8_t *net, int bits)
{
    int whole = bits / 8, rest = bits % 8;
    if (memcmp(a, net, (size_t)whole) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[whole] & mask) == (net[whole] & mask);
}

const sb_egress_rule_t *
sb_egress_match_addr(const sb_egress_rules_t *rs, const uint8_t addr[16],
                     int family, unsigned port)
{
    for (size_t i = 0; i < rs->n; i++) {
        const sb_egress_rule_t *r = &rs->rule[i];
        if (r->kind != SB_EGRESS_ADDR || r->family != family)
            continue;
        if (port && !s_port_ok(r, port))
            continue;
        if (s_in_prefix(addr, r->addr, r->prefix))
            return r;
    }
    return NULL;
}

static const char *
s_v4_class(const uint8_t *a)
{
    static const struct {
        uint8_t net[4];
        int bits;
        const char *what;
    } t[] = {
        {{0, 0, 0, 0}, 8, "unspecified (0.0.0.0/8)"},
        {{10, 0, 0, 0}, 8, "private (RFC 1918)"},
        {{100, 64, 0, 0}, 10, "shared CGNAT (100.64.0.0/10)"},
        {{127, 0, 0, 0}, 8, "loopback"},
        {{169, 254, 0, 0}, 16, "link-local (incl. cloud metadata)"},
        {{172, 16, 0, 0}, 12, "private (RFC 1918)"},
        {{192, 0, 0, 0}, 24, "reserved (IETF protocol assignments)"},
        {{192, 0, 2, 0}, 24, "reserved (documentation)"},
        {{192, 88, 99, 0}, 24, "reserved (6to4 relay)"},
        {{192, 168, 0, 0}, 16, "private (RFC 1918)"},
        {{198, 18, 0, 0}, 15, "reserved (benchmarking)"},
        {{198, 51, 100, 0}, 24, "reserved (documentation)"},
        {{203, 0, 113, 0}, 24, "reserved (documentation)"},
        {{224, 0, 0, 0}, 4, "multicast"},
        {{240, 0, 0, 0}, 4, "reserved or broadcast"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (s_in_prefix(a, t[i].net, t[i].bits))
            return t[i].what;
    return NULL;
}

const char *
sb_egress_addr_class(const uint8_t addr[16], int family)
{
    if (family == AF_INET)
        return s_v4_class(addr);
    static const uint8_t zero[16] = {0};
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
                                       0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t doc[4] = {0x20, 0x01, 0x0d, 0xb8};
    if (memcmp(addr, zero, 15) == 0)
        return addr[15] == 1 ? "loopback" : "unspecified";
    if (memcmp(addr, mapped, 12) == 0) { /* ::ffff:a.b.c.d: the v4 rules */
        const char *c = s_v4_class(addr + 12);
        return c ? c : NULL;
    }
    if ((addr[0] & 0xfe) == 0xfc)
        return "private (unique local fc00::/7)";
    if (addr[0] == 0xfe && (addr[1] & 0xc0) == 0x80)
        return "link-local (fe80::/10)";
    if (addr[0] == 0xff)
        return "multicast";
    if (memcmp(addr, doc, 4) == 0)
        return "reserved (documentation)";
    if (addr[0] == 0x20 && addr[1] == 0x02)
        return "reserved (6to4 2002::/16, may embed any IPv4)";
    if ((addr[0] & 0xe0) != 0x20) /* outside 2000::/3 global unicast */
        return "reserved (outside 2000::/3)";
    return NULL;
}

const char *
sb_egress_suggest(const char *host, unsigned port, char *buf, size_t size)
{
    uint8_t a[16];
    int fam = 0;
    bool v6 = sb_egress_ip_literal(host, a, &fam) && fam == AF_INET6;
    bool bracketed = host[0] == '[';
    if (port == 80 || port == 443)
        snprintf(buf, size, "%s", host);
    else if (v6 && !bracketed)
        snprintf(buf, size, "[%s]:%u", host, port);
    else
        snprintf(buf, size, "%s:%u", host, port);
    return buf;
}
