/*
 * sb_egress_ca: the session CA and its leaves (see sb_egress_ca.h).
 */
#include "sandbox/sb_egress_ca.h"

#include "common/buf.h"
#include "common/xalloc.h"

#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_DAYS 30

typedef struct s_leaf {
    char *host;  /* owned */
    char *chain; /* owned: leaf PEM + CA PEM */
} s_leaf_t;

struct sb_egress_ca {
    char *cert_pem; /* owned */
    char *key_pem;  /* owned; the leaves' key (wiped on destroy) */
    size_t n;
    s_leaf_t *leaf; /* owned, n entries */
};

int
sb_egress_ossl_fail(err_t *err, const char *prefix, const char *what)
{
    char e[256] = "";
    unsigned long code = ERR_get_error();
    if (code)
        ERR_error_string_n(code, e, sizeof e);
    ERR_clear_error();
    return err_set(err, ERR_SANDBOX, "%s: %s failed (OpenSSL: %s)", prefix,
                   what, e[0] ? e : "no detail");
}

static int
s_ossl(err_t *err, const char *what)
{
    return sb_egress_ossl_fail(err, "--net-secret", what);
}

static int
s_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
    X509_EXTENSION *e = X509V3_EXT_nconf_nid(NULL, ctx, nid, value);
    if (!e)
        return -1;
    int ok = X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
    return ok ? 0 : -1;
}

static char *
s_pem_x509(X509 *x)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL;
    if (b && PEM_write_bio_X509(b, x)) {
        char *p = NULL;
        long n = BIO_get_mem_data(b, &p);
        out = xmalloc((size_t)n + 1);
        memcpy(out, p, (size_t)n);
        out[n] = '\0';
    }
    BIO_free(b);
    return out;
}

/* A certificate for `key`, signed by `sign` (issuer name `issuer`, or
 * self-signed when NULL), with the given subject CN and extensions. */
static X509 *
s_cert(EVP_PKEY *key, EVP_PKEY *sign, X509 *issuer, const char *cn,
       const char *const ext[][2], size_t n_ext)
{
    X509 *x = X509_new();
    BIGNUM *bn = BN_new();
    bool ok =
        x && bn && X509_set_version(x, 2) &&
        BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) &&
        BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) &&
        X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
        X509_gmtime_adj(X509_getm_notAfter(x), (long)S_DAYS * 24 * 3600) &&
        X509_set_pubkey(x, key);
    X509_NAME *name = ok ? X509_get_subject_name(x) : NULL;
    ok = ok &&
         X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                    (const unsigned char *)"jupyter-agent", -1,
                                    -1, 0) &&
         X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                    (const unsigned char *)cn, -1, -1, 0) &&
         X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name);
    X509V3_CTX ctx;
    if (ok) {
        X509V3_set_ctx(&ctx, issuer ? issuer : x, x, NULL, NULL, 0);
        for (size_t i = 0; ok && i < n_ext; i++)
            ok = s_ext(x, &ctx, OBJ_txt2nid(ext[i][0]), ext[i][1]) == 0;
    }
    ok = ok && X509_sign(x, sign, EVP_sha256()) > 0;
    BN_free(bn);
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

sb_egress_ca_t *
sb_egress_ca_new(const char *const hosts[], size_t n, err_t *err)
{
    sb_egress_ca_t *ca = xcalloc(1, sizeof *ca);
    EVP_PKEY *ca_key = EVP_EC_gen("P-256");
    EVP_PKEY *leaf_key = EVP_EC_gen("P-256");
    X509 *ca_x = NULL;
    buf_t nc;
    buf_init(&nc, 0);
    if (!ca_key || !leaf_key) {
        s_ossl(err, "generating the session CA's keys");
        goto fail;
    }
    /* Name constraints: the CA can vouch for the secret hosts only. */
    for (size_t i = 0; i < n; i++)
        buf_printf(&nc, "%spermitted;DNS:%s", i ? "," : "critical,", hosts[i]);
    unsigned char id[8];
    char cn[64];
    RAND_bytes(id, sizeof id);
    snprintf(cn, sizeof cn,
             "jupyter-agent egress session CA %02x%02x%02x%02x%02x%02x%02x"
             "%02x",
             id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7]);
    const char *const ca_ext[][2] = {
        {"basicConstraints", "critical,CA:TRUE,pathlen:0"},
        {"keyUsage", "critical,keyCertSign,cRLSign"},
        {"subjectKeyIdentifier", "hash"},
        {"nameConstraints", buf_cstr(&nc)}};
    ca_x = s_cert(ca_key, ca_key, NULL, cn, ca_ext, n ? 4 : 3);
    if (!ca_x) {
        s_ossl(err, "making the session CA's certificate");
        goto fail;
    }
    ca->cert_pem = s_pem_x509(ca_x);
    BIO *kb = BIO_new(BIO_s_mem());
    char *kp = NULL;
    long kn = 0;
    if (kb && PEM_write_bio_PrivateKey(kb, leaf_key, NULL, NULL, 0, NULL, NULL))
        kn = BIO_get_mem_data(kb, &kp);
    if (kn > 0) {
        ca->key_pem = xmalloc((size_t)kn + 1);
        memcpy(ca->key_pem, kp, (size_t)kn);
        ca->key_pem[kn] = '\0';
        OPENSSL_cleanse(kp, (size_t)kn);
    }
    BIO_free(kb);
    if (!ca->cert_pem || !ca->key_pem) {
        s_ossl(err, "writing the session CA as PEM");
        goto fail;
    }
    ca->leaf = xcalloc(n ? n : 1, sizeof *ca->leaf);
    for (size_t i = 0; i < n; i++) {
        char san[300];
        snprintf(san, sizeof san, "DNS:%s", hosts[i]);
        const char *const leaf_ext[][2] = {
            {"basicConstraints", "critical,CA:FALSE"},
            {"keyUsage", "critical,digitalSignature"},
            {"extendedKeyUsage", "serverAuth"},
            {"subjectAltName", san},
            {"subjectKeyIdentifier", "hash"},
            {"authorityKeyIdentifier", "keyid:always"}};
        X509 *lx = s_cert(leaf_key, ca_key, ca_x, hosts[i], leaf_ext, 6);
        char *pem = lx ? s_pem_x509(lx) : NULL;
        X509_free(lx);
        if (!pem) {
            s_ossl(err, "minting a leaf certificate");
            goto fail;
        }
        ca->leaf[i].host = xstrdup(hosts[i]);
        ca->leaf[i].chain = xasprintf("%s%s", pem, ca->cert_pem);
        free(pem);
        ca->n = i + 1;
    }
    X509_free(ca_x);
    EVP_PKEY_free(ca_key); /* the CA key is gone: no more leaves */
    EVP_PKEY_free(leaf_key);
    buf_release(&nc);
    return ca;
fail:
    X509_free(ca_x);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(leaf_key);
    buf_release(&nc);
    sb_egress_ca_destroy(&ca);
    return NULL;
}

void
sb_egress_ca_destroy(sb_egress_ca_t **pca)
{
    sb_egress_ca_t *ca = pca ? *pca : NULL;
    if (!ca)
        return;
    free(ca->cert_pem);
    if (ca->key_pem) {
        OPENSSL_cleanse(ca->key_pem, strlen(ca->key_pem));
        free(ca->key_pem);
    }
    for (size_t i = 0; i < ca->n; i++) {
        free(ca->leaf[i].host);
        free(ca->leaf[i].chain);
    }
    free(ca->leaf);
    free(ca);
    *pca = NULL;
}

const char *
sb_egress_ca_cert_pem(const sb_egress_ca_t *ca)
{
    return ca->cert_pem;
}

const char *
sb_egress_ca_leaf_key_pem(const sb_egress_ca_t *ca)
{
    return ca->key_pem;
}

const char *
sb_egress_ca_chain_pem(const sb_egress_ca_t *ca, const char *host)
{
    for (size_t i = 0; i < ca->n; i++)
        if (strcmp(ca->leaf[i].host, host) == 0)
            return ca->leaf[i].chain;
    return NULL;
}

size_t
sb_egress_ca_leaves(const sb_egress_ca_t *ca)
{
    return ca->n;
}
