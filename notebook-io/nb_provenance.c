#include "notebook-io/nb_provenance.h"
#include "common/buf.h"
#include "common/xalloc.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *
nb_dsse_pae(const char *type, const char *body, size_t len, size_t *out_len)
{
    size_t tlen = strlen(type);
    char *head = xasprintf("DSSEv1 %zu %s %zu ", tlen, type, len);
    size_t hlen = strlen(head);
    char *out = xmalloc(hlen + len + 1);
    memcpy(out, head, hlen);
    memcpy(out + hlen, body, len);
    out[hlen + len] = '\0';
    free(head);
    *out_len = hlen + len;
    return out;
}

static char *
s_b64(const void *p, size_t n)
{
    size_t cap = sodium_base64_encoded_len(n, sodium_base64_VARIANT_ORIGINAL);
    char *out = xmalloc(cap);
    sodium_bin2base64(out, cap, p, n, sodium_base64_VARIANT_ORIGINAL);
    return out;
}

/* Decode standard base64; new buffer with a NUL after *len bytes, or NULL. */
static unsigned char *
s_unb64(const char *s, size_t *len)
{
    size_t n = strlen(s);
    unsigned char *out = xmalloc(n + 1);
    const char *end;
    if (sodium_base642bin(out, n, s, n, NULL, len, &end,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        *end != '\0') {
        free(out);
        return NULL;
    }
    out[*len] = '\0';
    return out;
}

json_t *
nb_dsse_sign(const char *type, const char *body, size_t len,
             const pk_seckey_t *key, err_t *err)
{
    json_t *sigs = json_array();
    if (key) {
        size_t plen;
        char *pae = nb_dsse_pae(type, body, len, &plen);
        unsigned char sig[PK_KEY_SIG_BYTES];
        int rc = pk_seckey_sign(key, pae, plen, sig, err);
        free(pae);
        if (rc) {
            json_decref(sigs);
            return NULL;
        }
        char *b = s_b64(sig, sizeof sig);
        json_array_append_new(sigs,
                              json_pack("{s:s, s:s}", "keyid",
                                        pk_seckey_public(key)->id, "sig", b));
        free(b);
    }
    char *payload = s_b64(body, len);
    json_t *env = json_pack("{s:s, s:s, s:o}", "payloadType", type, "payload",
                            payload, "signatures", sigs);
    free(payload);
    return env;
}

char *
nb_dsse_open(const json_t *env, const char *type, const pk_trust_t *trust,
             bool allow_unsigned, pk_pubkey_t *signer, bool *signed_out,
             size_t *len_out, err_t *err)
{
    const char *ptype = json_string_value(json_object_get(env, "payloadType"));
    const char *payload = json_string_value(json_object_get(env, "payload"));
    json_t *sigs = json_object_get(env, "signatures");
    if (!ptype || !payload || !json_is_array(sigs)) {
        err_set(err, ERR_VERIFY,
                "the envelope is not DSSE (payloadType, payload, signatures)");
        return NULL;
    }
    if (strcmp(ptype, type) != 0) {
        err_set(err, ERR_VERIFY,
                "the envelope's payloadType is '%.80s', not %s", ptype, type);
        return NULL;
    }
    size_t blen;
    unsigned char *body = s_unb64(payload, &blen);
    if (!body) {
        err_set(err, ERR_VERIFY, "the envelope's payload is not base64");
        return NULL;
    }
    if (signed_out)
        *signed_out = false;
    if (json_array_size(sigs) == 0) {
        if (allow_unsigned) {
            *len_out = blen;
            return (char *)body;
        }
        free(body);
        err_set(err, ERR_VERIFY,
                "the archive is not signed (pack it with --key, or accept it "
                "with --allow-unsigned)");
        return NULL;
    }
    size_t plen;
    char *pae = nb_dsse_pae(type, (char *)body, blen, &plen);
    const pk_pubkey_t *ok = NULL;
    const char *seen_id = NULL;
    size_t i;
    json_t *s;
    json_array_foreach(sigs, i, s)
    {
        const char *b = json_string_value(json_object_get(s, "sig"));
        const char *id = json_string_value(json_object_get(s, "keyid"));
        if (id && !seen_id)
            seen_id = id;
        size_t slen;
        unsigned char *sig = b ? s_unb64(b, &slen) : NULL;
        if (sig && slen == PK_KEY_SIG_BYTES)
            for (size_t k = 0; trust && k < pk_trust_count(trust) && !ok; k++)
                if (pk_pubkey_verify(pk_trust_key(trust, k), pae, plen, sig))
                    ok = pk_trust_key(trust, k);
        free(sig);
        if (ok)
            break;
    }
    free(pae);
    if (!ok) {
        free(body);
        char *have = trust ? pk_trust_describe(trust) : xstrdup("none");
        err_set(err, ERR_VERIFY,
                "no trusted key made the archive's signature (signed by key "
                "%.32s; trusted: %s); add the signer's .pub with --trust if "
                "you trust it",
                seen_id ? seen_id : "?", have);
        free(have);
        return NULL;
    }
    if (signer)
        *signer = *ok;
    if (signed_out)
        *signed_out = true;
    *len_out = blen;
    return (char *)body;
}

json_t *
nb_intoto_subject(const char *name, const char *sha256_hex)
{
    return json_pack("{s:s, s:{s:s}}", "name", name, "digest", "sha256",
                     sha256_hex);
}

json_t *
nb_intoto_statement(json_t *subjects, json_t *predicate)
{
    return json_pack("{s:s, s:o, s:s, s:o}", "_type", NB_INTOTO_STATEMENT_V1,
                     "subject", subjects, "predicateType",
                     NB_SLSA_PROVENANCE_V1, "predicate", predicate);
}

static int
s_by_name(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    return strcmp(json_string_value(json_object_get(x, "name")),
                  json_string_value(json_object_get(y, "name")));
}

char *
nb_bag_manifest(const json_t *subjects)
{
    size_t n = json_array_size(subjects);
    json_t **v = xmalloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(subjects, i);
    qsort(v, n, sizeof *v, s_by_name);
    buf_t b;
    buf_init(&b, 0);
    for (size_t i = 0; i < n; i++)
        buf_printf(&b, "%s  %s\n",
                   json_string_value(json_object_get(
                       json_object_get(v[i], "digest"), "sha256")),
                   json_string_value(json_object_get(v[i], "name")));
    free(v);
    return buf_detach(&b, NULL);
}
