/* seccomp_selftest: checks src/sandbox/seccomp.c from the outside.
 *
 *   seccomp_selftest /path/to/try-syscall
 *
 * 1. The kernel can install filters, and the program built in is not empty.
 * 2. try-syscall without and with the filter: every denied call gets its
 *    verdict (EPERM; ENOSYS for clone3; SIGSYS for foreign architectures)
 *    and, as root, did not get it without the filter, so the verdict is the
 *    filter's; allowed calls behave the same either way.
 * 3. personality across many values: EPERM exactly outside 0, 8, 0xffffffff.
 * 4. python3, node and bash do real work under the filter: subprocesses,
 *    threads, pipes.
 * The filtered children run as root with every capability, as the strictest
 * case: the filter, not missing privileges, has to stop them. */
#include "sandbox/seccomp.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* clang-format off */
static const struct {
    const char *name, *verdict;
} expected[] = {
    {"mount", "EPERM"},           {"umount", "EPERM"},
    {"pivot_root", "EPERM"},      {"fsopen", "EPERM"},
    {"fsconfig", "EPERM"},        {"fsmount", "EPERM"},
    {"fspick", "EPERM"},          {"move_mount", "EPERM"},
    {"open_tree", "EPERM"},       {"mount_setattr", "EPERM"},
    {"swapon", "EPERM"},          {"swapoff", "EPERM"},
    {"reboot", "EPERM"},          {"kexec_load", "EPERM"},
    {"kexec_file_load", "EPERM"}, {"init_module", "EPERM"},
    {"finit_module", "EPERM"},    {"delete_module", "EPERM"},
    {"bpf", "EPERM"},             {"perf_event_open", "EPERM"},
    {"keyctl", "EPERM"},          {"add_key", "EPERM"},
    {"request_key", "EPERM"},     {"userfaultfd", "EPERM"},
    {"open_by_handle_at", "EPERM"}, {"name_to_handle_at", "EPERM"},
    {"setns", "EPERM"},           {"unshare", "EPERM"},
    {"ptrace", "EPERM"},          {"process_vm_readv", "EPERM"},
    {"process_vm_writev", "EPERM"}, {"io_uring_setup", "EPERM"},
    {"io_uring_enter", "EPERM"},  {"io_uring_register", "EPERM"},
    {"clock_settime", "EPERM"},   {"clock_adjtime", "EPERM"},
    {"settimeofday", "EPERM"},    {"adjtimex", "EPERM"},
    {"acct", "EPERM"},            {"quotactl", "EPERM"},
    {"quotactl_fd", "EPERM"},     {"lookup_dcookie", "EPERM"},
    {"syslog", "EPERM"},          {"vhangup", "EPERM"},
    {"nfsservctl", "EPERM"},      {"personality", "EPERM"},
    {"clone_newuser", "EPERM"},   {"clone_newns", "EPERM"},
    {"clone_newpid", "EPERM"},    {"clone_newnet", "EPERM"},
    {"clone_newipc", "EPERM"},    {"clone_newuts", "EPERM"},
    {"clone_newcgroup", "EPERM"}, {"tiocsti", "EPERM"},
    {"tiocsti_highbits", "EPERM"}, {"tioclinux", "EPERM"},
    {"clone3", "ENOSYS"},         {"int80", "SIGSYS"},
    {"x32", "SIGSYS"},
    /* Allowed: the same result with or without the filter. */
    {"getpid", "OK"},             {"clone_plain", "OK"},
    {"personality_query", "OK"},  {"personality_linux32", "OK"},
    {"ioctl_tcgets", "EBADF"},
};
/* clang-format on */
#define EXPECTED_COUNT (sizeof expected / sizeof expected[0])

static int failures;

static void check(bool ok, const char *what, const char *detail)
{
    printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", what, detail ? ": " : "", detail ? detail : "");
    if (!ok)
        failures++;
}

/* The sandbox's last steps before execve, as in spawn.c's enter_program. */
static void confine(void)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || rbx_seccomp_install() != 0) {
        perror("selftest: install the filter");
        _exit(126);
    }
}

/* Runs argv, filtered or not; its stdout into out. Returns the wait status. */
static int run(char *const argv[], bool filtered, char *out, size_t out_size)
{
    int pipefd[2];
    if (pipe(pipefd) != 0)
        return -1;
    pid_t child = fork();
    if (child == 0) {
        dup2(pipefd[1], STDOUT_FILENO);
        close(pipefd[0]);
        close(pipefd[1]);
        if (filtered)
            confine();
        execv(argv[0], argv);
        _exit(127);
    }
    close(pipefd[1]);
    size_t len = 0;
    ssize_t n;
    while ((n = read(pipefd[0], out + len, out_size - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(pipefd[0]);
    int status = -1;
    if (child > 0)
        waitpid(child, &status, 0);
    return status;
}

/* The result try-syscall printed for name, or NULL. */
static const char *result_for(const char *output, const char *name, char *buf, size_t size)
{
    size_t name_len = strlen(name);
    for (const char *line = output; *line; line = strchr(line, '\n') + 1) {
        const char *end = strchr(line, '\n');
        if (!end)
            break;
        if ((size_t)(end - line) > name_len && strncmp(line, name, name_len) == 0 &&
            line[name_len] == ' ') {
            snprintf(buf, size, "%.*s", (int)(end - line - (long)name_len - 1),
                     line + name_len + 1);
            return buf;
        }
    }
    return NULL;
}

static void test_available(void)
{
    char why[256] = "";
    check(rbx_seccomp_available(why, sizeof why) == 0, "the kernel installs filters", why);
    check(rbx_seccomp_instructions() > 0, "the program built in has instructions", NULL);
}

static void test_probes(const char *try_syscall)
{
    char *argv[EXPECTED_COUNT + 2];
    argv[0] = (char *)try_syscall;
    for (size_t i = 0; i < EXPECTED_COUNT; i++)
        argv[i + 1] = (char *)expected[i].name;
    argv[EXPECTED_COUNT + 1] = NULL;
    static char plain[16384], filtered[16384];
    int plain_status = run(argv, false, plain, sizeof plain);
    int filtered_status = run(argv, true, filtered, sizeof filtered);
    check(plain_status == 0 && filtered_status == 0, "try-syscall runs", NULL);
    bool root = geteuid() == 0;
    for (size_t i = 0; i < EXPECTED_COUNT; i++) {
        char a[64], b[64], detail[256];
        const char *without = result_for(plain, expected[i].name, a, sizeof a);
        const char *with = result_for(filtered, expected[i].name, b, sizeof b);
        const char *verdict = expected[i].verdict;
        bool denial = strcmp(verdict, "EPERM") == 0 || strcmp(verdict, "ENOSYS") == 0 ||
                      strcmp(verdict, "SIGSYS") == 0;
        bool ok = with && without && strcmp(with, verdict) == 0;
        /* A denial must be the filter's doing; an allowed call, untouched. */
        if (ok && root)
            ok = denial ? strcmp(without, with) != 0 : strcmp(without, with) == 0;
        snprintf(detail, sizeof detail, "%s without the filter, %s with it (want %s)",
                 without ? without : "?", with ? with : "?", verdict);
        check(ok, expected[i].name, detail);
    }
}

static bool personality_allowed(uint32_t persona)
{
    return persona == 0 || persona == 8 || persona == 0xffffffffu;
}

/* In a filtered child: EPERM exactly for the values outside the three. */
static void test_personality(void)
{
    pid_t child = fork();
    if (child == 0) {
        confine();
        static unsigned long values[300 + 100000];
        size_t n = 0;
        uint64_t x = 0x9e3779b97f4a7c15u;
        for (unsigned b = 0; b < 64; b++) {
            values[n++] = 1ul << b;
            values[n++] = ~(1ul << b);
            values[n++] = ~(1ul << b) & 0xffffffffu;
            values[n++] = (1ul << b) | 8;
        }
        unsigned long edges[] = {0,    8,   0xffffffffu, 0x100000000u, 0x100000008u, 0x1ffffffffu,
                                 ~0ul, 0xc, 0xfffffffeu, 0x7fffffff};
        for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
            values[n++] = edges[i];
        while (n < sizeof values / sizeof values[0]) {
            x = x * 6364136223846793005u + 1442695040888963407u; /* an LCG */
            values[n++] = (unsigned long)(x >> (x & 1 ? 0 : 32));
        }
        int wrong = 0;
        for (size_t i = 0; i < n; i++) {
            bool denied = syscall(SYS_personality, values[i]) == -1 && errno == EPERM;
            if (denied == personality_allowed((uint32_t)values[i])) {
                fprintf(stderr, "personality(%#lx): %s\n", values[i],
                        denied ? "denied" : "allowed");
                wrong++;
            }
        }
        syscall(SYS_personality, 0ul);
        _exit(wrong ? 1 : 0);
    }
    int status = -1;
    if (child > 0)
        waitpid(child, &status, 0);
    check(status == 0, "personality: EPERM exactly outside 0, 8, 0xffffffff (100k values)", NULL);
}

static void test_interpreters(void)
{
    static const struct {
        const char *what;
        char *argv[4];
        const char *out;
    } cases[] = {
        {"python3 subprocess",
         {"/usr/bin/python3", "-c",
          "import os,subprocess; print(subprocess.run(['echo','ok'],capture_output=True).stdout)"},
         "b'ok\\n'\n"},
        {"python3 threading",
         {"/usr/bin/python3", "-c",
          "import threading; t=threading.Thread(target=print,args=('ok',)); t.start(); t.join()"},
         "ok\n"},
        {"python3 multiprocessing",
         {"/usr/bin/python3", "-c",
          "import multiprocessing as m\nif __name__=='__main__':\n"
          " with m.Pool(2) as p: print('ok' if p.map(abs,[-1,-2])==[1,2] else 'bad')"},
         "ok\n"},
        {"node child_process",
         {"/usr/bin/node", "-e", "require('child_process').execSync('true'); console.log('ok')"},
         "ok\n"},
        {"node worker_threads",
         {"/usr/bin/node", "-e",
          "const {Worker}=require('worker_threads');"
          "new Worker('require(\"worker_threads\").parentPort.postMessage(\"ok\")',{eval:true})"
          ".on('message',m=>console.log(m))"},
         "ok\n"},
        {"node fs (thread pool / io_uring)",
         {"/usr/bin/node", "-e",
          "require('fs').promises.readFile('/etc/hostname').then(()=>require('fs')"
          ".readFile('/etc/passwd',(e)=>console.log(e?e.code:'ok')))"},
         "ok\n"},
        {"bash", {"/bin/bash", "-c", "echo $(echo ok) | cat"}, "ok\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[4096], detail[4200];
        int status = run((char *const *)cases[i].argv, true, out, sizeof out);
        size_t len = strlen(out);
        if (len > 0 && out[len - 1] == '\n')
            len--;
        snprintf(detail, sizeof detail, "status %d, stdout %.*s", status, (int)len, out);
        check(status == 0 && strcmp(out, cases[i].out) == 0, cases[i].what, detail);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s /path/to/try-syscall\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_available();
    if (failures)
        return 1;
    test_probes(argv[1]);
    test_personality();
    test_interpreters();
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}
