/* SPDX-License-Identifier: Apache-2.0 */
/*
 * container_init: the launcher of the test "container".
 *
 * Run as `unshare -m -p -f container_init ROOT PROG [ARGS...]` (a new mount and
 * pid namespace; this process is pid 1 of the new pid namespace). It makes ROOT the
 * root of the mount namespace with pivot_root, mounts a fresh /proc there, detaches
 * the old root and execs PROG (a path inside ROOT) with ARGS and the inherited
 * environment. Built static (gcc -static -O2): it runs before the pivot only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static void die(const char *what) {
    fprintf(stderr, "container_init: %s: %s\n", what, strerror(errno));
    exit(127);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: container_init ROOT PROG [ARGS...]\n");
        return 2;
    }
    const char *root = argv[1];
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die("make / private");
    if (mount(root, root, NULL, MS_BIND | MS_REC, NULL) != 0) die("bind ROOT on itself");
    if (chdir(root) != 0) die("chdir ROOT");
    if (mkdir("oldroot", 0700) != 0 && errno != EEXIST) die("mkdir oldroot");
    if (syscall(SYS_pivot_root, ".", "oldroot") != 0) die("pivot_root");
    if (chdir("/") != 0) die("chdir /");
    if (mount("proc", "/proc", "proc", 0, NULL) != 0) die("mount /proc");
    if (umount2("/oldroot", MNT_DETACH) != 0) die("umount2 /oldroot");
    if (rmdir("/oldroot") != 0) die("rmdir /oldroot");
    execv(argv[2], &argv[2]);
    die("execv PROG");
    return 127;
}
