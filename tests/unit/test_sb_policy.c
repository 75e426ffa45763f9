/* Unit tests: sandbox policy flags, sizes, environment, JSON, names. */
#include "common/size.h"
#include "common/strv.h"
#include "sandbox/sb_files.h"
#include "sandbox/sb_policy.h"
#include "tests/tap.h"

#include <stdlib.h>
#include <string.h>

static int
s_env_has(char **env, const char *entry)
{
    for (size_t i = 0; env && env[i]; i++)
        if (strcmp(env[i], entry) == 0)
            return 1;
    return 0;
}

static int
s_env_has_name(char **env, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; env && env[i]; i++)
        if (strncmp(env[i], name, n) == 0 && env[i][n] == '=')
            return 1;
    return 0;
}

int
main(void)
{
    sb_policy_t p;
    err_t err;
    sb_policy_init_default(&p);
    is_int(p.memory_bytes, 2ULL << 30, "default memory limit is 2 GiB");
    is_int(p.swap_bytes, 0, "default swap is none");
    is_int(p.pids, 128, "default pids limit is 128");
    ok(p.cpus == 1.0, "default CPU quota is one CPU");
    is_int(p.workspace_bytes, 512ULL << 20, "default /mnt/data is 512 MiB");
    is_int(p.tmp_bytes, 256ULL << 20, "default /tmp is 256 MiB");
    ok(!p.network, "network is off by default");

    uint64_t n = 0;
    ok(size_parse("2G", &n) == 0 && n == 2ULL << 30, "2G is 2 GiB");
    ok(size_parse("512M", &n) == 0 && n == 512ULL << 20, "512M is 512 MiB");
    ok(size_parse("1.5GiB", &n) == 0 && n == 3ULL << 29, "1.5GiB is accepted");
    ok(size_parse("4096", &n) == 0 && n == 4096, "a plain number is bytes");
    ok(size_parse("64kb", &n) == 0 && n == 65536,
       "units are case-insensitive and binary");
    ok(size_parse("-1G", &n) < 0, "negative sizes are refused");
    ok(size_parse("2X", &n) < 0, "unknown units are refused");
    ok(size_parse("", &n) < 0, "an empty size is refused");
    ok(size_parse("G", &n) < 0, "a unit without number is refused");
    ok(size_parse("0", &n) == 0 && n == 0,
       "0 parses as 0 bytes: each flag decides what zero means");
    ok(sb_policy_parse_flag(&p, "--disk", "0", &err) < 0 &&
           strstr(err.text, "--disk"),
       "a zero-sized /mnt/data is refused, naming the flag: %s", err.text);
    ok(size_parse("99999999T", &n) < 0, "a size past 2^64 is refused");

    char b[64];
    is_str(sb_policy_format_bytes(2ULL << 30, b, sizeof b), "2 GiB",
           "2 GiB formats as '2 GiB'");
    is_str(sb_policy_format_bytes(3ULL << 29, b, sizeof b), "1.5 GiB",
           "fractions format with one decimal");
    is_str(sb_policy_format_bytes(300, b, sizeof b), "300 bytes",
           "small sizes format as bytes");

    is_int(sb_policy_parse_flag(&p, "--memory", "512M", &err), 2,
           "--memory VALUE consumes two arguments");
    is_int(p.memory_bytes, 512ULL << 20, "--memory 512M sets 512 MiB");
    is_int(sb_policy_parse_flag(&p, "--memory=1G", NULL, &err), 1,
           "--memory=VALUE consumes one argument");
    is_int(p.memory_bytes, 1ULL << 30, "--memory=1G sets 1 GiB");
    is_int(sb_policy_parse_flag(&p, "--cpus", "1.5", &err), 2,
           "--cpus is a policy flag");
    ok(p.cpus == 1.5, "--cpus 1.5 sets a fractional quota");
    is_int(sb_policy_parse_flag(&p, "--pids", "64", &err), 2,
           "--pids is a policy flag");
    is_int(p.pids, 64, "--pids 64 sets 64");
    sb_policy_parse_flag(&p, "--disk", "1G", &err);
    is_int(p.workspace_bytes, 1ULL << 30, "--disk sets the /mnt/data size");
    sb_policy_parse_flag(&p, "--tmp", "128M", &err);
    is_int(p.tmp_bytes, 128ULL << 20, "--tmp sets the /tmp size");
    is_int(sb_policy_fsize(&p), 1ULL << 30,
           "the file size limit defaults to the largest tmpfs");
    is_int(sb_policy_parse_flag(&p, "--model", "x", &err), 0,
           "a flag that is not a policy flag is left alone");
    is_int(p.pids, 64, "...and changes nothing");

    err_clear(&err);
    is_int(sb_policy_parse_flag(&p, "--memory", "lots", &err), -1,
           "--memory with a bad size fails");
    is_int(err.code, ERR_USAGE, "...as a usage error");
    ok(strstr(err.text, "--memory") && strstr(err.text, "lots"),
       "...naming the flag and the value: %s", err.text);
    is_int(sb_policy_parse_flag(&p, "--memory", "1M", &err), -1,
           "a memory limit under 16M is refused");
    is_int(sb_policy_parse_flag(&p, "--memory", NULL, &err), -1,
           "a missing value is an error");
    is_int(sb_policy_parse_flag(&p, "--cpus", "0", &err), -1,
           "zero CPUs are refused");
    is_int(sb_policy_parse_flag(&p, "--cpus", "2x", &err), -1,
           "a malformed CPU count is refused");
    is_int(sb_policy_parse_flag(&p, "--pids", "-5", &err), -1,
           "a negative pids limit is refused");
    is_int(sb_policy_parse_flag(&p, "--pids", "1", &err), -1,
           "a pids limit too small to start anything is refused");
    is_int(sb_policy_parse_flag(&p, "--network", "on", &err), -1,
           "asking for network is refused with a reason");
    ok(p.cpus == 1.5 && p.memory_bytes == 1ULL << 30,
       "failed flags leave the policy unchanged");

    is_int(sb_policy_parse_flag(&p, "--bind", "/usr/share/doc:/opt/doc", &err),
           2, "--bind HOST:INSIDE is accepted");
    ok(p.n_binds == 1 && strcmp(p.binds[0].host, "/usr/share/doc") == 0 &&
           strcmp(p.binds[0].inside, "/opt/doc") == 0,
       "...and recorded");
    is_int(sb_policy_parse_flag(&p, "--bind", "/etc:/mnt/data/etc", &err), -1,
           "a bind into /mnt/data is refused");
    is_int(sb_policy_parse_flag(&p, "--bind", "/usr/../etc", &err), -1,
           "a bind path with '..' is refused");
    is_int(sb_policy_parse_flag(&p, "--bind", "relative", &err), -1,
           "a relative bind path is refused");
    is_int(sb_policy_parse_flag(&p, "--bind", "/etc:/", &err), -1,
           "binding over / is refused");

    /* Environment. */
    sb_policy_parse_flag(&p, "--env", "MY_SETTING", &err);
    is_int(sb_policy_parse_flag(&p, "--env", "OPENAI_API_KEY", &err), -1,
           "--env of a secret-looking name is refused, not dropped silently");
    ok(strstr(err.text, "OPENAI_API_KEY") && strstr(err.text, "'KEY'") &&
           strstr(err.text, "--env-secret OPENAI_API_KEY"),
       "the refusal names the variable, the word, and --env-secret");
    is_int(sb_policy_parse_flag(&p, "--env", "GIT_AUTHOR_NAME", &err), 2,
           "--env GIT_AUTHOR_NAME is accepted (AUTHOR is not AUTH)");
    is_int(sb_policy_parse_flag(&p, "--env", "PASSAGE_DIR", &err), 2,
           "--env PASSAGE_DIR is accepted (PASSAGE is not PASS)");
    is_int(sb_policy_parse_flag(&p, "--env-secret", "MY_TOKEN", &err), 2,
           "--env-secret MY_TOKEN is accepted on purpose");
    is_int(sb_policy_parse_flag(&p, "--env", "A=B", &err), -1,
           "--env takes a name, not an assignment");
    char e0[] = "MY_SETTING=1", e1[] = "OPENAI_API_KEY=sk-secret",
         e2[] = "ANTHROPIC_API_KEY=sk-ant", e3[] = "TERM=xterm-256color",
         e4[] = "PATH=/home/me/bin", e5[] = "LD_PRELOAD=/tmp/evil.so",
         e6[] = "GIT_AUTHOR_NAME=Ada", e7[] = "PASSAGE_DIR=/p",
         e8[] = "MY_TOKEN=t0k";
    char *host_env[] = {e0, e1, e2, e3, e4, e5, e6, e7, e8, NULL};
    const char *extra[] = {"MPLBACKEND=Agg", NULL};
    char **env = sb_policy_build_env(&p, host_env, extra);
    ok(s_env_has(env, "PATH=" SB_BIN_PATH
                      ":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"),
       "PATH inside is the sandbox's (python and pip first), not the host's");
    ok(s_env_has(env, "HOME=" SB_HOME_PATH), "HOME is " SB_HOME_PATH);
    ok(s_env_has(env, "LANG=C.UTF-8"), "LANG is C.UTF-8");
    ok(s_env_has(env, "TERM=xterm-256color"), "TERM comes from the host");
    ok(s_env_has(env, "MY_SETTING=1"), "an allow-listed variable passes");
    ok(!s_env_has_name(env, "OPENAI_API_KEY"),
       "an API key never passes, even when allow-listed");
    ok(!s_env_has_name(env, "ANTHROPIC_API_KEY"),
       "variables not allow-listed do not pass");
    ok(!s_env_has_name(env, "LD_PRELOAD"), "LD_PRELOAD does not pass");
    ok(s_env_has(env, "MPLBACKEND=Agg"), "extra entries are added");
    ok(s_env_has(env, "GIT_AUTHOR_NAME=Ada") &&
           s_env_has(env, "PASSAGE_DIR=/p"),
       "names that only contain a secret word's letters pass");
    ok(s_env_has(env, "MY_TOKEN=t0k"), "an --env-secret name passes");
    strv_free(env);
    ok(sb_policy_env_name_is_secret("GITHUB_TOKEN") &&
           sb_policy_env_name_is_secret("db_password") &&
           sb_policy_env_name_is_secret("AWS_SECRET_ACCESS_KEY") &&
           !sb_policy_env_name_is_secret("LANG"),
       "secret-looking names are recognised, case-insensitively");
    ok(sb_policy_env_name_is_secret("OPENAI_APIKEY") &&
           sb_policy_env_name_is_secret("HF_AUTHTOKEN") &&
           sb_policy_env_name_is_secret("DB_PASS") &&
           sb_policy_env_name_is_secret("SSH_KEYS") &&
           sb_policy_env_name_is_secret("GITHUB_PAT") &&
           sb_policy_env_name_is_secret("aws_credentials"),
       "words that end in KEY/TOKEN, plurals and PAT are secrets");
    ok(!sb_policy_env_name_is_secret("GIT_AUTHOR_NAME") &&
           !sb_policy_env_name_is_secret("PASSAGE_DIR") &&
           !sb_policy_env_name_is_secret("KEYBOARD_LAYOUT") &&
           !sb_policy_env_name_is_secret("AUTHOR") &&
           !sb_policy_env_name_is_secret("TOKENIZERS_PARALLELISM"),
       "whole words only: AUTHOR, PASSAGE, KEYBOARD, TOKENIZERS are not");

    /* JSON for notebook metadata. */
    json_t *j = sb_policy_to_json(&p);
    ok(j && json_integer_value(json_object_get(j, "memory_bytes")) ==
                (json_int_t)(1ULL << 30),
       "policy JSON records the memory limit");
    ok(json_real_value(json_object_get(j, "cpus")) == 1.5,
       "policy JSON records the CPU quota");
    ok(json_is_false(json_object_get(j, "network")),
       "policy JSON records that there is no network");
    ok(json_array_size(json_object_get(j, "binds")) == 1,
       "policy JSON lists the extra binds");
    const char *sc = json_string_value(json_object_get(j, "seccomp"));
    ok(sc && strncmp(sc, "allow list", 10) == 0 && !strstr(sc, "default allow"),
       "policy JSON says the seccomp filter is an allow list (%s)", sc);
    json_decref(j);

    sb_policy_t copy;
    sb_policy_copy(&copy, &p);
    sb_policy_release(&p);
    ok(copy.n_binds == 1 && strcmp(copy.binds[0].inside, "/opt/doc") == 0 &&
           copy.n_env_allow == 4 && copy.n_env_secret == 1 &&
           strcmp(copy.env_secret[0], "MY_TOKEN") == 0,
       "a copied policy outlives its original");
    sb_policy_release(&copy);

    /* Names of files going in, paths of files coming out. */
    ok(sb_files_check_name("data.csv", NULL) == 0, "a plain name is accepted");
    ok(sb_files_check_name("../../x", &err) < 0, "an upload named ../../x is "
                                                 "refused");
    ok(sb_files_check_name("a/b", NULL) < 0, "a name with '/' is refused");
    ok(sb_files_check_name("..", NULL) < 0, "'..' is refused");
    ok(sb_files_check_name(".bashrc", NULL) < 0,
       "a name with a leading '.' is refused");
    ok(sb_files_check_name("", NULL) < 0, "an empty name is refused");
    ok(sb_files_check_name("a\nb", NULL) < 0,
       "a name with a control character is refused");
    ok(sb_files_check_relpath("out/plot.png", NULL) == 0,
       "a relative path is accepted");
    ok(sb_files_check_relpath("/etc/passwd", NULL) < 0,
       "an absolute path is refused");
    ok(sb_files_check_relpath("out/../../x", NULL) < 0,
       "a path with '..' is refused");
    ok(sb_files_check_relpath("a//b", NULL) < 0,
       "a path with an empty component is refused");
    return done_testing();
}
