/*
 * kb_frames: what one received Jupyter message may be, judged from its raw
 * frames before anything is hashed or copied, and the parse that follows.
 * No I/O: every transport (ZeroMQ, our ZMTP reader, the WebSocket codec)
 * collects frames its own way and hands them here, so one set of limits
 * means the same thing on every road in.
 *
 * A message is dropped and counted when it has more than max_frames
 * frames or more than max_bytes in all (oversized), and when the receiver
 * said which parent it waits for and the parent_header frame does not
 * mention it (foreign). Then kb_wire refuses what it must (signature,
 * framing, size, depth); nothing dropped is ever returned.
 */
#ifndef KERNEL_BRIDGE_KB_FRAMES_H
#define KERNEL_BRIDGE_KB_FRAMES_H

#include "common/err.h"
#include "kernel-bridge/wire/kb_msg.h"
#include "kernel-bridge/wire/kb_wire.h"

#include <stdbool.h>
#include <stddef.h>

/* Frames of one message: identities, delimiter, signature, four JSON parts
 * and buffers. ipywidgets sends a handful of buffers; 64 is generous. */
#define KB_FRAMES_MAX 64

/* What one received message may be, checked before it is hashed. */
typedef struct kb_frames_limits {
    size_t max_frames; /* 0 = KB_FRAMES_MAX (also the most allowed) */
    size_t max_bytes;  /* all frames together; 0 = no cap */
    /* When set: drop, unhashed and unparsed, a message whose parent_header
     * frame does not contain this text (counted as foreign). The receiver
     * ignores such messages anyway; dropping them before the HMAC makes a
     * flood of them cost next to nothing. */
    const char *parent_id;
    /* When set: drop the same way a message whose header frame does not
     * contain "status" (a receiver that stores no more outputs). */
    bool status_only;
    /* What each JSON part's parsed tree may cost beyond its length
     * (kb_wire_limits_t.json_allowance); 0 = the default. */
    size_t json_allowance;
} kb_frames_limits_t;

/* The frame cap `limits` sets (KB_FRAMES_MAX when NULL or 0). */
size_t kb_frames_max(const kb_frames_limits_t *limits);

/* Check and parse the frames of one message: a message over `limits` or
 * meant for someone else is dropped, counted in *stats and NULL, with err
 * saying why. `dropped`: the receiver already dropped it over its own caps
 * while collecting (no frames); it is counted and reported the same way.
 * `limits`, `stats` and `err` may be NULL. */
kb_msg_t *kb_frames_parse(const kb_frame_t *frames, size_t n, bool dropped,
                          const kb_key_t *key, const kb_frames_limits_t *limits,
                          kb_wire_stats_t *stats, err_t *err);

#endif
