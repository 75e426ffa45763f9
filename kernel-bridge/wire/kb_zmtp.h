/*
 * kb_zmtp: the ZMTP 3.0 wire of a SUB peer with the NULL mechanism, as
 * bytes only: what we send once connected, and a decoder for what the
 * kernel's PUB socket sends back. No I/O, so every byte a hostile kernel
 * could send can be fuzzed (kb_zmtp_sub owns the socket).
 *
 * The decoder is incremental: it is handed everything received and not yet
 * consumed, and says how much of it is used up. A complete message comes
 * back as frame views into those bytes; a message that would pass the
 * byte or frame cap is dropped as soon as a frame header shows it, and the
 * rest of it is skipped as it arrives without ever being buffered.
 */
#ifndef KERNEL_BRIDGE_KB_ZMTP_H
#define KERNEL_BRIDGE_KB_ZMTP_H

#include "kernel-bridge/wire/kb_wire.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Greeting and READY (Socket-Type SUB). */
#define KB_ZMTP_HELLO_LEN 91
/* The ZMTP 3.0 subscription to every topic. */
#define KB_ZMTP_SUBSCRIBE_LEN 3
/* Longest frame header: flags and an 8-byte size. */
#define KB_ZMTP_HEADER_MAX 9

typedef enum kb_zmtp_state {
    KB_ZMTP_GREETING,  /* waiting for the peer's 64-byte greeting */
    KB_ZMTP_HANDSHAKE, /* waiting for its READY command */
    KB_ZMTP_OPEN,      /* messages flow */
    KB_ZMTP_BROKEN,    /* the peer broke the protocol; why says how */
} kb_zmtp_state_t;

typedef struct kb_zmtp {
    kb_zmtp_state_t state;
    size_t max_bytes;  /* a message of more bytes in all is dropped; the
                          owner may change it between calls */
    size_t max_frames; /* ... and one of more frames */
    uint64_t skip;     /* bytes of a dropped frame or command still due */
    bool dropping;     /* frames of a dropped message are still due */
    char why[160];     /* when BROKEN: what the peer did, printable */
} kb_zmtp_t;

typedef enum kb_zmtp_result {
    KB_ZMTP_NEED,    /* more bytes needed (what was used is progress) */
    KB_ZMTP_MSG,     /* a complete message: frames[0..*n) */
    KB_ZMTP_DROPPED, /* a message over a cap was dropped */
    KB_ZMTP_ERROR,   /* the peer broke the protocol: disconnect */
} kb_zmtp_result_t;

/* A decoder at the start of a connection. `max_frames` is at most
 * KB_FRAMES_MAX (the views array every caller passes). */
void kb_zmtp_init(kb_zmtp_t *z, size_t max_bytes, size_t max_frames);

/* The KB_ZMTP_HELLO_LEN bytes to write right after connecting. */
const uint8_t *kb_zmtp_hello(void);
/* The KB_ZMTP_SUBSCRIBE_LEN bytes to write once the decoder is OPEN, not
 * before: libzmq takes every message that arrives before it has sent its
 * own READY for a handshake command, and drops the connection. */
const uint8_t *kb_zmtp_subscribe(void);

/* Decode from data[0..len). *used is how many leading bytes are done with
 * (the caller drops them before the next call, keeping the rest). On MSG,
 * frames[0..*n) point into data[0..*used) and stay valid while those bytes
 * do. A command after the handshake (e.g. a PING) is skipped. */
kb_zmtp_result_t kb_zmtp_decode(kb_zmtp_t *z, const uint8_t *data, size_t len,
                                size_t *used, kb_frame_t *frames, size_t *n);

#endif
