/*
 * netaddr: the one parser for listen addresses given on the command line.
 */
#ifndef COMMON_NETADDR_H
#define COMMON_NETADDR_H

#include "common/err.h"

#include <netinet/in.h>

/* "[ADDR:]PORT" (ADDR an IPv4 address or "localhost"; default 127.0.0.1;
 * PORT 0..65535) into *sa. `flag` names the option in messages
 * ("--listen"). 0, or -1 with ERR_USAGE. */
int netaddr_parse_ipv4(const char *spec, const char *flag,
                       struct sockaddr_in *sa, err_t *err);

#endif
