/* Unit tests for kb_msg and kb_wire: frames, signatures, hostile input. */
#include "../tap.h"

#include "kernel-bridge/wire/kb_msg.h"
#include "kernel-bridge/wire/kb_wire.h"

#include <sodium.h>
#include <stdlib.h>
#include <unistd.h>

static const char *KEY = "a0436f6c-1916-498b-8eb9-e81ab9368e84";

static void
s_views(const kb_wire_out_t *out, kb_frame_t *views)
{
    for (size_t i = 0; i < out->n; i++)
        views[i] = (kb_frame_t){out->frames[i].data, out->frames[i].len};
}

/* Python's hmac over the same bytes, as jupyter_client computes it. */
static int
s_python_signature(const kb_frame_t parts[4], char out[65])
{
    char path[] = "/tmp/kbwireXXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "wb");
    for (int i = 0; i < 4; i++) {
        fprintf(f, "%zu\n", parts[i].len);
        fwrite(parts[i].data, 1, parts[i].len, f);
    }
    fclose(f);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import hmac,hashlib,sys\n"
             "d=open(sys.argv[1],\"rb\").read(); h=hmac.new(b\"%s\","
             "digestmod=hashlib.sha256)\n"
             "for _ in range(4):\n"
             "  n,d=d.split(b\"\\n\",1); n=int(n); h.update(d[:n]); d=d[n:]\n"
             "print(h.hexdigest())' %s",
             KEY, path);
    FILE *p = popen(cmd, "r");
    int rc = -1;
    if (p && fgets(out, 65, p) && strlen(out) == 64)
        rc = 0;
    if (p)
        pclose(p);
    unlink(path);
    return rc;
}

/* kb_key_sign against libsodium's HMAC-SHA256 (an independent
 * implementation) for a key of `len` bytes: keys longer than SHA-256's
 * 64-byte block are hashed first (RFC 2104), shorter ones padded. */
static bool
s_matches_sodium(size_t len)
{
    char keytext[200];
    for (size_t i = 0; i < len; i++)
        keytext[i] = (char)('a' + i % 26);
    const char *p[4] = {"{\"msg_id\":\"1\"}", "{}", "{}", "{\"a\":1}"};
    kb_frame_t parts[4];
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, (const unsigned char *)keytext, len);
    for (int i = 0; i < 4; i++) {
        parts[i] = (kb_frame_t){p[i], strlen(p[i])};
        crypto_auth_hmacsha256_update(&st, (const unsigned char *)p[i],
                                      strlen(p[i]));
    }
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    crypto_auth_hmacsha256_final(&st, mac);
    char want[65], got[65];
    sodium_bin2hex(want, sizeof want, mac, sizeof mac);
    kb_key_t *k = kb_key_new(keytext, len);
    kb_key_sign(k, parts, got);
    kb_key_destroy(&k);
    return strcmp(want, got) == 0;
}

/* Sign and parse a message whose parent_header frame is `parent`. */
static kb_msg_t *
s_parse_with_parent(kb_key_t *key, const char *parent)
{
    const char *p[4] = {"{\"msg_id\":\"m\",\"msg_type\":\"stream\"}", parent,
                        "{\"k\": [1, {\"x\": \"}\"}]}", "{}"};
    kb_frame_t f[7] = {{KB_WIRE_DELIM, KB_WIRE_DELIM_LEN}};
    char sig[65];
    for (int i = 0; i < 4; i++)
        f[3 + i] = (kb_frame_t){p[i], strlen(p[i])};
    kb_key_sign(key, &f[3], sig);
    f[1] = (kb_frame_t){sig, strlen(sig)};
    f[2] = (kb_frame_t){NULL, 0};
    /* frames: delimiter, signature, header, parent, metadata, content */
    kb_frame_t g[6] = {f[0], f[1], f[3], f[4], f[5], f[6]};
    return kb_wire_parse(g, 6, key, NULL, NULL, NULL);
}

/* The parent id kb_wire reads off the text equals jansson's. */
static bool
s_parent_id_is(kb_key_t *key, const char *parent, const char *want)
{
    kb_msg_t *m = s_parse_with_parent(key, parent);
    bool same = m && strcmp(kb_msg_parent_id(m), want) == 0;
    json_t *full = m ? kb_msg_parent_header(m) : NULL;
    json_t *ref = json_loads(parent, 0, NULL);
    same =
        same && json_equal(full, ref) && strcmp(kb_msg_parent_id(m), want) == 0;
    json_decref(ref);
    kb_msg_destroy(&m);
    return same;
}

int
main(void)
{
    kb_key_t *key = kb_key_new(KEY, strlen(KEY));
    kb_key_t *other = kb_key_new("another key", 11);
    kb_key_t *none = kb_key_new("", 0);
    kb_wire_stats_t stats = {0};
    err_t err;

    kb_msg_t *msg = kb_msg_new("execute_request", "sess-1", "alice");
    json_object_set_new(kb_msg_content(msg), "code",
                        json_string("print('héllo ✓')"));
    kb_msg_add_identity(msg, "id-1", 4);
    kb_msg_add_buffer(msg, "\x00\x01\x02", 3);
    is_str(kb_msg_type(msg), "execute_request", "a new message has its type");
    ok(strlen(kb_msg_id(msg)) == 36, "a new message has a UUID msg_id");
    is_str(json_string_value(json_object_get(kb_msg_header(msg), "version")),
           "5.3", "a new message speaks protocol 5.3");
    const char *date =
        json_string_value(json_object_get(kb_msg_header(msg), "date"));
    ok(date && strlen(date) == 27 && date[26] == 'Z',
       "the header date has microseconds and a timezone (%s)", date);

    kb_wire_out_t out;
    is_int(kb_wire_serialize(msg, key, &out, &err), 0, "a message serializes");
    is_int(out.n, 1 + 1 + 1 + 4 + 1,
           "frames: identity, delimiter, signature, 4 JSON parts, 1 buffer");
    kb_frame_t views[16];
    s_views(&out, views);
    ok(views[1].len == 9 && memcmp(views[1].data, "<IDS|MSG>", 9) == 0,
       "the delimiter follows the identities");

    char py[65] = "";
    if (s_python_signature(&views[3], py) == 0)
        ok(views[2].len == 64 && memcmp(views[2].data, py, 64) == 0,
           "our signature equals Python hmac's hexdigest on the same bytes");
    else
        ok(0, "python3 hmac cross-check ran");

    kb_msg_t *back = kb_wire_parse(views, out.n, key, NULL, &stats, &err);
    ok(back != NULL, "a signed message parses back");
    if (back) {
        is_str(kb_msg_id(back), kb_msg_id(msg), "msg_id survives the trip");
        is_str(json_string_value(json_object_get(kb_msg_content(back), "code")),
               "print('héllo ✓')", "non-ASCII content survives the trip");
        ok(kb_msg_identity_count(back) == 1 &&
               memcmp(kb_msg_identity(back, 0)->data, "id-1", 4) == 0,
           "identities survive the trip");
        ok(kb_msg_buffer_count(back) == 1 && kb_msg_buffer(back, 0)->len == 3,
           "binary buffers survive the trip");
        kb_msg_t *reply = kb_msg_new_reply(back, "execute_reply", "k", "k");
        is_str(kb_msg_parent_id(reply), kb_msg_id(msg),
               "a reply's parent_header is the request's header");
        is_int(kb_msg_identity_count(reply), 1,
               "a reply keeps the routing identities");
        kb_msg_destroy(&reply);
        kb_msg_destroy(&back);
    }
    is_int(stats.accepted, 1, "accepted messages are counted");

    /* Tampering with any signed part is detected before parsing. */
    for (int part = 0; part < 4; part++) {
        char *copy = malloc(views[3 + part].len);
        memcpy(copy, views[3 + part].data, views[3 + part].len);
        copy[1] ^= 0x20;
        kb_frame_t saved = views[3 + part];
        views[3 + part].data = copy;
        uint64_t before = stats.bad_signature;
        back = kb_wire_parse(views, out.n, key, NULL, &stats, &err);
        ok(back == NULL && stats.bad_signature == before + 1,
           "a tampered JSON part %d is dropped and counted", part);
        views[3 + part] = saved;
        free(copy);
    }
    back = kb_wire_parse(views, out.n, other, NULL, &stats, &err);
    ok(back == NULL && strstr(err.text, "bad signature"),
       "a message signed with another key is dropped (%s)", err.text);
    kb_frame_t nosig[16];
    memcpy(nosig, views, sizeof(kb_frame_t) * out.n);
    nosig[2] = (kb_frame_t){"", 0};
    back = kb_wire_parse(nosig, out.n, key, NULL, &stats, &err);
    ok(back == NULL && strstr(err.text, "missing signature"),
       "an unsigned message is dropped when a key is set");
    nosig[2] = (kb_frame_t){"ABCDEF", 6};
    back = kb_wire_parse(nosig, out.n, key, NULL, &stats, &err);
    ok(back == NULL, "a short signature is dropped");
    back = kb_wire_parse(nosig, out.n, none, NULL, &stats, &err);
    ok(back != NULL, "with an empty key (explicitly unsigned) it parses");
    kb_msg_destroy(&back);

    uint64_t malformed = stats.malformed;
    back = kb_wire_parse(views + 2, out.n - 2, key, NULL, &stats, &err);
    ok(back == NULL && stats.malformed == malformed + 1,
       "frames without a delimiter are dropped as malformed");
    back = kb_wire_parse(views, 5, key, NULL, &stats, &err);
    ok(back == NULL, "a truncated message is dropped");
    kb_wire_out_release(&out);

    /* Depth and size bombs, correctly signed, are still refused. */
    char deep[4096];
    size_t d = 0;
    d += (size_t)snprintf(deep, sizeof deep, "{\"a\":");
    for (int i = 0; i < 200; i++)
        deep[d++] = '[';
    for (int i = 0; i < 200; i++)
        deep[d++] = ']';
    deep[d++] = '}';
    kb_frame_t bomb[6] = {
        {"<IDS|MSG>", 9}, {NULL, 0}, {"{\"msg_type\":\"stream\"}", 21},
        {"{}", 2},        {"{}", 2}, {deep, d}};
    char sig[65];
    kb_key_sign(key, &bomb[2], sig);
    bomb[1] = (kb_frame_t){sig, 64};
    back = kb_wire_parse(bomb, 6, key, NULL, &stats, &err);
    ok(back == NULL && strstr(err.text, "deeper"),
       "JSON nested 200 deep is refused even when signed (%s)", err.text);
    kb_wire_limits_t small = {16, 64, 0};
    back = kb_wire_parse(bomb, 6, key, &small, &stats, &err);
    ok(back == NULL, "a JSON part over the byte limit is refused");
    kb_frame_t notobj[6];
    memcpy(notobj, bomb, sizeof bomb);
    notobj[5] = (kb_frame_t){"[1,2]", 5};
    kb_key_sign(key, &notobj[2], sig);
    notobj[1] = (kb_frame_t){sig, 64};
    back = kb_wire_parse(notobj, 6, key, NULL, &stats, &err);
    ok(back == NULL, "content that is not an object is refused");
    is_int(kb_wire_json_depth("{\"x\":\"[[[[\"}", 12), 1,
           "brackets inside strings do not count as depth");
    is_int(kb_wire_json_depth("]", 1), -1, "unbalanced JSON has no depth");

    kb_msg_destroy(&msg);
    ok(s_matches_sodium(1) && s_matches_sodium(63) && s_matches_sodium(64) &&
           s_matches_sodium(65) && s_matches_sodium(200),
       "signatures equal libsodium's HMAC-SHA256 for keys of 1 to 200 bytes "
       "(longer than a block are hashed first)");

    ok(s_parent_id_is(key, "{\"msg_id\":\"abc\"}", "abc") &&
           s_parent_id_is(key,
                          " { \"a\" : {\"msg_id\":\"no\"} , "
                          "\"msg_id\" : \"yes\" } ",
                          "yes") &&
           s_parent_id_is(key, "{\"msg_id\":\"first\",\"msg_id\":\"last\"}",
                          "last") &&
           s_parent_id_is(key, "{\"msg_id\":\"a\\\"b\"}", "a\"b") &&
           s_parent_id_is(key, "{\"msg_id\":7}", "") &&
           s_parent_id_is(key, "{\"x\":[\"]\",{}],\"msg_id\":\"z\"}", "z") &&
           s_parent_id_is(key, "{}", ""),
       "the parent id read without parsing equals jansson's (nested, "
       "duplicate, escaped, non-string, empty)");
    {
        const char *h = "{\"date\":\"x\",\"msg_type\":\"a\\u0062\"}";
        kb_frame_t p[4] = {{h, strlen(h)}, {"{}", 2}, {"{}", 2}, {"{}", 2}};
        char hsig[65];
        kb_key_sign(key, p, hsig);
        kb_frame_t g[6] = {{KB_WIRE_DELIM, KB_WIRE_DELIM_LEN},
                           {hsig, 64},
                           p[0],
                           p[1],
                           p[2],
                           p[3]};
        kb_msg_t *m = kb_wire_parse(g, 6, key, NULL, NULL, NULL);
        ok(m && strcmp(kb_msg_type(m), "ab") == 0 &&
               strcmp(kb_msg_id(m), "") == 0 &&
               strcmp(
                   json_string_value(json_object_get(kb_msg_header(m), "date")),
                   "x") == 0,
           "a header with an escaped msg_type is parsed in full (%s)",
           m ? kb_msg_type(m) : "dropped");
        kb_msg_destroy(&m);
        const char *h2 = "{\"msg_type\":\"t\",\"msg_id\":\"i\",\"n\":[1]}";
        p[0] = g[2] = (kb_frame_t){h2, strlen(h2)};
        kb_key_sign(key, p, hsig);
        m = kb_wire_parse(g, 6, key, NULL, NULL, NULL);
        ok(m && strcmp(kb_msg_type(m), "t") == 0 &&
               strcmp(kb_msg_id(m), "i") == 0 &&
               json_array_size(json_object_get(kb_msg_header(m), "n")) == 1 &&
               strcmp(kb_msg_type(m), "t") == 0,
           "a header kept as text gives its msg_type and msg_id, and parses "
           "in full on first use");
        kb_msg_destroy(&m);
    }
    {
        kb_msg_t *m = s_parse_with_parent(key, "{\"msg_id\":\"a\",}");
        ok(m == NULL, "a parent_header that is not JSON is still dropped");
        kb_msg_destroy(&m);
        m = s_parse_with_parent(key, "[\"msg_id\"]");
        ok(m == NULL, "a parent_header that is not an object is dropped");
        kb_msg_destroy(&m);
    }

    kb_key_destroy(&key);
    kb_key_destroy(&other);
    kb_key_destroy(&none);
    ok(key == NULL, "destroy nulls the caller's pointer");
    return done_testing();
}
