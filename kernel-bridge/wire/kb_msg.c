#include "kb_msg.h"

#include "common/clock.h"
#include "common/xalloc.h"

#include <assert.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A JSON part kept as its wire text until first used (kb_msg_from_wire). */
typedef struct s_text {
    char *data; /* owned, NUL-terminated; NULL once parsed or never kept */
    size_t len;
} s_text_t;

struct kb_msg {
    /* owned objects; parent_header and metadata {} for requests. NULL
     * while the matching s_text_t holds the part (parsed on first use) */
    json_t *header;
    json_t *parent_header;
    json_t *metadata;
    json_t *content; /* owned object */
    s_text_t header_text, parent_text, metadata_text;
    /* owned ids read off the wire text by kb_wire, or NULL: then they come
     * from the JSON objects */
    char *msg_type, *msg_id, *parent_msg_id;
    kb_blob_t *ids; /* owned array of nids routing identities */
    size_t nids;
    kb_blob_t *bufs; /* owned array of nbufs binary buffers */
    size_t nbufs;
};

void
kb_msg_new_uuid(char out[37])
{
    uint8_t b[16];
    if (sodium_init() < 0)
        abort(); /* no entropy source: nothing safe can run */
    randombytes_buf(b, sizeof b);
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, 37,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
             b[11], b[12], b[13], b[14], b[15]);
}

kb_msg_t *
kb_msg_from_parts(json_t *header, json_t *parent_header, json_t *metadata,
                  json_t *content)
{
    if (!json_is_object(header) || !json_is_object(parent_header) ||
        !json_is_object(metadata) || !json_is_object(content)) {
        json_decref(header);
        json_decref(parent_header);
        json_decref(metadata);
        json_decref(content);
        return NULL;
    }
    kb_msg_t *msg = xcalloc(1, sizeof *msg);
    msg->header = header;
    msg->parent_header = parent_header;
    msg->metadata = metadata;
    msg->content = content;
    return msg;
}

static s_text_t
s_text(const void *data, size_t len)
{
    s_text_t t = {xmalloc(len + 1), len};
    memcpy(t.data, data, len);
    t.data[len] = '\0';
    return t;
}

kb_msg_t *
kb_msg_from_wire(const kb_msg_wire_t *w, json_t *content)
{
    if (!json_is_object(content)) {
        json_decref(content);
        return NULL;
    }
    kb_msg_t *msg = xcalloc(1, sizeof *msg);
    msg->content = content;
    msg->header_text = s_text(w->header.data, w->header.len);
    msg->parent_text = s_text(w->parent.data, w->parent.len);
    msg->metadata_text = s_text(w->metadata.data, w->metadata.len);
    msg->msg_type = xstrdup(w->msg_type);
    msg->msg_id = xstrdup(w->msg_id);
    msg->parent_msg_id = xstrdup(w->parent_msg_id);
    return msg;
}

/* The object in wire text checked by kb_wire, or {} if it does not parse
 * after all (only a peer that signs garbage gets there). */
static json_t *
s_parse_object(s_text_t *t)
{
    json_t *v = json_loadb(t->data, t->len, 0, NULL);
    free(t->data);
    t->data = NULL;
    if (json_is_object(v))
        return v;
    json_decref(v);
    return json_object();
}

kb_msg_t *
kb_msg_new(const char *msg_type, const char *session, const char *username)
{
    char id[37], date[40];
    kb_msg_new_uuid(id);
    clock_iso8601_now(date, sizeof date);
    json_t *header =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "msg_id", id, "session",
                  session, "username", username, "date", date, "msg_type",
                  msg_type, "version", KB_PROTOCOL_VERSION);
    return kb_msg_from_parts(header, json_object(), json_object(),
                             json_object());
}

kb_msg_t *
kb_msg_new_reply(const kb_msg_t *parent, const char *msg_type,
                 const char *session, const char *username)
{
    kb_msg_t *msg = kb_msg_new(msg_type, session, username);
    kb_msg_set_parent(msg, parent);
    kb_msg_copy_identities(msg, parent);
    return msg;
}

static void
s_free_blobs(kb_blob_t *blobs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(blobs[i].data);
    free(blobs);
}

void
kb_msg_destroy(kb_msg_t **pmsg)
{
    if (!pmsg || !*pmsg)
        return;
    kb_msg_t *msg = *pmsg;
    json_decref(msg->header);
    json_decref(msg->parent_header);
    json_decref(msg->metadata);
    json_decref(msg->content);
    free(msg->header_text.data);
    free(msg->parent_text.data);
    free(msg->metadata_text.data);
    free(msg->msg_type);
    free(msg->msg_id);
    free(msg->parent_msg_id);
    s_free_blobs(msg->ids, msg->nids);
    s_free_blobs(msg->bufs, msg->nbufs);
    free(msg);
    *pmsg = NULL;
}

json_t *
kb_msg_header(const kb_msg_t *cmsg)
{
    kb_msg_t *msg = (kb_msg_t *)cmsg; /* parsed on first use */
    if (!msg->header)
        msg->header = s_parse_object(&msg->header_text);
    assert(json_is_object(msg->header)); /* kb_msg.h: never NULL */
    return msg->header;
}

json_t *
kb_msg_parent_header(const kb_msg_t *cmsg)
{
    kb_msg_t *msg = (kb_msg_t *)cmsg; /* parsed on first use */
    if (!msg->parent_header)
        msg->parent_header = s_parse_object(&msg->parent_text);
    assert(json_is_object(msg->parent_header)); /* kb_msg.h: never NULL */
    return msg->parent_header;
}

json_t *
kb_msg_metadata(const kb_msg_t *cmsg)
{
    kb_msg_t *msg = (kb_msg_t *)cmsg; /* parsed on first use */
    if (!msg->metadata)
        msg->metadata = s_parse_object(&msg->metadata_text);
    assert(json_is_object(msg->metadata)); /* kb_msg.h: never NULL */
    return msg->metadata;
}

json_t *
kb_msg_content(const kb_msg_t *msg)
{
    assert(json_is_object(msg->content)); /* kb_msg.h: never NULL */
    return msg->content;
}

void
kb_msg_set_content(kb_msg_t *msg, json_t *content)
{
    json_decref(msg->content);
    msg->content = json_is_object(content) ? content : json_object();
    if (!json_is_object(content))
        json_decref(content);
}

void
kb_msg_set_parent(kb_msg_t *msg, const kb_msg_t *parent)
{
    json_decref(msg->parent_header);
    free(msg->parent_text.data);
    free(msg->parent_msg_id);
    msg->parent_text.data = msg->parent_msg_id = NULL;
    msg->parent_header = json_deep_copy(kb_msg_header(parent));
}

static const char *
s_str(json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

const char *
kb_msg_type(const kb_msg_t *msg)
{
    if (msg->msg_type)
        return msg->msg_type;
    return s_str(kb_msg_header(msg), "msg_type");
}

const char *
kb_msg_id(const kb_msg_t *msg)
{
    if (msg->msg_id)
        return msg->msg_id;
    return s_str(kb_msg_header(msg), "msg_id");
}

const char *
kb_msg_parent_id(const kb_msg_t *msg)
{
    if (msg->parent_msg_id)
        return msg->parent_msg_id;
    return s_str(kb_msg_parent_header(msg), "msg_id");
}

static void
s_add_blob(kb_blob_t **blobs, size_t *n, const void *data, size_t len)
{
    *blobs = xrealloc(*blobs, (*n + 1) * sizeof **blobs);
    kb_blob_t *b = &(*blobs)[*n];
    b->data = xmalloc(len ? len : 1);
    if (len)
        memcpy(b->data, data, len);
    b->len = len;
    (*n)++;
}

size_t
kb_msg_identity_count(const kb_msg_t *msg)
{
    return msg->nids;
}

const kb_blob_t *
kb_msg_identity(const kb_msg_t *msg, size_t i)
{
    return i < msg->nids ? &msg->ids[i] : NULL;
}

void
kb_msg_add_identity(kb_msg_t *msg, const void *data, size_t len)
{
    s_add_blob(&msg->ids, &msg->nids, data, len);
}

void
kb_msg_copy_identities(kb_msg_t *dst, const kb_msg_t *src)
{
    for (size_t i = 0; i < src->nids; i++)
        kb_msg_add_identity(dst, src->ids[i].data, src->ids[i].len);
}

size_t
kb_msg_buffer_count(const kb_msg_t *msg)
{
    return msg->nbufs;
}

const kb_blob_t *
kb_msg_buffer(const kb_msg_t *msg, size_t i)
{
    return i < msg->nbufs ? &msg->bufs[i] : NULL;
}

void
kb_msg_add_buffer(kb_msg_t *msg, const void *data, size_t len)
{
    s_add_blob(&msg->bufs, &msg->nbufs, data, len);
}
