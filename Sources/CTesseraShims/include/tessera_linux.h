// tessera_linux.h — Linux calls that Swift's Glibc module does not import.
//
// fallocate, sync_file_range, mkostemp, renameat2 and O_TMPFILE are behind _GNU_SOURCE, which the Glibc
// module map is not built with. Each wrapper is one line; Syscalls.swift calls them.
#ifndef TESSERA_LINUX_H
#define TESSERA_LINUX_H

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// open(directory, O_TMPFILE | flags, mode): an unnamed file in `directory`.
int tessera_open_tmpfile(const char *directory, int flags, mode_t mode);

/// fallocate(2) with mode 0: reserve blocks (KEEP_SIZE not set; the file is sized already).
int tessera_fallocate_reserve(int fd, off_t offset, off_t length);

/// fallocate(2) with FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE.
int tessera_fallocate_punch_hole(int fd, off_t offset, off_t length);

/// sync_file_range(2): `wait` nonzero waits before and after the write.
int tessera_sync_file_range(int fd, off_t offset, off_t length, int wait);

/// malloc_trim(3) with no padding: returns freed memory of every arena to the kernel, so what a
/// phase freed (the scan's header buffers, the analysis's decoders on their threads) stops
/// counting in the resident set. Returns 1 when memory was released.
int tessera_release_free_memory(void);

/// mallopt(M_ARENA_MAX, 1): every thread allocates from the one main arena, so a buffer one
/// thread frees is reused by the next allocation of any thread. Call before threads start.
/// Returns 1 on success.
int tessera_use_one_malloc_arena(void);

/// mkostemps(3) with O_CLOEXEC, for a template ending in "XXXXXX.tmp".
int tessera_mkostemp_cloexec(char *template_path);

/// 1 when the file at `path` is immutable or append-only (chattr +i / +a: FS_IOC_GETFLAGS), which
/// makes a rename over it fail; 0 when not (or the filesystem has no such flags); -1 when it
/// cannot be opened.
int tessera_is_immutable(const char *path);

/// renameat2(2) with RENAME_EXCHANGE: atomically swaps two existing paths (files or directories).
int tessera_rename_exchange(const char *from, const char *to);

/// mallopt(M_MMAP_THRESHOLD, bytes): a fixed threshold (see Allocator.swift). Returns mallopt's result.
int tessera_set_mmap_threshold(int bytes);

// mallopt(M_TRIM_THRESHOLD): how much free memory a heap keeps at its top before giving it back.
int tessera_set_trim_threshold(int bytes);

#ifdef __cplusplus
}
#endif
#endif
