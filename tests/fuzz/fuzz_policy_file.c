/* The operator's policy file: loaded from a path, as the engine loads it
 * (the input is put in a memfd and named /proc/self/fd/N), then matched
 * against fixed programs in each language. A loaded policy holds at most
 * its documented number of rules, and a match names one of them. */
#include "fuzz.h"

#include "execution/policy.h"

#include <ctype.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *const programs[][2] = {
    {"python", "import os\nos.system('rm -rf /')\nprint('hi')\n"},
    {"javascript", "require('child_process').execSync(':(){ :|:& };:')\n"},
    {"bash", ":(){ :|:& };:\necho done\n"},
    {"bash", ""},
    {"ruby", "puts 1\n"}, /* no rule names an unknown language but '*' */
};

/* glibc's regcomp expands a repetition by copying its subtree: each of
 * "a++++..." doubled it, a{n} copies it n times, so one short line could
 * ask for gigabytes (found here: regressions/policy_file/). policy.c now
 * refuses such patterns; libFuzzer's memory and time limits catch any it
 * lets through. */
static void check_match(const rbx_policy *policy, const char *language, const char *code)
{
    const char *name = rbx_policy_match(policy, language, code);
    if (!name)
        return;
    FUZZ_CHECK(rbx_policy_rule_count(policy) > 0 && name[0] && strlen(name) < 64);
    for (const char *p = name; *p; p++)
        FUZZ_CHECK(!isspace((unsigned char)*p));
}

/* Lines of the file that can hold a rule: not blank, not a comment. Each
 * holds one rule at most, however long it is. */
static size_t rule_lines(const uint8_t *data, size_t size)
{
    size_t lines = 0;
    bool start = true;
    for (size_t i = 0; i < size; i++) {
        if (data[i] == '\n')
            start = true;
        else if (start && !isspace(data[i])) {
            lines += data[i] != '#';
            start = false;
        }
    }
    return lines;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("policy", MFD_CLOEXEC);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size)
        abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    rbx_error err = {0};
    rbx_policy *policy = rbx_policy_load(path, &err);
    close(fd);
    if (!policy) {
        FUZZ_CHECK(err.status == RBX_EINVAL && err.message[0]);
        return 0;
    }
    FUZZ_CHECK(rbx_policy_rule_count(policy) <= 256);
    FUZZ_CHECK(rbx_policy_rule_count(policy) <= rule_lines(data, size));
    for (size_t i = 0; i < sizeof programs / sizeof *programs; i++)
        check_match(policy, programs[i][0], programs[i][1]);
    rbx_policy_free(policy);
    return 0;
}
