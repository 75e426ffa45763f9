/*
 * kb_msg: one Jupyter message (protocol 5.3): header, parent_header,
 * metadata, content, plus the routing identities and binary buffers that
 * travel around it on the wire.
 *
 * Ownership: a kb_msg_t owns its four JSON objects, identities and buffers.
 * Accessors returning json_t * or const char * return BORROWED values, valid
 * while the message lives. Setters that take json_t * STEAL the reference.
 * Invariant: header, parent_header, metadata and content are always JSON
 * objects (possibly empty), never NULL.
 */
#ifndef KERNEL_BRIDGE_KB_MSG_H
#define KERNEL_BRIDGE_KB_MSG_H

#include "common/err.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define KB_PROTOCOL_VERSION "5.3"

typedef struct kb_msg kb_msg_t;

/* A byte string; in a kb_msg_t always owned by the message. */
typedef struct kb_blob {
    uint8_t *data; /* owned; may be NULL when len == 0 */
    size_t len;    /* bytes */
} kb_blob_t;

/* A new message with a fresh header (random msg_id, date now with
 * microseconds, version 5.3) and empty parent_header, metadata and
 * content. `session` and `username` are copied. */
kb_msg_t *kb_msg_new(const char *msg_type, const char *session,
                     const char *username);
/* A message built from parsed parts; steals all four (each must be an
 * object). Returns NULL (releasing them) if any is not an object. */
kb_msg_t *kb_msg_from_parts(json_t *header, json_t *parent_header,
                            json_t *metadata, json_t *content);
/* For kb_wire: a received message whose header, parent_header and
 * metadata stay their wire text (copied; checked for size, depth and shape
 * by kb_wire) until first used, since most receivers only need the three
 * ids read off the text by kb_wire. Steals content; NULL if it is not an
 * object. */
#define KB_MSG_WIRE_ID_MAX 128
typedef struct kb_msg_wire {
    struct {
        const void *data;
        size_t len;
    } header, parent, metadata;
    char msg_type[KB_MSG_WIRE_ID_MAX];      /* header.msg_type */
    char msg_id[KB_MSG_WIRE_ID_MAX];        /* header.msg_id, or "" */
    char parent_msg_id[KB_MSG_WIRE_ID_MAX]; /* parent_header.msg_id, or "" */
} kb_msg_wire_t;
kb_msg_t *kb_msg_from_wire(const kb_msg_wire_t *w, json_t *content);
/* A reply/notification to `parent`: copies its header into parent_header
 * and its identities (so a ROUTER can route the answer back). */
kb_msg_t *kb_msg_new_reply(const kb_msg_t *parent, const char *msg_type,
                           const char *session, const char *username);
void kb_msg_destroy(kb_msg_t **msg);

json_t *kb_msg_header(const kb_msg_t *msg);
json_t *kb_msg_parent_header(const kb_msg_t *msg);
json_t *kb_msg_metadata(const kb_msg_t *msg);
json_t *kb_msg_content(const kb_msg_t *msg);
void kb_msg_set_content(kb_msg_t *msg, json_t *content); /* steals */
void kb_msg_set_parent(kb_msg_t *msg, const kb_msg_t *parent);

/* header.msg_type / header.msg_id / parent_header.msg_id, or "" if absent
 * or not a string. Borrowed. */
const char *kb_msg_type(const kb_msg_t *msg);
const char *kb_msg_id(const kb_msg_t *msg);
const char *kb_msg_parent_id(const kb_msg_t *msg);

/* Routing identities (ROUTER side) and extra binary buffers. */
size_t kb_msg_identity_count(const kb_msg_t *msg);
const kb_blob_t *kb_msg_identity(const kb_msg_t *msg, size_t i);
void kb_msg_add_identity(kb_msg_t *msg, const void *data, size_t len);
void kb_msg_copy_identities(kb_msg_t *dst, const kb_msg_t *src);
size_t kb_msg_buffer_count(const kb_msg_t *msg);
const kb_blob_t *kb_msg_buffer(const kb_msg_t *msg, size_t i);
void kb_msg_add_buffer(kb_msg_t *msg, const void *data, size_t len);

/* A random UUID4 in canonical text form into out[37]. */
void kb_msg_new_uuid(char out[37]);

#endif
