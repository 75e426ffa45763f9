/*
 * nb_provenance: the statements that make a report archive checkable by
 * tools other than ours.
 *
 *   - DSSE (Dead Simple Signing Envelope) v1: an Ed25519 signature over the
 *     pre-authentication encoding
 *       "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body
 *     (LEN as ASCII decimal), stored as
 *       {"payloadType", "payload" (base64), "signatures": [{"keyid","sig"}]}.
 *     keyid is the pk_key id (16 hex digits); trust is decided on the full
 *     public key: a signature counts only when a trusted key verifies it.
 *   - An in-toto Statement v1 whose subjects are files with their SHA-256,
 *     carrying a SLSA Provenance v1 predicate.
 *   - A BagIt-style manifest, "SHA256  NAME" lines, which `sha256sum -c`
 *     checks in the unpacked archive.
 */
#ifndef NOTEBOOK_IO_NB_PROVENANCE_H
#define NOTEBOOK_IO_NB_PROVENANCE_H

#include "common/err.h"
#include "packages/pk_key.h"
#include "packages/pk_trust.h"

#include <jansson.h>
#include <stdbool.h>

#define NB_DSSE_INTOTO_TYPE "application/vnd.in-toto+json"
#define NB_INTOTO_STATEMENT_V1 "https://in-toto.io/Statement/v1"
#define NB_SLSA_PROVENANCE_V1 "https://slsa.dev/provenance/v1"

/* The DSSE pre-authentication encoding; new buffer, *out_len its length. */
char *nb_dsse_pae(const char *type, const char *body, size_t len,
                  size_t *out_len);

/* An envelope for body[0..len) of `type`, signed by `key` (NULL: no
 * signature, "signatures": []). New reference, or NULL with err set. */
json_t *nb_dsse_sign(const char *type, const char *body, size_t len,
                     const pk_seckey_t *key, err_t *err);

/* Check `env` (borrowed): its payloadType must be `type`, and a key of
 * `trust` must have made one of its signatures. Returns the decoded body
 * (caller frees, NUL-terminated, *len_out its length) and fills *signer
 * (may be NULL) with the key that verified; NULL with ERR_VERIFY saying
 * what failed. With `allow_unsigned`, an envelope without signatures is
 * accepted and *signed_out (may be NULL) says false. */
char *nb_dsse_open(const json_t *env, const char *type, const pk_trust_t *trust,
                   bool allow_unsigned, pk_pubkey_t *signer, bool *signed_out,
                   size_t *len_out, err_t *err);

/* {"_type": Statement v1, "subject": subjects (stolen), "predicateType":
 * SLSA Provenance v1, "predicate": predicate (stolen)}. New reference. */
json_t *nb_intoto_statement(json_t *subjects, json_t *predicate);

/* One subject {"name": name, "digest": {"sha256": hex}}. New reference. */
json_t *nb_intoto_subject(const char *name, const char *sha256_hex);

/* The manifest text for `subjects` (borrowed, as made above), sorted by
 * name. New string. */
char *nb_bag_manifest(const json_t *subjects);

#endif
