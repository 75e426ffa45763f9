/*
 * pk_pyreq: the parts of Python packaging the offline installer needs to
 * follow a wheel's `Requires-Dist` inside a signed manifest: PEP 508
 * requirement strings, their environment markers, and PEP 440 version
 * ordering and specifiers. No I/O.
 *
 * Deliberately partial (the manifest is a curated set; pip re-checks
 * everything when it installs): pre-release exclusion rules are not
 * applied, and a local version label ("+cpu") does not take part in
 * ordering.
 */
#ifndef PACKAGES_PK_PYREQ_H
#define PACKAGES_PK_PYREQ_H

#include "common/err.h"

#include <jansson.h>
#include <stdbool.h>

/* A parsed requirement. Strings are owned; release with pk_pyreq_release. */
typedef struct pk_pyreq {
    char *name;      /* as written (not normalized) */
    char *extras;    /* "a,b" as written between [ ], or NULL */
    char *specifier; /* "<2,>=1.0" (spaces removed), or "" for any */
    char *url;       /* the URL of "name @ url", or NULL */
    char *marker;    /* the text after ';', trimmed, or NULL */
} pk_pyreq_t;

/* Parse a PEP 508 requirement such as `numpy (>=1.22); python_version <
 * "3.11"`. 0, or -1 with ERR_USAGE saying what is wrong. */
int pk_pyreq_parse(const char *text, pk_pyreq_t *out, err_t *err);
void pk_pyreq_release(pk_pyreq_t *r);

/* Evaluate a PEP 508 marker against `env` (a JSON object of marker
 * variables: python_version, sys_platform, ...; borrowed). `extra` is the
 * extra being installed, or NULL for none. Sets *result. 0, or -1 with
 * ERR_USAGE for a marker it cannot parse or a variable `env` lacks. */
int pk_pyreq_marker_eval(const char *marker, const json_t *env,
                         const char *extra, bool *result, err_t *err);

/* PEP 440 ordering: < 0, 0, > 0 like strcmp. Sets *ok to false (and
 * compares as strings) when either side is not a version. */
int pk_pyver_cmp(const char *a, const char *b, bool *ok);

/* Does `version` satisfy every clause of `specifier` ("", ">=1,<2",
 * "==1.4.*", "~=2.2", "!=1.5", "===1.0")? 1 yes, 0 no, -1 with ERR_USAGE
 * for a malformed specifier. */
int pk_pyreq_spec_match(const char *specifier, const char *version, err_t *err);

#endif
