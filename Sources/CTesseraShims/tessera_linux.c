// tessera_linux.c — see tessera_linux.h.
#define _GNU_SOURCE
#include "tessera_linux.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

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
    return mkostemp(template_path, O_CLOEXEC);
}

int tessera_rename_exchange(const char *from, const char *to) {
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE);
}
