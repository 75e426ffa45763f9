/*
 * pk_pyreq: PEP 508 requirements, environment markers and PEP 440 versions,
 * as the offline installer follows Requires-Dist through a manifest.
 */
#include "../tap.h"

#include "packages/pk_pyreq.h"

#include <stdlib.h>

static int
s_cmp(const char *a, const char *b)
{
    return pk_pyver_cmp(a, b, NULL);
}

static int
s_marker(const char *marker, const json_t *env, const char *extra)
{
    bool v = false;
    if (pk_pyreq_marker_eval(marker, env, extra, &v, NULL))
        return -1;
    return v;
}

int
main(void)
{
    pk_pyreq_t r;
    err_t err = {0};

    is_int(pk_pyreq_parse("numpy (>=1.22.4) ; python_version < \"3.11\"", &r,
                          &err),
           0, "a requirement with a parenthesized specifier and a marker");
    is_str(r.name, "numpy", "...its name");
    is_str(r.specifier, ">=1.22.4", "...its specifier");
    is_str(r.marker, "python_version < \"3.11\"", "...its marker");
    pk_pyreq_release(&r);
    is_int(pk_pyreq_parse("requests[socks, security]>=2.0,<3", &r, &err), 0,
           "a requirement with extras");
    is_str(r.extras, "socks,security", "...extras without spaces");
    is_str(r.specifier, ">=2.0,<3", "...a bare multi-clause specifier");
    ok(r.marker == NULL, "...and no marker");
    pk_pyreq_release(&r);
    is_int(pk_pyreq_parse("Foo.Bar_baz", &r, &err), 0, "a bare name");
    is_str(r.specifier, "", "...matches any version");
    pk_pyreq_release(&r);
    is_int(pk_pyreq_parse("pkg @ https://example.invalid/pkg.whl ; "
                          "os_name == 'posix'",
                          &r, &err),
           0, "a direct URL requirement");
    is_str(r.url, "https://example.invalid/pkg.whl", "...its URL");
    pk_pyreq_release(&r);
    ok(pk_pyreq_parse(">=1.0", &r, &err) < 0 && err.code == ERR_USAGE,
       "a requirement without a name is refused");
    ok(pk_pyreq_parse("pkg garbage", &r, &err) < 0,
       "text that is not a specifier is refused");

    ok(s_cmp("1.0", "1.0.0") == 0, "1.0 == 1.0.0");
    ok(s_cmp("1.9", "1.10") < 0, "1.9 < 1.10 (numeric, not textual)");
    ok(s_cmp("1.0.dev1", "1.0a1") < 0 && s_cmp("1.0a1", "1.0b2") < 0 &&
           s_cmp("1.0b2", "1.0rc1") < 0 && s_cmp("1.0rc1", "1.0") < 0 &&
           s_cmp("1.0", "1.0.post1") < 0,
       "dev < alpha < beta < rc < final < post");
    ok(s_cmp("1.0a1.dev1", "1.0a1") < 0, "a pre-release's dev comes first");
    ok(s_cmp("1!0.1", "2.0") > 0, "an epoch outranks the release");
    ok(s_cmp("v2.0", "2.0") == 0 && s_cmp("2.0-1", "2.0.post1") == 0,
       "a leading v and the implicit post-release spelling");
    bool vok = true;
    pk_pyver_cmp("banana", "1.0", &vok);
    ok(!vok, "a non-version is reported as such");

    ok(pk_pyreq_spec_match(">=1.0,<2", "1.5", NULL) == 1 &&
           pk_pyreq_spec_match(">=1.0,<2", "2.0", NULL) == 0,
       "every clause of a specifier must hold");
    ok(pk_pyreq_spec_match("==1.4.*", "1.4.2", NULL) == 1 &&
           pk_pyreq_spec_match("==1.4.*", "1.5", NULL) == 0 &&
           pk_pyreq_spec_match("!=1.4.*", "1.5", NULL) == 1,
       "prefix matching with .*");
    ok(pk_pyreq_spec_match("~=2.2", "2.9", NULL) == 1 &&
           pk_pyreq_spec_match("~=2.2", "3.0", NULL) == 0 &&
           pk_pyreq_spec_match("~=2.2", "2.1", NULL) == 0,
       "compatible release ~=");
    ok(pk_pyreq_spec_match("!=1.5", "1.5.0", NULL) == 0 &&
           pk_pyreq_spec_match("===1.0", "1.0", NULL) == 1 &&
           pk_pyreq_spec_match("===1.0", "1.0.0", NULL) == 0,
       "!= compares versions, === compares text");
    ok(pk_pyreq_spec_match("", "7", NULL) == 1, "an empty specifier matches");
    ok(pk_pyreq_spec_match("=>1", "1", &err) < 0 && err.code == ERR_USAGE,
       "a malformed specifier is an error, not a silent match");

    json_t *env =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "python_version", "3.11",
                  "python_full_version", "3.11.2", "sys_platform", "linux",
                  "os_name", "posix", "platform_machine", "x86_64",
                  "implementation_name", "cpython");
    is_int(s_marker("python_version < \"3.8\"", env, NULL), 0,
           "python_version compares as a version (3.11 is not < 3.8)");
    is_int(s_marker("python_version >= '3.10'", env, NULL), 1,
           "python_version >= 3.10 holds on 3.11");
    is_int(s_marker("extra == \"test\"", env, NULL), 0,
           "an extra marker is false when no extra is installed");
    is_int(s_marker("extra == \"Test_Suite\"", env, "test-suite"), 1,
           "extra names compare normalized");
    is_int(s_marker("sys_platform == \"linux\" and (os_name == \"nt\" or "
                    "python_full_version >= \"3\")",
                    env, NULL),
           1, "and/or with parentheses");
    is_int(s_marker("sys_platform == 'win32' or platform_machine in "
                    "'x86_64 aarch64'",
                    env, NULL),
           1, "the 'in' operator");
    is_int(s_marker("'arm' not in platform_machine", env, NULL), 1,
           "'not in' with the literal on the left");
    is_int(s_marker("sys.platform == 'linux'", env, NULL), 1,
           "legacy dotted variable names");
    err_clear(&err);
    bool v;
    ok(pk_pyreq_marker_eval("platform_frobnicate == '1'", env, NULL, &v, &err) <
               0 &&
           strstr(err.text, "unknown marker variable"),
       "an unknown variable is an error");
    ok(pk_pyreq_marker_eval("python_version <", env, NULL, &v, NULL) < 0 &&
           pk_pyreq_marker_eval("(os_name == 'posix'", env, NULL, &v, NULL) <
               0 &&
           pk_pyreq_marker_eval("os_name == 'posix' extra", env, NULL, &v,
                                NULL) < 0,
       "malformed markers are errors");
    json_decref(env);
    return done_testing();
}
