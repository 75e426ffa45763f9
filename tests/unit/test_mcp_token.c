/* The MCP HTTP bearer token check (issue 24 item 14): the server keeps
 * only the token's SHA-256 digest, so no check can compare lengths first;
 * a wrong token of every length from 0 to 3x the token's is refused, and
 * so are prefixes, extensions, one-byte changes and a wrong scheme. */
#include "agent/mcp/ag_mcp_http.h"
#include "tests/tap.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN "3f9c2a7b1e6d4c80a5f2b9e7d1c3a6f0" /* 32 characters */

static bool
s_try(const ag_mcp_token_t *t, const char *tok)
{
    char *auth = malloc(strlen(tok) + 8);
    sprintf(auth, "Bearer %s", tok);
    bool r = ag_mcp_token_ok(t, auth);
    free(auth);
    return r;
}

int
main(void)
{
    if (sodium_init() < 0)
        return 1;
    ag_mcp_token_t t;
    ag_mcp_token_set(&t, TOKEN);

    /* Structure: what is kept is 32 bytes of digest and nothing else. */
    ok(sizeof(ag_mcp_token_t) == 32,
       "the server keeps the token as its 32-byte SHA-256 digest only (no "
       "length, no bytes)");
    unsigned char want[32];
    crypto_hash_sha256(want, (const unsigned char *)TOKEN, strlen(TOKEN));
    ok(memcmp(t.sha256, want, 32) == 0, "... which is SHA-256 of the token");

    ok(s_try(&t, TOKEN), "the right token is accepted");
    ok(ag_mcp_token_ok(&t, "bearer " TOKEN), "the scheme's case is free");

    /* Every length from 0 to 96: a wrong token of each is refused. The
     * candidates are the right token's prefix or its extension (the
     * closest a length-first compare could get), and random bytes. */
    int refused = 0, tried = 0;
    char buf[128];
    for (size_t len = 0; len <= 3 * strlen(TOKEN); len++) {
        for (size_t i = 0; i < len; i++)
            buf[i] = i < strlen(TOKEN) ? TOKEN[i] : 'a' + (char)(i % 26);
        buf[len] = '\0';
        if (len != strlen(TOKEN)) {
            tried++;
            refused += !s_try(&t, buf);
        }
        for (size_t i = 0; i < len; i++)
            buf[i] = "0123456789abcdef"[randombytes_uniform(16)];
        if (strcmp(buf, TOKEN) != 0) {
            tried++;
            refused += !s_try(&t, buf);
        }
    }
    is_int(refused, tried,
           "a wrong token of every length 0..96 (prefixes, extensions, "
           "random) is refused");

    int changed = 0;
    for (size_t i = 0; i < strlen(TOKEN); i++) {
        snprintf(buf, sizeof buf, "%s", TOKEN);
        buf[i] = buf[i] == '0' ? '1' : '0';
        changed += !s_try(&t, buf);
    }
    is_int(changed, (int)strlen(TOKEN),
           "the right length with any one character changed is refused");

    ok(!ag_mcp_token_ok(&t, NULL), "no Authorization header is refused");
    ok(!ag_mcp_token_ok(&t, TOKEN), "the token without \"Bearer \" is refused");
    ok(!ag_mcp_token_ok(&t, "Basic " TOKEN), "another scheme is refused");
    ok(!ag_mcp_token_ok(&t, "Bearer  " TOKEN), "an extra space is refused");
    ok(!ag_mcp_token_ok(&t, "Bearer"), "a bare \"Bearer\" is refused");
    return done_testing();
}
