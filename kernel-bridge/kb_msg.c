#include "kb_msg.h"

#include "common/clock.h"
#include "common/xalloc.h"

#include <assert.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kb_msg {
    json_t *header; /* owned object */
    /* owned objects; {} for requests. NULL while a received message keeps
     * them as their wire text (parsed on first use, see kb_msg_from_wire) */
    json_t *parent_header;
    json_t *metadata;
    char *parent_text; /* owned wire text of parent_header, or NULL */
    size_t parent_len;
    char *parent_msg_id; /* owned: parent_header.msg_id read off the text */
    char *metadata_text; /* owned wire text of metadata, or NULL */
    size_t metadata_len;
    json_t *content; /* owned object */
    kb_blob_t *ids;  /* owned array of nids routing identities */
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

static char *
s_dup_text(const void *data, size_t len)
{
    char *t = xmalloc(len + 1);
    memcpy(t, data, len);
    t[len] = '\0';
    return t;
}

kb_msg_t *
kb_msg_from_wire(json_t *header, json_t *content, const kb_blob_t *parent,
                 const char *parent_msg_id, const kb_blob_t *metadata)
{
    if (!json_is_object(header) || !json_is_object(content)) {
        json_decref(header);
        json_decref(content);
        return NULL;
    }
    kb_msg_t *msg = xcalloc(1, sizeof *msg);
    msg->header = header;
    msg->content = content;
    msg->parent_text = s_dup_text(parent->data, parent->len);
    msg->parent_len = parent->len;
    msg->parent_msg_id = xstrdup(parent_msg_id ? parent_msg_id : "");
    msg->metadata_text = s_dup_text(metadata->data, metadata->len);
    msg->metadata_len = metadata->len;
    return msg;
}

/* The object in wire text checked by kb_wire, or {} if it does not parse
 * after all (only a peer that signs garbage gets there). */
static json_t *
s_parse_object(const char *text, size_t len)
{
    json_t *v = json_loadb(text, len, 0, NULL);
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
    free(msg->parent_text);
    free(msg->parent_msg_id);
    free(msg->metadata_text);
    s_free_blobs(msg->ids, msg->nids);
    s_free_blobs(msg->bufs, msg->nbufs);
    free(msg);
    *pmsg = NULL;
}

json_t *
kb_msg_header(const kb_msg_t *msg)
{
    assert(json_is_object(msg->header)); /* kb_msg.h: never NULL */
    return msg->header;
}

json_t *
kb_msg_parent_header(const kb_msg_t *cmsg)
{
    kb_msg_t *msg = (kb_msg_t *)cmsg; /* parsed on first use */
    if (!msg->parent_header)
        msg->parent_header = s_parse_object(msg->parent_text, msg->parent_len);
    assert(json_is_object(msg->parent_header)); /* kb_msg.h: never NULL */
    return msg->parent_header;
}

json_t *
kb_msg_metadata(const kb_msg_t *cmsg)
{
    kb_msg_t *msg = (kb_msg_t *)cmsg; /* parsed on first use */
    if (!msg->metadata)
        msg->metadata = s_parse_object(msg->metadata_text, msg->metadata_len);
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
kb_msg_set_metadata(kb_msg_t *msg, json_t *metadata)
{
    json_decref(msg->metadata);
    free(msg->metadata_text);
    msg->metadata_text = NULL;
    msg->metadata = json_is_object(metadata) ? metadata : json_object();
    if (!json_is_object(metadata))
        json_decref(metadata);
}

void
kb_msg_set_parent(kb_msg_t *msg, const kb_msg_t *parent)
{
    json_decref(msg->parent_header);
    free(msg->parent_text);
    free(msg->parent_msg_id);
    msg->parent_text = msg->parent_msg_id = NULL;
    msg->parent_header = json_deep_copy(parent->header);
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
    return s_str(msg->header, "msg_type");
}

const char *
kb_msg_id(const kb_msg_t *msg)
{
    return s_str(msg->header, "msg_id");
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
