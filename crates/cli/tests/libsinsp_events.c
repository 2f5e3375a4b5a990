// The events libsinsp's filter tests build by hand, made for real on this kernel: each context
// runs in its own child (its own thread id) and prints "CONTEXT TID" on stdout, so the test can
// find its one event in the recording. Paths are libsinsp's, below ROOT (the child chroots
// there); command names come from exec'ing copies of this binary named like libsinsp's threads.
//
//   libsinsp_events all DIR   DIR/root: the test's file tree; DIR/{myexe,init,bash,good-exe,bad\xff}: copies
//   libsinsp_events chain N DIR   (internal) one level of the init -> bash x4 -> good-exe tree
//   libsinsp_events idle          (internal) exit at once
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[4096];

static void mark(const char *ctx) {
    printf("%s %ld\n", ctx, (long)syscall(SYS_gettid));
    fflush(stdout);
}

static void into_root(void) {
    char root[4200];
    snprintf(root, sizeof root, "%s/root", dir);
    if (chroot(root) != 0 || chdir("/") != 0) {
        perror("chroot");
        exit(2);
    }
}

static void run_exec(const char *name, const char *const *args) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *argv[8] = {(char *)name};
    int i = 0;
    for (; args[i] && i < 6; i++) argv[i + 1] = (char *)args[i];
    argv[i + 1] = NULL;
    execv(path, argv);
    perror("execv");
    exit(2);
}

// A TCP connection between two addresses on the loopback device of a network namespace of its
// own; the event is the server's accept (local end: the server's, peer: the client's).
static void net(const char *ctx, int family, const char *server, const char *client, const char *setup) {
    if (unshare(CLONE_NEWNET) != 0 || system(setup) != 0) {
        perror("netns");
        exit(2);
    }
    struct sockaddr_storage s = {0}, c = {0};
    socklen_t len;
    if (family == AF_INET) {
        struct sockaddr_in *a = (void *)&s, *b = (void *)&c;
        a->sin_family = b->sin_family = AF_INET;
        a->sin_port = htons(443);
        b->sin_port = htons(54321);
        inet_pton(AF_INET, server, &a->sin_addr);
        inet_pton(AF_INET, client, &b->sin_addr);
        len = sizeof(struct sockaddr_in);
    } else {
        struct sockaddr_in6 *a = (void *)&s, *b = (void *)&c;
        a->sin6_family = b->sin6_family = AF_INET6;
        a->sin6_port = htons(443);
        b->sin6_port = htons(54321);
        inet_pton(AF_INET6, server, &a->sin6_addr);
        inet_pton(AF_INET6, client, &b->sin6_addr);
        len = sizeof(struct sockaddr_in6);
    }
    int l = socket(family, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // A new namespace's IPv6 addresses and routes may take a moment to be usable: retry.
    int ok = 0;
    for (int i = 0; i < 100 && !ok; i++) {
        if (i) usleep(20000);
        if (bind(l, (void *)&s, len) && errno != EINVAL) continue;
        int k = socket(family, SOCK_STREAM, 0);
        setsockopt(k, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        ok = !listen(l, 4) && !bind(k, (void *)&c, len) && !connect(k, (void *)&s, len);
        if (!ok) close(k);
    }
    if (!ok) {
        perror("socket setup");
        exit(2);
    }
    mark(ctx);
    int a = accept(l, NULL, NULL);
    if (a < 0) {
        perror("accept");
        exit(2);
    }
}

static void context(const char *ctx) {
    char buf[4096];
    sigset_t mask;
    sigemptyset(&mask);
    if (!strcmp(ctx, "getcwd")) {
        into_root();
        if (chdir("/test/dir")) exit(2);
        mark(ctx);
        syscall(SYS_getcwd, buf, sizeof buf);
    } else if (!strcmp(ctx, "epoll_einval")) {
        // libsinsp's event is on CPU 1.
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 1 : 0, &set);
        sched_setaffinity(0, sizeof set, &set);
        mark(ctx);
        syscall(SYS_epoll_create, 0);
    } else if (!strcmp(ctx, "epoll_size")) {
        mark(ctx);
        syscall(SYS_epoll_create, -22);
    } else if (!strcmp(ctx, "signalfd4")) {
        mark(ctx);
        syscall(SYS_signalfd4, 9, &mask, 8, 512);
    } else if (!strcmp(ctx, "timerfd_create")) {
        mark(ctx);
        syscall(SYS_timerfd_create, 255, 255);
    } else if (!strcmp(ctx, "splice")) {
        mark(ctx);
        syscall(SYS_splice, -1, NULL, -1, NULL, 512, 0);
    } else if (!strcmp(ctx, "open_eperm")) {
        // A result of -1 (EPERM): O_NOATIME on another user's file.
        into_root();
        if (setuid(65534)) exit(2);
        mark(ctx);
        syscall(SYS_openat, AT_FDCWD, "/tmp/the_file", O_RDONLY | O_NOATIME, 0666);
    } else if (!strcmp(ctx, "open_creat")) {
        into_root();
        mark(ctx);
        syscall(SYS_openat, AT_FDCWD, "/opt/dir/SUBDIR/file.txt", O_RDWR | O_CREAT, 0);
    } else if (!strcmp(ctx, "open_subdir")) {
        into_root();
        mark(ctx);
        syscall(SYS_openat, AT_FDCWD, "/opt/dir/subdir/file.txt", O_RDONLY, 0);
    } else if (!strcmp(ctx, "open_file_to_run")) {
        into_root();
        mark(ctx);
        syscall(SYS_openat, AT_FDCWD, "/tmp/file_to_run", O_RDONLY, 0);
    } else if (!strcmp(ctx, "open_not_utf8")) {
        into_root();
        mark(ctx);
        syscall(SYS_openat, AT_FDCWD, "/p\xff/q\xff", O_RDWR, 0);
    } else if (!strcmp(ctx, "exec_not_utf8")) {
        mark(ctx);
        run_exec("bad\xff", (const char *const[]){"idle", NULL});
    } else if (!strcmp(ctx, "exec_myexe")) {
        mark(ctx);
        run_exec("myexe", (const char *const[]){"idle", NULL});
    } else if (!strcmp(ctx, "exec_tree")) {
        run_exec("init", (const char *const[]){"chain", "4", dir, NULL});
    } else if (!strcmp(ctx, "net4")) {
        net(ctx, AF_INET, "142.251.111.147", "172.40.111.222",
            "ip link set lo up && ip addr add 142.251.111.147/32 dev lo && ip addr add 172.40.111.222/32 dev lo");
    } else if (!strcmp(ctx, "net6")) {
        net(ctx, AF_INET6, "2001:4860:4860::8888", "::1",
            "ip link set lo up && ip -6 addr add 2001:4860:4860::8888/128 dev lo nodad");
    } else {
        fprintf(stderr, "unknown context %s\n", ctx);
        exit(2);
    }
    exit(0);
}

static const char *CONTEXTS[] = {"getcwd",     "epoll_einval",     "epoll_size", "signalfd4", "timerfd_create",
                                 "splice",     "open_eperm",       "open_creat", "open_subdir",
                                 "open_file_to_run", "open_not_utf8", "exec_not_utf8", "exec_myexe", "exec_tree",
                                 "net4",       "net6",             NULL};

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "idle")) return 0;
    if (argc >= 4 && !strcmp(argv[1], "chain")) {
        // init -> bash -> bash -> bash -> bash -> good-exe, each level waiting for the next.
        snprintf(dir, sizeof dir, "%s", argv[3]);
        int n = atoi(argv[2]);
        pid_t p = fork();
        if (p == 0) {
            if (n == 0) {
                mark("exec_tree");
                run_exec("good-exe", (const char *const[]){"idle", NULL});
            }
            char next[16];
            snprintf(next, sizeof next, "%d", n - 1);
            run_exec("bash", (const char *const[]){"chain", next, dir, NULL});
        }
        int st;
        waitpid(p, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    }
    if (argc < 3 || strcmp(argv[1], "all")) {
        fprintf(stderr, "usage: %s all DIR\n", argv[0]);
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[2]);
    int bad = 0;
    for (const char **c = CONTEXTS; *c; c++) {
        pid_t p = fork();
        if (p == 0) context(*c);
        int st;
        waitpid(p, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) {
            fprintf(stderr, "context %s failed\n", *c);
            bad = 1;
        }
    }
    return bad;
}
