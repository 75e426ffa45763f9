/* Unit tests for sandbox/pk_key, pk_trust and pk_manifest: names, wheel
 * filenames, the manifest parser's refusals, resolving requirements, and the
 * verified-fd API the installer will use. */
#include "../tap.h"

#include "common/err.h"
#include "packages/pk_key.h"
#include "packages/pk_manifest.h"
#include "packages/pk_trust.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define H64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static char s_tmp[256];

static void
s_norm(const char *in, const char *want)
{
    char *got = pk_manifest_normalize_name(in);
    is_str(got, want, "'%s' normalizes to '%s' (PEP 503)", in, want);
    free(got);
}

static void
s_wheel_ok(const char *fn, const char *name, const char *version)
{
    char *n = NULL, *v = NULL;
    err_t err;
    err_clear(&err);
    int rc = pk_manifest_parse_wheel_filename(fn, &n, &v, &err);
    ok(rc == 0 && n && v && strcmp(n, name) == 0 && strcmp(v, version) == 0,
       "wheel filename %s is project %s version %s", fn, name, version);
    if (rc)
        diag("  %s", err.text);
    free(n);
    free(v);
}

static void
s_wheel_bad(const char *fn, const char *why)
{
    err_t err;
    err_clear(&err);
    int rc = pk_manifest_parse_wheel_filename(fn, NULL, NULL, &err);
    ok(rc == -1 && err.code == ERR_VERIFY, "%s is refused as a wheel (%s)", fn,
       why);
}

static void
s_filename_bad(const char *fn, const char *why, const char *says)
{
    err_t err;
    err_clear(&err);
    int rc = pk_manifest_check_filename(fn, &err);
    char shown[64];
    size_t j = 0;
    for (size_t i = 0; fn[i] && j + 1 < sizeof shown; i++)
        shown[j++] = (fn[i] >= 0x20 && fn[i] < 0x7f) ? fn[i] : '?';
    shown[j] = '\0';
    ok(rc == -1 && strstr(err.text, says) != NULL,
       "manifest filename '%s' is refused: %s", shown, why);
    if (rc == 0 || !strstr(err.text, says))
        diag("  got: %s", err.text);
}

/* A manifest with files[] given as JSON text. New string. */
static char *
s_doc(const char *files)
{
    size_t n = strlen(files) + 256;
    char *s = malloc(n);
    snprintf(s, n,
             "{\"format\": \"jupyter-agent-manifest/1\", \"signer\": \"k1\", "
             "\"created\": \"2024-01-01T00:00:00Z\", \"files\": [%s]}",
             files);
    return s;
}

#define ENTRY(fn, name, ver, size, sha)                                        \
    "{\"name\": \"" name "\", \"version\": \"" ver "\", \"filename\": \"" fn   \
    "\", \"size\": " size ", \"sha256\": \"" sha "\"}"

static const char *s_good_files =
    ENTRY("demo_pkg-1.0-py3-none-any.whl", "demo-pkg", "1.0", "10",
          H64) "," ENTRY("demo_pkg-2.0-py3-none-any.whl", "demo-pkg", "2.0",
                         "11", H64) "," ENTRY("Other.Lib-0.3-1-cp311-cp311-"
                                              "manylinux_2_17_x86_64.whl",
                                              "other-lib", "0.3", "12", H64);

/* Parse a whole document; expect refusal whose text contains `says`. */
static void
s_refuse_doc(const char *doc, const char *what, const char *says)
{
    err_t err;
    err_clear(&err);
    pk_manifest_t *m = pk_manifest_parse(doc, strlen(doc), &err);
    ok(m == NULL && err.code == ERR_VERIFY && strstr(err.text, says),
       "the parser refuses %s", what);
    if (m || !strstr(err.text, says))
        diag("  got: %s (wanted '%s')", m ? "accepted" : err.text, says);
    pk_manifest_destroy(&m);
}

static void
s_refuse_files(const char *files, const char *what, const char *says)
{
    char *doc = s_doc(files);
    s_refuse_doc(doc, what, says);
    free(doc);
}

static void
s_test_names(void)
{
    s_norm("Demo_Pkg", "demo-pkg");
    s_norm("zope.interface", "zope-interface");
    s_norm("a__b--c..d", "a-b-c-d");
    s_norm("A-_.B", "a-b");
    s_norm("numpy", "numpy");

    s_wheel_ok("demo_pkg-1.0-py3-none-any.whl", "demo-pkg", "1.0");
    s_wheel_ok("Other.Lib-0.3-1-cp311-cp311-manylinux_2_17_x86_64.whl",
               "other-lib", "0.3");
    s_wheel_ok("pkg-1.0+local.7-py2.py3-none-any.whl", "pkg", "1.0+local.7");
    s_wheel_ok("pkg-1!2.0rc1-py3-none-any.whl", "pkg", "1!2.0rc1");
    s_wheel_bad("demo_pkg-1.0.tar.gz", "an sdist is not a wheel");
    s_wheel_bad("demo_pkg-1.0-any.whl", "too few parts");
    s_wheel_bad("a-1-2-3-4-5-6.whl", "too many parts");
    s_wheel_bad("pkg-1.0-x1-py3-none-any.whl", "build tag must start with a "
                                               "digit");
    s_wheel_bad("_pkg-1.0-py3-none-any.whl", "name must start with alnum");
    s_wheel_bad("pkg--py3-none-any.whl", "empty version");
    s_wheel_bad("pkg-1.0-py3-none-any;rm.whl", "odd bytes in a tag");
    s_wheel_bad(".whl", "no stem");

    s_filename_bad("../x.whl", "a path escaping the directory", "'/'");
    s_filename_bad("/etc/x.whl", "an absolute path", "absolute");
    s_filename_bad("sub/x-1.0-py3-none-any.whl", "a name with '/'", "'/'");
    s_filename_bad("..", "the parent directory", "directory");
    s_filename_bad(".hidden-1.0-py3-none-any.whl", "a hidden file", "hidden");
    s_filename_bad("x\n-1.0-py3-none-any.whl", "a control byte", "control");
    s_filename_bad("", "an empty name", "empty");
}

static void
s_test_parser(void)
{
    char *doc = s_doc(s_good_files);
    err_t err;
    err_clear(&err);
    pk_manifest_t *m = pk_manifest_parse(doc, strlen(doc), &err);
    ok(m != NULL, "a well-formed manifest parses");
    if (!m) {
        diag("  %s", err.text);
        free(doc);
        return;
    }
    is_int(pk_manifest_count(m), 3, "every listed wheel becomes an entry");
    const pk_manifest_entry_t *e = pk_manifest_entry(m, 2);
    ok(e && strcmp(e->name, "other-lib") == 0 &&
           strcmp(e->version, "0.3") == 0 && e->size == 12 &&
           strcmp(e->sha256, H64) == 0 && e->fd == -1,
       "an entry carries name, version, size, hash and no fd before "
       "verification");
    is_str(pk_manifest_signer(m), "k1", "the signer field is kept");
    ok(pk_manifest_entry(m, 3) == NULL, "there is no entry past the end");
    ok(pk_manifest_signed_by(m) == NULL,
       "a merely parsed manifest claims no verifying key");

    const pk_manifest_entry_t *out[4];
    is_int(pk_manifest_resolve(m, "demo-pkg", out, 4, &err), 2,
           "'name' resolves to every version of the project");
    ok(pk_manifest_resolve(m, " Demo_Pkg == 2.0 ", out, 4, &err) == 1 &&
           strcmp(out[0]->version, "2.0") == 0,
       "'Name==ver' resolves after name normalization to that version only");
    is_int(pk_manifest_resolve(m, "other.lib==0.3", out, 4, &err), 1,
           "a dotted spelling of a name resolves to the same project");
    err_clear(&err);
    ok(pk_manifest_resolve(m, "pandas", out, 4, &err) == -1 &&
           err.code == ERR_USAGE && strstr(err.text, "'pandas'") &&
           strstr(err.text, "demo-pkg 1.0, demo-pkg 2.0, other-lib 0.3"),
       "a package not in the manifest is refused with the list of what is "
       "available");
    err_clear(&err);
    ok(pk_manifest_resolve(m, "demo-pkg==3.0", out, 4, &err) == -1 &&
           strstr(err.text, "demo-pkg 3.0") && strstr(err.text, "1.0"),
       "a version not in the manifest is refused naming the versions there");
    err_clear(&err);
    ok(pk_manifest_resolve(m, "demo-pkg>=1.0", out, 4, &err) == -1 &&
           strstr(err.text, "NAME==VERSION"),
       "other version specifiers are refused, not guessed at");
    ok(pk_manifest_resolve(m, "demo-pkg[extra]", out, 4, &err) == -1,
       "extras are refused");
    ok(pk_manifest_resolve(m, "demo-pkg==", out, 4, &err) == -1,
       "an empty version is refused");
    is_int(pk_manifest_resolve(m, "demo-pkg", out, 1, &err), 2,
           "resolve reports every match even when out[] is smaller");
    bool listed = false;
    is_str(pk_manifest_best(m, "demo-pkg", NULL, &listed), "2.0",
           "a dependency without a specifier gets the highest version");
    is_str(pk_manifest_best(m, "demo-pkg", "<2", &listed), "1.0",
           "a dependency gets the highest version its specifier allows");
    ok(!pk_manifest_best(m, "demo-pkg", ">=3", &listed) && listed,
       "no version matching: none chosen, but the project is listed");
    ok(!pk_manifest_best(m, "pandas", NULL, &listed) && !listed,
       "a project not in the manifest is not listed");
    char *avail = pk_manifest_available(m, "demo-pkg");
    is_str(avail, "demo-pkg 1.0, demo-pkg 2.0",
           "the versions available of one project, for messages");
    free(avail);
    pk_manifest_destroy(&m);
    free(doc);
    s_refuse_files(ENTRY("np-1.0-py3-none-any.whl", "np", "1.0", "1", "aa" H64),
                   "a hash longer than 64 digits", "'sha256'");
    /* Two wheels of one release (different platforms), one of another. */
#define HB "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define HC "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
    doc = s_doc(ENTRY("np-1.0-cp311-cp311-linux_x86_64.whl", "np", "1.0", "1",
                      H64) "," ENTRY("np-1.0-cp312-cp312-linux_x86_64.whl",
                                     "np", "1.0", "1",
                                     HB) "," ENTRY("np-2.0-py3-none-any.whl",
                                                   "np", "2.0", "1", HC));
    m = pk_manifest_parse(doc, strlen(doc), &err);
    int nm = m ? pk_manifest_resolve(m, "np", out, 4, &err) : -1;
    char *req = nm == 3 ? pk_manifest_requirements_txt(out, 3) : NULL;
    is_str(req,
           "np==1.0 --hash=sha256:" H64 " --hash=sha256:" HB "\n"
           "np==2.0 --hash=sha256:" HC "\n",
           "a requirements file pins each release once, with the hash of "
           "every wheel of that release");
    free(req);
    pk_manifest_destroy(&m);
    ok(m == NULL, "destroy nulls the caller's pointer");
    pk_manifest_destroy(&m);
    free(doc);

    s_refuse_doc("{\"format\": ", "truncated JSON", "not valid JSON");
    s_refuse_doc("[1, 2]", "a non-object document", "not a JSON object");
    s_refuse_doc("{\"format\": \"jupyter-agent-manifest/2\", \"signer\": "
                 "\"k\", \"created\": \"t\", \"files\": []}",
                 "an unknown format version", "jupyter-agent-manifest/1");
    s_refuse_doc("{\"format\": \"jupyter-agent-manifest/1\", \"signer\": "
                 "\"k\", \"created\": \"t\", \"files\": [], \"x\": 1}",
                 "an unknown top-level field", "unknown field 'x'");
    s_refuse_doc("{\"format\": \"jupyter-agent-manifest/1\", \"signer\": "
                 "\"k\", \"signer\": \"evil\", \"created\": \"t\", "
                 "\"files\": []}",
                 "a duplicated JSON key (two readers could disagree)",
                 "duplicate");
    s_refuse_doc("{\"format\": \"jupyter-agent-manifest/1\", \"signer\": "
                 "\"k\", \"created\": \"t\", \"files\": {}}",
                 "files that are not an array", "'files'");
    s_refuse_doc("{\"format\": \"jupyter-agent-manifest/1\", "
                 "\"created\": \"t\", \"files\": []}",
                 "a missing signer", "'signer'");

    s_refuse_files(
        ENTRY("../demo_pkg-1.0-py3-none-any.whl", "demo-pkg", "1.0", "1", H64),
        "an entry path escaping its directory", "escapes");
    s_refuse_files(ENTRY("/tmp/demo_pkg-1.0-py3-none-any.whl", "demo-pkg",
                         "1.0", "1", H64),
                   "an absolute entry path", "absolute");
    s_refuse_files(
        ENTRY("sub/demo_pkg-1.0-py3-none-any.whl", "demo-pkg", "1.0", "1", H64),
        "an entry name with '/'", "contains '/'");
    s_refuse_files(ENTRY("demo_pkg\\u0000-1.0-py3-none-any.whl", "demo-pkg",
                         "1.0", "1", H64),
                   "a NUL byte hidden in a filename", "");
    s_refuse_files(ENTRY("demo_pkg-1.0.tar.gz", "demo-pkg", "1.0", "1", H64),
                   "a file that is not a wheel", "not a wheel");
    s_refuse_files(
        ENTRY("demo_pkg-1.0-py3-none-any.whl", "evil", "1.0", "1", H64),
        "a name that disagrees with the filename",
        "'demo-pkg' from the filename");
    s_refuse_files(
        ENTRY("demo_pkg-1.0-py3-none-any.whl", "Demo_Pkg", "1.0", "1", H64),
        "a name that is not normalized", "normalized");
    s_refuse_files(
        ENTRY("demo_pkg-1.0-py3-none-any.whl", "demo-pkg", "9.9", "1", H64),
        "a version that disagrees with the filename",
        "'version' must be '1.0'");
    s_refuse_files(
        ENTRY("demo_pkg-1.0-py3-none-any.whl", "demo-pkg", "1.0", "-1", H64),
        "a negative size", "'size'");
    s_refuse_files(ENTRY("demo_pkg-1.0-py3-none-any.whl", "demo-pkg", "1.0",
                         "\"10\"", H64),
                   "a size given as a string", "'size'");
    s_refuse_files(ENTRY("demo_pkg-1.0-py3-none-any.whl", "demo-pkg", "1.0",
                         "1",
                         "0123456789ABCDEF0123456789abcdef0123456789abcdef"
                         "0123456789abcdef"),
                   "an uppercase hash (one spelling only)", "'sha256'");
    s_refuse_files(
        ENTRY("demo_pkg-1.0-py3-none-any.whl", "demo-pkg", "1.0", "1", "abc"),
        "a short hash", "'sha256'");
    s_refuse_files("{\"name\": \"demo-pkg\", \"version\": \"1.0\", "
                   "\"filename\": \"demo_pkg-1.0-py3-none-any.whl\", "
                   "\"size\": 1}",
                   "an entry without a hash", "'sha256'");
    s_refuse_files("{\"name\": \"demo-pkg\", \"version\": \"1.0\", "
                   "\"filename\": \"demo_pkg-1.0-py3-none-any.whl\", "
                   "\"size\": 1, \"sha256\": \"" H64 "\", \"url\": \"x\"}",
                   "an entry with an unknown field", "unknown field 'url'");
    s_refuse_files("\"demo_pkg-1.0-py3-none-any.whl\"",
                   "an entry that is not an object", "not an object");
    s_refuse_files(ENTRY("demo_pkg-1.0-py3-none-any.whl", "demo-pkg", "1.0",
                         "1", H64) "," ENTRY("demo_pkg-1.0-py3-none-any.whl",
                                             "demo-pkg", "1.0", "1", H64),
                   "the same file listed twice",
                   "duplicate entry for demo_pkg-1.0-py3-none-any.whl");
    s_refuse_files(ENTRY("demo_pkg-1.0-py3-none-any.whl", "demo-pkg", "1.0",
                         "1", H64) "," ENTRY("Demo.Pkg-1.0-py3-none-any.whl",
                                             "demo-pkg", "1.0", "1", H64),
                   "two spellings of the same wheel", "name the same wheel");
}

static void
s_test_keys(void)
{
    pk_pubkey_t k;
    err_t err;
    err_clear(&err);
    char path[300];
    snprintf(path, sizeof path, "%s/k1", s_tmp);
    pk_pubkey_t pub;
    ok(pk_key_generate(path, "ops-1", &pub, &err) == 0, "keygen writes a key");
    struct stat st;
    ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600,
       "the secret key file is mode 0600");
    err_clear(&err);
    ok(pk_key_generate(path, NULL, NULL, &err) == -1 && err.code == ERR_USAGE &&
           strstr(err.text, "refusing to overwrite"),
       "keygen refuses to overwrite an existing key");
    char bad[300];
    snprintf(bad, sizeof bad, "%s/k-bad-label", s_tmp);
    ok(pk_key_generate(bad, "a b", NULL, &err) == -1 && access(bad, F_OK) != 0,
       "keygen refuses a label with spaces and leaves no file");

    char *line = pk_pubkey_format(&pub);
    ok(pk_pubkey_parse(&k, line, &err) == 0 && strcmp(k.id, pub.id) == 0 &&
           k.label[0] == '\0',
       "a formatted public key parses back to the same key id");
    char withlabel[200];
    snprintf(withlabel, sizeof withlabel, "  %s ops-1\n", line);
    ok(pk_pubkey_parse(&k, withlabel, &err) == 0 &&
           strcmp(k.label, "ops-1") == 0,
       "a public key line may carry a label and surrounding whitespace");
    line[10] = line[10] == 'A' ? 'B' : 'A';
    pk_pubkey_t k2;
    ok(pk_pubkey_parse(&k2, line, &err) == 0 && strcmp(k2.id, pub.id) != 0,
       "a different key has a different key id");
    free(line);
    ok(pk_pubkey_parse(&k, "ed25519:AAAA", &err) == -1,
       "a short public key is refused");
    ok(pk_pubkey_parse(&k, "rsa:AAAA", &err) == -1 &&
           strstr(err.text, "ed25519:"),
       "a key of another type is refused, naming the expected prefix");

    pk_seckey_t *sk = pk_seckey_load(path, &err);
    ok(sk != NULL && strcmp(pk_seckey_public(sk)->id, pub.id) == 0 &&
           strcmp(pk_seckey_public(sk)->label, "ops-1") == 0,
       "a secret key loads with its public half and label");
    unsigned char sig[PK_KEY_SIG_BYTES];
    ok(sk && pk_seckey_sign(sk, "abc", 3, sig, &err) == 0 &&
           pk_pubkey_verify(&pub, "abc", 3, sig) &&
           !pk_pubkey_verify(&pub, "abd", 3, sig),
       "a signature verifies for its message and not for another");
    pk_seckey_destroy(&sk);
    ok(sk == NULL, "destroying a secret key nulls the pointer");
    chmod(path, 0640);
    err_clear(&err);
    ok(pk_seckey_load(path, &err) == NULL && strstr(err.text, "chmod 600"),
       "a group-readable secret key is refused with the fix");
    chmod(path, 0600);

    pk_trust_t *t = pk_trust_new();
    char pubpath[320];
    snprintf(pubpath, sizeof pubpath, "%s.pub", path);
    ok(pk_trust_add_arg(t, pubpath, &err) == 0 && pk_trust_count(t) == 1,
       "--trust accepts a .pub file");
    line = pk_pubkey_format(&pub);
    ok(pk_trust_add_arg(t, line, &err) == 0 && pk_trust_count(t) == 1,
       "the same key trusted twice is kept once");
    free(line);
    ok(pk_trust_find(t, pub.pk) != NULL, "a trusted key is found by its bytes");
    char *desc = pk_trust_describe(t);
    ok(strstr(desc, pub.id) && strstr(desc, "ops-1"),
       "the trust description names key id and label");
    free(desc);
    char tdir[300];
    snprintf(tdir, sizeof tdir, "%s/trusted", s_tmp);
    mkdir(tdir, 0755);
    ok(pk_trust_add_dir(t, "/nonexistent/trusted-keys", &err) == 0,
       "a missing trusted-keys directory adds nothing and is not an error");
    char junk[340];
    snprintf(junk, sizeof junk, "%s/broken.pub", tdir);
    FILE *f = fopen(junk, "w");
    fputs("ed25519:not-base64!\n", f);
    fclose(f);
    err_clear(&err);
    ok(pk_trust_add_dir(t, tdir, &err) == -1 && strstr(err.text, junk),
       "a malformed key in a trusted-keys directory is refused, naming it");
    unlink(junk);
    chmod(tdir, 0777);
    err_clear(&err);
    ok(pk_trust_add_dir(t, tdir, &err) == -1 &&
           strstr(err.text, "world-writable"),
       "a world-writable trusted-keys directory is refused");
    chmod(tdir, 0755);
    pk_trust_destroy(&t);
}

static void
s_write(const char *dir, const char *name, const char *text)
{
    char p[400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
}

static void
s_test_verified_fds(void)
{
    char dir[300], keypath[300], dst[300];
    err_t err;
    err_clear(&err);
    snprintf(dir, sizeof dir, "%s/pkgs", s_tmp);
    snprintf(dst, sizeof dst, "%s/dst", s_tmp);
    snprintf(keypath, sizeof keypath, "%s/signer", s_tmp);
    mkdir(dir, 0755);
    mkdir(dst, 0755);
    s_write(dir, "demo_pkg-1.0-py3-none-any.whl", "wheel bytes one\n");
    s_write(dir, "other-2.0-py3-none-any.whl", "wheel bytes two\n");
    pk_pubkey_t pub;
    pk_key_generate(keypath, "t", &pub, NULL);
    pk_seckey_t *sk = pk_seckey_load(keypath, &err);
    pk_manifest_t *signed_m = sk ? pk_manifest_sign_dir(dir, sk, &err) : NULL;
    ok(signed_m && pk_manifest_count(signed_m) == 2,
       "signing a directory lists each wheel");
    if (!signed_m)
        diag("  %s", err.text);
    pk_manifest_destroy(&signed_m);
    pk_seckey_destroy(&sk);

    pk_trust_t *t = pk_trust_new();
    char *line = pk_pubkey_format(&pub);
    pk_trust_add_key(t, line, "test", &err);
    free(line);
    pk_manifest_t *m = pk_manifest_load_verified(dir, t, &err);
    ok(m != NULL, "a freshly signed directory verifies");
    if (!m) {
        diag("  %s", err.text);
        pk_trust_destroy(&t);
        return;
    }
    ok(pk_manifest_signed_by(m) &&
           strcmp(pk_manifest_signed_by(m)->id, pub.id) == 0,
       "the verified manifest names the key that verified it");
    int all_fds = 1;
    for (size_t i = 0; i < pk_manifest_count(m); i++)
        all_fds &= pk_manifest_entry(m, i)->fd >= 0;
    ok(all_fds, "every verified entry carries an open fd");

    const pk_manifest_entry_t *e[2];
    pk_manifest_resolve(m, "demo-pkg", e, 2, &err);
    /* Replace the path after verification: the fd still has the checked
     * bytes, and the copy is of those bytes. */
    s_write(dir, "swap.tmp", "EVIL bytes after verification\n");
    char from[400], to[400];
    snprintf(from, sizeof from, "%s/swap.tmp", dir);
    snprintf(to, sizeof to, "%s/demo_pkg-1.0-py3-none-any.whl", dir);
    rename(from, to);
    int dfd = open(dst, O_RDONLY | O_DIRECTORY);
    ok(pk_manifest_entry_copy(e[0], dfd, &err) == 0,
       "a wheel swapped after verification still copies the verified bytes");
    char copy[400], buf[64] = {0};
    snprintf(copy, sizeof copy, "%s/demo_pkg-1.0-py3-none-any.whl", dst);
    FILE *f = fopen(copy, "r");
    if (f) {
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        buf[got] = '\0';
        fclose(f);
    }
    is_str(buf, "wheel bytes one\n", "the copy holds exactly the signed bytes");
    struct stat st;
    ok(stat(copy, &st) == 0 && (st.st_mode & 0777) == 0444,
       "the copy is read-only");
    err_clear(&err);
    ok(pk_manifest_entry_copy(e[0], dfd, &err) == -1,
       "a copy never overwrites an existing file");

    /* Rewrite the other wheel in place (same inode): the copy notices. */
    pk_manifest_resolve(m, "other", e, 2, &err);
    snprintf(to, sizeof to, "%s/other-2.0-py3-none-any.whl", dir);
    f = fopen(to, "r+");
    fputs("WHEEL", f);
    fclose(f);
    err_clear(&err);
    ok(pk_manifest_entry_copy(e[0], dfd, &err) == -1 &&
           err.code == ERR_VERIFY && strstr(err.text, "changed after"),
       "a wheel rewritten in place after verification is caught on copy");
    snprintf(copy, sizeof copy, "%s/other-2.0-py3-none-any.whl", dst);
    ok(access(copy, F_OK) != 0, "a copy that failed its check is removed");
    close(dfd);
    pk_manifest_destroy(&m);
    pk_trust_destroy(&t);
}

int
main(void)
{
    snprintf(s_tmp, sizeof s_tmp, "/tmp/test_pk_manifest.XXXXXX");
    if (!mkdtemp(s_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    s_test_names();
    s_test_parser();
    s_test_keys();
    s_test_verified_fds();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_tmp);
    if (system(cmd) != 0)
        diag("could not remove %s", s_tmp);
    return done_testing();
}
