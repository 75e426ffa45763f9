/*
 * sb_egress_sni: the server name of a TLS ClientHello, read from the
 * first bytes a client sends after CONNECT. No I/O; every length is
 * checked against the bytes present, so it is fuzzed on bytes alone
 * (tests/fuzz/sb_egress_sni.c).
 */
#ifndef SANDBOX_SB_EGRESS_SNI_H
#define SANDBOX_SB_EGRESS_SNI_H

#include <stddef.h>

/* Largest ClientHello the proxy reads (handshake bytes, over records). */
#define SB_EGRESS_HELLO_MAX 16384

typedef enum sb_egress_sni_rc {
    SB_SNI_FOUND = 0,   /* the name is in `name` */
    SB_SNI_NONE = 1,    /* a complete ClientHello without server_name */
    SB_SNI_MORE = 2,    /* not enough bytes yet: read more and call again */
    SB_SNI_NOT_TLS = -1 /* not a TLS ClientHello (or malformed, too big) */
} sb_egress_sni_rc_t;

/* Look at `len` bytes `data` (TLS records from the start of the stream).
 * On SB_SNI_FOUND `name` holds the host_name (NUL-terminated; refused
 * as SB_SNI_NOT_TLS if it does not fit in `size` or holds a NUL). */
sb_egress_sni_rc_t sb_egress_sni_parse(const unsigned char *data, size_t len,
                                       char *name, size_t size);

#endif
