#include "common/netaddr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
netaddr_parse_ipv4(const char *spec, const char *flag, struct sockaddr_in *sa,
                   err_t *err)
{
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    const char *colon = strrchr(spec, ':');
    const char *port = colon ? colon + 1 : spec;
    char addr[64] = "127.0.0.1";
    if (colon) {
        size_t n = (size_t)(colon - spec);
        if (n == 0 || n >= sizeof addr)
            return err_set(err, ERR_USAGE, "%s %s: give [ADDR:]PORT", flag,
                           spec);
        memcpy(addr, spec, n);
        addr[n] = '\0';
        if (strcmp(addr, "localhost") == 0)
            snprintf(addr, sizeof addr, "127.0.0.1");
    }
    char *end;
    long p = strtol(port, &end, 10);
    if (!*port || *end || p < 0 || p > 65535)
        return err_set(err, ERR_USAGE,
                       "%s %s: the port must be a number from 0 to 65535", flag,
                       spec);
    if (inet_pton(AF_INET, addr, &sa->sin_addr) != 1)
        return err_set(err, ERR_USAGE, "%s %s: %s is not an IPv4 address", flag,
                       spec, addr);
    sa->sin_port = htons((uint16_t)p);
    return 0;
}
