/*
 * sb_egress_rule: the --allow-net rules and the judgement of one
 * destination against them. No I/O (the proxy resolves; this only
 * judges), so it is unit-tested on strings alone.
 *
 * A rule is one of
 *   host          that name exactly (ports 80 and 443)
 *   *.domain      any name ending in ".domain" (not domain itself)
 *   host:port     that name on that port only (also *.domain:port)
 *   IP            an IPv4 or IPv6 literal ([v6]:port with a port)
 *   CIDR          10.0.0.0/8, fd00::/8 (and CIDR:port)
 * An address rule does two things: the code may name that address as an
 * IP literal, and an allowed name may resolve into it although the range
 * is special (loopback, private, link-local, CGNAT, multicast, reserved):
 * without such a rule those ranges are refused (DNS rebinding).
 */
#ifndef SANDBOX_SB_EGRESS_RULE_H
#define SANDBOX_SB_EGRESS_RULE_H

#include "common/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SB_EGRESS_MAX_RULES 64
#define SB_EGRESS_HOST_MAX 253 /* longest DNS name */

typedef enum sb_egress_rule_kind {
    SB_EGRESS_HOST = 1,   /* host equals name */
    SB_EGRESS_SUFFIX = 2, /* host ends in "." name */
    SB_EGRESS_ADDR = 3    /* address within addr/prefix */
} sb_egress_rule_kind_t;

typedef struct sb_egress_rule {
    sb_egress_rule_kind_t kind;
    char name[SB_EGRESS_HOST_MAX + 1];  /* HOST, SUFFIX: lower case, no dot
                                           at either end */
    uint8_t addr[16];                   /* ADDR: network bytes (v4: 4) */
    int family;                         /* ADDR: AF_INET or AF_INET6 */
    int prefix;                         /* ADDR: prefix length */
    unsigned port;                      /* 0: ports 80 and 443 */
    char text[SB_EGRESS_HOST_MAX + 16]; /* the rule as written */
} sb_egress_rule_t;

typedef struct sb_egress_rules {
    size_t n;                                   /* rules used */
    sb_egress_rule_t rule[SB_EGRESS_MAX_RULES]; /* in the order given */
} sb_egress_rules_t;

/* Parse "RULE[,RULE...]" (what --allow-net takes; the flag may be given
 * more than once, each call appends). -1 with ERR_USAGE naming the bad
 * rule. */
int sb_egress_rules_parse(sb_egress_rules_t *rs, const char *list, err_t *err);

/* Is `host` an IP literal (v4, v6, or [v6])? Fills addr/family if so. */
bool sb_egress_ip_literal(const char *host, uint8_t addr[16], int *family);

/* Normalise a host name in place: lower case, one trailing dot dropped.
 * -1 when it is not a DNS name (letters, digits, '-', '.', '_'; labels
 * 1..63; at most 253). */
int sb_egress_norm_host(char *host);

/* The rule allowing name `host` (normalised) on `port`, or NULL. */
const sb_egress_rule_t *sb_egress_match_name(const sb_egress_rules_t *rs,
                                             const char *host, unsigned port);
/* The address rule covering `addr` on `port` (port 0: any port, for a
 * resolved address of an allowed name), or NULL. */
const sb_egress_rule_t *sb_egress_match_addr(const sb_egress_rules_t *rs,
                                             const uint8_t addr[16], int family,
                                             unsigned port);

/* The special range `addr` is in ("loopback", "private (RFC 1918)",
 * "link-local", ...), or NULL for an ordinary public address. */
const char *sb_egress_addr_class(const uint8_t addr[16], int family);

/* The rule text that would allow `host` on `port` ("example.org",
 * "example.org:8443", "[::1]:8080"), into buf; returns buf. */
const char *sb_egress_suggest(const char *host, unsigned port, char *buf,
                              size_t size);

#endif
