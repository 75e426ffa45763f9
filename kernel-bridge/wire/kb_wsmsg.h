/*
 * kb_wsmsg: Jupyter messages as Jupyter Server carries them over its
 * kernel WebSocket (/api/kernels/{id}/channels). No I/O, so it can be
 * unit-tested and fuzzed without a server.
 *
 * Two framings, chosen by the server when the socket opens:
 *
 *  - "v1.kernel.websocket.jupyter.org" (binary frames): a little-endian
 *    uint64 count N, then N uint64 offsets from the start of the frame;
 *    bytes [off0, off1) are the channel name, then header, parent_header,
 *    metadata, content and any buffers, each [off_i, off_i+1), the last
 *    offset being the frame's end.
 *  - legacy: a text frame holding one JSON object {header, parent_header,
 *    metadata, content, channel, buffers}, or, when the message carries
 *    buffers, a binary frame: big-endian uint32 count N, N uint32 offsets,
 *    the JSON object at the first offset, then the buffers.
 *
 * A server is as untrusted as a kernel: every offset is checked against
 * the frame before it is used, JSON parts go through kb_wire's size and
 * depth limits, a channel other than shell, iopub, stdin or control is
 * refused, and nothing refused is returned. Messages are not signed on
 * this hop (the server signs them towards the kernel).
 */
#ifndef KERNEL_BRIDGE_KB_WSMSG_H
#define KERNEL_BRIDGE_KB_WSMSG_H

#include "common/buf.h"
#include "common/err.h"
#include "kernel-bridge/kb_conn.h"
#include "kernel-bridge/wire/kb_frames.h"
#include "kernel-bridge/wire/kb_msg.h"
#include "kernel-bridge/wire/kb_wire.h"

#include <stdbool.h>
#include <stddef.h>

#define KB_WS_V1_PROTOCOL "v1.kernel.websocket.jupyter.org"

typedef enum { KB_WS_LEGACY, KB_WS_V1 } kb_ws_proto_t;

/* Parts of one v1 frame (header ... buffers) after the channel; at most
 * this many are accepted, as for a ZeroMQ message. */
#define KB_WS_MAX_PARTS KB_FRAMES_MAX

/* The channel a frame is for, without parsing its JSON: 0 and *ch set, or
 * -1 (ERR_KERNEL: unknown channel name, bad offsets), counted in `stats`
 * (may be NULL) as kb_ws_decode counts. Legacy frames carry the channel
 * inside their JSON: it is read off the object's top level without
 * parsing it, and only when that is not plain (an escaped key, say) is the
 * frame decoded, within the parse-cost bound. */
int kb_ws_channel(const void *data, size_t len, bool binary,
                  kb_ws_proto_t proto, kb_wire_stats_t *stats, kb_channel_t *ch,
                  err_t *err);

/* Decode one frame into a new message (caller destroys) and its channel.
 * NULL with err when refused: counted in stats->malformed (bad framing,
 * JSON, depth), stats->oversized (past lim->max_bytes),
 * stats->bad_channel (unknown channel) or stats->foreign (filtered out by
 * `lim`'s parent_id / status_only before any JSON was parsed: for v1 the
 * parent_header part must mention the id, for legacy frames the JSON
 * object). JSON passes the depth and parse-cost bound of common/jsonlim
 * (lim->json_allowance). `lim` and `stats` may be NULL. */
kb_msg_t *kb_ws_decode(const void *data, size_t len, bool binary,
                       kb_ws_proto_t proto, const kb_frames_limits_t *lim,
                       kb_wire_stats_t *stats, kb_channel_t *ch, err_t *err);

/* Encode `msg` for channel `ch` into `out` (appended; out->max caps it).
 * *binary says which frame type to send. 0, or -1 (ERR_KERNEL). */
int kb_ws_encode(const kb_msg_t *msg, kb_channel_t ch, kb_ws_proto_t proto,
                 buf_t *out, bool *binary, err_t *err);

/* "shell" -> KB_SHELL etc.; -1 for anything else (heartbeat included: the
 * server answers no heartbeats over the socket). */
int kb_ws_channel_from_name(const char *name, size_t len);

#endif
