// tessera_linux.c — see tessera_linux.h.
#define _GNU_SOURCE
#include "tessera_linux.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

int tessera_open_tmpfile(const char *directory, int flags, mode_t mode) {
    return open(directory, O_TMPFILE | flags, mode);
}

int tessera_fallocate_reserve(int fd, off_t offset, off_t length) {
    return fallocate(fd, 0, offset, length);
}

int tessera_fallocate_punch_hole(int fd, off_t offset, off_t length) {
    return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length);
}

int tessera_sync_file_range(int fd, off_t offset, off_t length, int wait) {
    unsigned int flags = SYNC_FILE_RANGE_WRITE;
    if (wait) flags |= SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WAIT_AFTER;
    return sync_file_range(fd, offset, length, flags);
}

int tessera_mkostemp_cloexec(char *template_path) {
    // "...XXXXXX.tmp": the six letters mkostemps replaces come before a 4-byte suffix.
    return mkostemps(template_path, 4, O_CLOEXEC);
}

int tessera_rename_exchange(const char *from, const char *to) {
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE);
}

int tessera_is_immutable(const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    int flags = 0;
    int status = ioctl(fd, FS_IOC_GETFLAGS, &flags);
    close(fd);
    if (status != 0) return 0;  // no such flags on this filesystem
    return (flags & (FS_IMMUTABLE_FL | FS_APPEND_FL)) != 0;
}

int tessera_set_mmap_threshold(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes); }

int tessera_set_trim_threshold(int bytes) { return mallopt(M_TRIM_THRESHOLD, bytes); }

int tessera_release_free_memory(void) {
    return malloc_trim(0);
}

int tessera_use_one_malloc_arena(void) {
    return mallopt(M_ARENA_MAX, 1);
}
