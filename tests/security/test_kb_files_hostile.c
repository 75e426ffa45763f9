/*
 * Files out of a hostile kernel (kernel-bridge/kb_files.h). Code in a real
 * sandboxed ipykernel replaces the file helper's functions with forgeries:
 * it lies about names, sizes and hashes, sends more than it announced or
 * than was asked, answers twice or never, or streams without end. Each
 * check shows the host refusing with a clear error, keeping nothing
 * half-checked, writing nothing outside DIR, and holding no more than a
 * bounded answer in memory. The same lies against a single-file read
 * (kb_files_read) are refused the same way, nothing handed back.
 */
#include "../tap.h"
#include "../tools/kernel_run.h"

#include "common/xalloc.h"
#include "kernel-bridge/kb_files.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_tmp[] = "/tmp/ja-kbfiles-hostile-XXXXXX";
static int s_case;

/* The forgery: answers from m.CFG = {"mode", "listing", "data", ...};
 * put_* requests go to the genuine helper unless the mode says else. */
static const char s_hostile[] =
    "import sys, json, hashlib, base64, time\n"
    "from IPython.display import publish_display_data\n"
    "m = sys.modules['_jupyter_agent_files']\n"
    "m.GENUINE = getattr(m, 'GENUINE', m.run)\n"
    "def _say(r, obj):\n"
    "    obj['r'] = r\n"
    "    publish_display_data({m.MIME: obj})\n"
    "def _sha(b):\n"
    "    return hashlib.sha256(b).hexdigest()\n"
    "def evil(text, payload=None):\n"
    "    req = json.loads(text)\n"
    "    r, op, c = req['r'], req['op'], m.CFG\n"
    "    mode = c.get('mode', '')\n"
    "    data = c.get('data', 'hello').encode('latin-1')\n"
    "    lie = mode == 'put_lie' and op == 'put_end'\n"
    "    if op.startswith('put') and not lie or op == 'hello':\n"
    "        return m.GENUINE(text, payload)\n"
    "    if op == 'put_end':\n"
    "        return _say(r, {'size': req['size'], 'h': '0' * 64})\n"
    "    if op == 'ls':\n"
    "        return _say(r, {'e': c['listing']})\n"
    "    if op == 'get_open':\n"
    "        h = _sha(b'other' if mode == 'whole_hash' else data)\n"
    "        return _say(r, {'t': 'ab', 's': c.get('open_size', len(data)),\n"
    "                        'h': h})\n"
    "    if op == 'get_close':\n"
    "        return _say(r, {})\n"
    "    o, n = req['o'], req['n']\n"
    "    b = (data * (1 + (o + n) // max(len(data), 1)))[o:o + n]\n"
    "    h = _sha(b)\n"
    "    if mode == 'chunk_hash':\n"
    "        h = _sha(b'nope')\n"
    "    if mode == 'more':\n"
    "        b = b + b'EXTRA' * 10\n"
    "        h = _sha(b)\n"
    "    if mode == 'less':\n"
    "        b = b[:-1]\n"
    "        h = _sha(b)\n"
    "    if mode == 'huge':\n"
    "        b = b'A' * (8 << 20)\n"
    "        h = _sha(b)\n"
    "    if mode == 'endless':\n"
    "        while True:\n"
    "            sys.stdout.write('y' * 65536)\n"
    "            sys.stdout.flush()\n"
    "    if mode == 'flood':\n"
    "        while True:\n"
    "            sys.stdout.write('y' * 65536)\n"
    "    if mode == 'silent':\n"
    "        return\n"
    "    if mode == 'sleep':\n"
    "        time.sleep(3600)\n"
    "    b64 = base64.b64encode(b).decode()\n"
    "    if mode == 'bad_b64':\n"
    "        b64 = '!!!!' + b64[4:]\n"
    "    ans = {'o': o + (1 if mode == 'offset' else 0), 'b': b64, 'h': h}\n"
    "    _say(r, dict(ans))\n"
    "    if mode == 'twice':\n"
    "        _say(r, dict(ans))\n"
    "m.run = evil\n"
    "print('installed')\n";

/* Set m.CFG from a JSON text, with the forgery in place. */
static void
s_config(kb_kernel_t *k, const char *cfg_json)
{
    json_t *s = json_string(cfg_json);
    char *lit = json_dumps(s, JSON_ENCODE_ANY);
    json_decref(s);
    char *code = xasprintf("import json, sys\n"
                           "m = sys.modules.get('_jupyter_agent_files')\n"
                           "m.CFG = json.loads(%s)\n"
                           "print('ok' if m.run.__name__ == 'evil' else "
                           "'genuine')",
                           lit);
    /* A stop at an answer's cap interrupts the kernel; the SIGINT may
     * land after that execution ended, in the next one, and a kernel that
     * did not stop in time was restarted without the forgery: try again,
     * putting it back. */
    bool done = false;
    for (int i = 0; i < 3 && !done; i++) {
        char *got = kernel_run_text(k, code, 30000);
        done = got && strcmp(got, "ok\n") == 0;
        if (!done) {
            diag("configuring the forgery: %s", got ? got : "no output");
            free(kb_files_kernel_dir(k, NULL, NULL));
            free(kernel_run_text(k, s_hostile, 30000));
        }
        free(got);
    }
    if (!done)
        diag("configuring the forgery failed");
    free(code);
    free(lit);
}

static int
s_count(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

/* A copy-out of the forgery into a fresh PARENT/DIR; *parent gets PARENT
 * (caller frees). */
static int
s_pull(kb_kernel_t *k, const sb_files_out_opts_t *oo, int timeout_ms,
       size_t chunk, char **parent, char **dir, err_t *err)
{
    *parent = xasprintf("%s/case-%d", s_tmp, ++s_case);
    mkdir(*parent, 0700);
    *dir = xasprintf("%s/DIR", *parent);
    kb_files_opts_t fo;
    kb_files_opts_init(&fo);
    fo.timeout_ms = timeout_ms;
    fo.chunk_bytes = chunk;
    sb_files_out_opts_t d;
    sb_files_out_opts_init(&d, 64 << 20);
    return kb_files_copy_out(k, ".", *dir, oo ? oo : &d, &fo, NULL, err);
}

static bool
s_exists(const char *dir, const char *rel)
{
    char *p = xasprintf("%s/%s", dir, rel);
    struct stat st;
    bool r = lstat(p, &st) == 0;
    free(p);
    return r;
}

/* A forged file answer that must leave DIR empty with `code` and `want`
 * in the message. */
static void
s_one_file(kb_kernel_t *k, const char *mode, int code, const char *want,
           const char *guarantee)
{
    char *cfg = xasprintf("{\"mode\": \"%s\", \"data\": \"0123456789\","
                          "\"listing\": [{\"p\": \"f.txt\", \"s\": 10}]}",
                          mode);
    s_config(k, cfg);
    free(cfg);
    err_t err = {0};
    char *parent, *dir;
    int rc = s_pull(k, NULL, 0, 0, &parent, &dir, &err);
    ok(rc < 0 && err.code == code && strstr(err.text, want) &&
           s_count(dir) == 0,
       "%s: refused, nothing (not even a temporary file) kept", guarantee);
    diag("%s", err.text);
    free(parent);
    free(dir);
}

/* The same forgery against a single-file read (kb_files_read): refused
 * with `code` and `want` in the message, nothing handed back. */
static void
s_read_one(kb_kernel_t *k, const char *cfg, size_t max, int code,
           const char *want, const char *guarantee)
{
    s_config(k, cfg);
    err_t err = {0};
    char *data = (char *)"unset";
    size_t len = 1;
    kb_files_opts_t fo;
    kb_files_opts_init(&fo);
    fo.chunk_bytes = 4096;
    int rc = kb_files_read(k, "f.txt", max, &data, &len, &fo, &err);
    ok(rc < 0 && data == NULL && len == 0 && err.code == code &&
           strstr(err.text, want),
       "read: %s: refused, nothing handed back (%s)", guarantee, err.text);
}

static long
s_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

int
main(void)
{
    if (!mkdtemp(s_tmp))
        return 1;
    err_t err = {0};
    kb_kernel_opts_t kopts = {.launcher = kernel_run_sandbox,
                              .interrupt_grace_ms = 3000};
    kb_kernel_t *k = kb_kernel_start(&kopts, &err);
    if (!ok(k != NULL, "a sandboxed ipykernel starts")) {
        diag("%s", err.text);
        return done_testing();
    }
    char *d = kb_files_kernel_dir(k, NULL, &err);
    ok(d != NULL, "the genuine helper answers first (the test's control)");
    free(d);
    char *got = kernel_run_text(k, s_hostile, 30000);
    ok(got && strcmp(got, "installed\n") == 0,
       "code in the kernel replaces the helper with a forgery");
    free(got);

    /* Control: the forgery telling the truth is copied. */
    s_config(k, "{\"data\": \"0123456789\", \"listing\": "
                "[{\"p\": \"f.txt\", \"s\": 10}]}");
    char *parent, *dir;
    int rc = s_pull(k, NULL, 0, 0, &parent, &dir, &err);
    ok(rc == 0 && s_exists(dir, "f.txt"),
       "a truthful answer is copied (the test's control)");
    free(parent);
    free(dir);

    /* Names: nothing outside DIR, no dot-files, escaped in the message. */
    s_config(k,
             "{\"listing\": ["
             "{\"p\": \"../x\", \"s\": 5}, {\"p\": \"/tmp/evil-abs\", \"s\": "
             "5}, {\"p\": \".bashrc\", \"s\": 5}, {\"p\": \"a/../../y\", "
             "\"s\": 5}, {\"p\": \"ok/.ssh/id\", \"s\": 5}, "
             "{\"p\": \".\\u001b]0;pwn\\u0007\", \"s\": 5}, "
             "{\"p\": \"d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/deep\", \"s\": 5}, "
             "{\"p\": \"sock\", \"k\": \"\\u001b[2Jsocket\"}, "
             "{\"p\": \"good.txt\", \"s\": 5}], \"data\": \"hello\"}");
    rc = s_pull(k, NULL, 0, 0, &parent, &dir, &err);
    ok(rc < 0 && err.code == ERR_IO && strstr(err.text, "copied the rest"),
       "a listing of unsafe names: the rest is copied, the error says so");
    diag("%s", err.text);
    ok(strstr(err.text, "'../x' ('..' leads outside") &&
           strstr(err.text, "'/tmp/evil-abs' (absolute path") &&
           strstr(err.text, "'.bashrc' (dot-file") &&
           strstr(err.text, "'a/../../y' ('..' leads outside") &&
           strstr(err.text, "'ok/.ssh/id' (dot-directory") &&
           strstr(err.text, "(directory nested too deeply)"),
       "'..', absolute, dot-file, dot-directory and 17-deep paths are each "
       "refused and named");
    ok(strstr(err.text, "'sock' (not a regular file)") &&
           !strchr(err.text, '\033') && strstr(err.text, "\\e]0;pwn"),
       "the kernel's words are not printed: its kind becomes ours, its "
       "escape sequences are escaped");
    ok(s_count(dir) == 1 && s_exists(dir, "good.txt"),
       "DIR holds only the one safe file");
    ok(s_count(parent) == 1 && !s_exists("/tmp", "evil-abs") &&
           !s_exists(s_tmp, "y"),
       "nothing was written outside DIR");
    free(parent);
    free(dir);

    /* A file where a directory must be. */
    s_config(k, "{\"listing\": [{\"p\": \"a\", \"s\": 5}, {\"p\": \"a/b\", "
                "\"s\": 5}], \"data\": \"hello\"}");
    rc = s_pull(k, NULL, 0, 0, &parent, &dir, &err);
    ok(rc < 0 && strstr(err.text, "'a/b' (a file or symbolic link is in its "
                                  "place)"),
       "a path through a file is refused, not followed");
    free(parent);
    free(dir);

    s_one_file(k, "chunk_hash", ERR_VERIFY, "does not match its SHA-256",
               "a chunk whose SHA-256 is wrong");
    s_one_file(k, "whole_hash", ERR_VERIFY, "not the one the kernel announced",
               "a file whose whole SHA-256 is not the announced one");
    s_one_file(k, "more", ERR_KERNEL, "more bytes than asked for",
               "a chunk with more bytes than asked for");
    s_one_file(k, "less", ERR_KERNEL, "fewer bytes than announced",
               "a chunk with fewer bytes than announced");
    s_one_file(k, "offset", ERR_KERNEL, "answers for another offset",
               "a chunk for another offset");
    s_one_file(k, "bad_b64", ERR_KERNEL, "is not base64",
               "a chunk that is not base64");
    s_one_file(k, "twice", ERR_KERNEL, "2 times", "an answer sent twice");
    s_one_file(k, "silent", ERR_KERNEL, "sent no answer",
               "a request never answered");

    /* The same lies against a single-file read (mcp --gateway's
     * read_file). Control first: the truth is read. */
    s_config(k, "{\"data\": \"0123456789\"}");
    char *data = NULL;
    size_t len = 0;
    rc = kb_files_read(k, "f.txt", 1 << 20, &data, &len, NULL, &err);
    ok(rc == 0 && len == 10 && memcmp(data, "0123456789", 10) == 0,
       "read: a truthful answer is read (the test's control)");
    free(data);
    static const struct {
        const char *mode;
        int code;
        const char *want;
        const char *guarantee;
    } lies[] = {
        {"chunk_hash", ERR_VERIFY, "does not match its SHA-256",
         "a chunk whose SHA-256 is wrong"},
        {"whole_hash", ERR_VERIFY, "not the one the kernel announced",
         "a file whose whole SHA-256 is not the announced one"},
        {"more", ERR_KERNEL, "more bytes than asked for",
         "a chunk with more bytes than asked for"},
        {"less", ERR_KERNEL, "fewer bytes than announced",
         "a chunk with fewer bytes than announced"},
        {"offset", ERR_KERNEL, "answers for another offset",
         "a chunk for another offset"},
        {"bad_b64", ERR_KERNEL, "is not base64", "a chunk that is not base64"},
        {"twice", ERR_KERNEL, "2 times", "an answer sent twice"},
        {"silent", ERR_KERNEL, "sent no answer", "a request never answered"},
    };
    for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
        char *cfg = xasprintf("{\"mode\": \"%s\", \"data\": \"0123456789\"}",
                              lies[i].mode);
        s_read_one(k, cfg, 1 << 20, lies[i].code, lies[i].want,
                   lies[i].guarantee);
        free(cfg);
    }
    /* Sizes: the kernel announces more than the cap, or more than the
     * bytes its hash covers. */
    s_read_one(k, "{\"open_size\": 8388608, \"data\": \"0123456789\"}", 4 << 20,
               ERR_IO, "over the limit of 4194304 bytes",
               "a file announced over the 4 MiB cap, before any byte comes");
    s_read_one(k, "{\"open_size\": 100000, \"data\": \"0123456789\"}", 4 << 20,
               ERR_VERIFY, "not the one the kernel announced",
               "a size that is not the size of the announced SHA-256");
    s_read_one(k, "{\"open_size\": -1, \"data\": \"0123456789\"}", 4 << 20,
               ERR_KERNEL, "lacks a token, size or SHA-256", "a negative size");
    s_read_one(k, "{\"mode\": \"huge\", \"data\": \"0123456789\"}", 4 << 20,
               ERR_KERNEL, "with more than",
               "an 8 MiB answer to a 10-byte request is cut at its cap");

    /* Size lies against the byte cap. */
    s_config(k, "{\"listing\": [{\"p\": \"small.txt\", \"s\": 5}], "
                "\"open_size\": 1048576, \"data\": \"0123456789abcdef\"}");
    sb_files_out_opts_t oo;
    sb_files_out_opts_init(&oo, 64 * 1024);
    rc = s_pull(k, &oo, 0, 16 * 1024, &parent, &dir, &err);
    ok(rc < 0 && strstr(err.text, "65536-byte cap") && s_count(dir) == 0,
       "a file listed as 5 bytes that turns out 1 MiB stops at the 64 KiB "
       "cap and is not kept (%s)",
       err.text);
    free(parent);
    free(dir);

    /* Entries beyond the cap. */
    sb_files_out_opts_init(&oo, 64 << 20);
    oo.max_entries = 10;
    json_t *many = json_array();
    for (int i = 0; i < 30; i++) {
        char name[32];
        snprintf(name, sizeof name, "f%02d", i);
        json_array_append_new(many, json_pack("{s:s, s:i}", "p", name, "s", 5));
    }
    json_t *cfg = json_pack("{s:o, s:s}", "listing", many, "data", "hello");
    char *text = json_dumps(cfg, 0);
    s_config(k, text);
    free(text);
    rc = s_pull(k, &oo, 0, 0, &parent, &dir, &err);
    ok(rc < 0 && err.code == ERR_KERNEL &&
           strstr(err.text, "more than the 11 asked for") && s_count(dir) == 0,
       "a listing longer than asked for is refused whole");
    free(parent);
    free(dir);
    while (json_array_size(json_object_get(cfg, "listing")) > 11)
        json_array_remove(json_object_get(cfg, "listing"), 11);
    text = json_dumps(cfg, 0);
    s_config(k, text);
    free(text);
    json_decref(cfg);
    rc = s_pull(k, &oo, 0, 0, &parent, &dir, &err);
    ok(rc < 0 && strstr(err.text, "over the cap of 10 files") &&
           s_count(dir) == 10,
       "the 11th entry stops the copy at the cap of 10 entries");
    free(parent);
    free(dir);

    /* Oversized answers and an endless stream: bounded, interrupted. */
    long rss0 = s_rss_kib();
    s_config(k, "{\"mode\": \"huge\", \"data\": \"0123456789\", "
                "\"listing\": [{\"p\": \"f.txt\", \"s\": 10}]}");
    rc = s_pull(k, NULL, 0, 4096, &parent, &dir, &err);
    ok(rc < 0 && err.code == ERR_KERNEL && strstr(err.text, "with more than") &&
           s_count(dir) == 0,
       "an 8 MiB answer to a 10-byte request is cut at its cap (%s)", err.text);
    free(parent);
    free(dir);
    s_config(k, "{\"mode\": \"endless\", \"data\": \"0123456789\", "
                "\"listing\": [{\"p\": \"f.txt\", \"s\": 10}]}");
    rc = s_pull(k, NULL, 0, 4096, &parent, &dir, &err);
    ok(rc < 0 && err.code == ERR_KERNEL && strstr(err.text, "with more than") &&
           s_count(dir) == 0,
       "an endless stream is stopped at the answer's cap (%s)", err.text);
    diag("code %d, %d entries in DIR", err.code, s_count(dir));
    free(parent);
    free(dir);
    /* Unflushed, ipykernel buffers the flood itself: it may reach us as
     * messages over the cap, or the kernel may die of its memory limit
     * first. Either way the copy fails cleanly and we hold nothing. */
    s_config(k, "{\"mode\": \"flood\", \"data\": \"0123456789\", "
                "\"listing\": [{\"p\": \"f.txt\", \"s\": 10}]}");
    rc = s_pull(k, NULL, 0, 4096, &parent, &dir, &err);
    ok(rc < 0 && err.code == ERR_KERNEL &&
           (strstr(err.text, "with more than") ||
            strstr(err.text, "the kernel died")) &&
           s_count(dir) == 0,
       "an unflushed flood fails the copy cleanly (%s)", err.text);
    diag("code %d, %d entries in DIR", err.code, s_count(dir));
    free(parent);
    free(dir);
    if (!kb_kernel_alive(k) && kb_kernel_restart(k, &err) < 0)
        diag("restart: %s", err.text);
    long rss1 = s_rss_kib();
    /* One message is parsed whole before the answer's cap refuses it
     * (the 8 MiB one here; the client's max_msg_bytes bounds it), and
     * malloc keeps what was freed: a bound, not the stream's size. */
#if defined(__SANITIZE_ADDRESS__)
    /* ASan holds freed memory in its quarantine (up to 256 MiB). */
    skip("RSS is no measure under AddressSanitizer (grew %ld KiB)",
         rss1 - rss0);
#else
    ok(rss1 - rss0 < 64 * 1024, "and memory stayed bounded (RSS grew %ld KiB)",
       rss1 - rss0);
#endif
    got = kernel_run_text(k, "print('alive')", 30000);
    ok(got && strcmp(got, "alive\n") == 0,
       "the kernel was stopped and still works");
    free(got);
    /* Stopping it may have cost a restart (and with it the forgery). */
    d = kb_files_kernel_dir(k, NULL, &err);
    free(d);
    got = kernel_run_text(k, s_hostile, 30000);
    ok(got && strcmp(got, "installed\n") == 0, "the forgery is back");
    free(got);

    s_config(k, "{\"mode\": \"sleep\", \"data\": \"0123456789\", "
                "\"listing\": [{\"p\": \"f.txt\", \"s\": 10}]}");
    rc = s_pull(k, NULL, 2000, 0, &parent, &dir, &err);
    ok(rc < 0 && err.code == ERR_TIMEOUT && s_count(dir) == 0,
       "a request never answered times out (%s)", err.text);
    free(parent);
    free(dir);

    /* In: the kernel lying about what it stored. */
    s_config(k, "{\"mode\": \"put_lie\"}");
    char *host = xasprintf("%s/in.txt", s_tmp);
    FILE *f = fopen(host, "w");
    fputs("payload\n", f);
    fclose(f);
    rc = kb_files_push(k, host, "in.txt", 1 << 20, NULL, &err);
    ok(rc < 0 && err.code == ERR_VERIFY && strstr(err.text, "SHA-256"),
       "a kernel that reports another hash for a file sent in is caught");
    free(host);

    kb_kernel_destroy(&k);
    sb_files_remove_tree(s_tmp);
    return done_testing();
}
