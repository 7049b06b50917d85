// Allocator.swift — makes glibc's malloc give large blocks back to the system when they are freed.
//
// glibc serves a block of 128 KiB or more with its own mmap, and unmaps it when freed; but when
// such a block is freed it raises that threshold to the block's size (up to 32 MiB), so the next
// ones of that size come from the heap of the freeing thread's arena, where freed memory stays
// resident. Each worker thread has an arena of its own, so a render decoding a few large
// pictures in turn (a WebP's scaled output, a HEIF's planes, libde265's tables) kept every
// worker's largest ones resident: measured, 32 photos of 4000 x 3000 in five formats at 600 px
// cells peaked at 80.2 MiB, and at 64.8 MiB with the threshold fixed at 1 MiB; five WebPs alone
// 46.5 and 32.0 MiB. A fixed threshold turns the adjustment off.
//
// It also fixes the trim threshold, which the adjustment would have raised with it, at its
// default of 128 KiB: a heap gave back its free top past that, so the buffers every decode and
// every compressed stripe allocate and free (a collage's 823 KiB cells, libjpeg's pools) were
// faulted in again, page by page, each time. At 4 MiB a heap keeps that much at its top:
// measured (release, this machine), the 1.2-gigapixel grid went from 240,580 page faults and
// 0.82 s of system time to 8,152 and 0.18 s, 2.64 to 2.42 s, its peak RSS from 44.5 to 45.6 MB;
// the 10,000-photo collage from 307,723 faults and 5.6 s of system time to 10,804 and 3.4 s,
// 51.9 to 53.7 MB. (At 1 MiB the collage still took 254,761 faults.) Blocks over 1 MiB are
// still mapped and unmapped on their own, so no large decode buffer stays.
import CTesseraShims

/// Fixes glibc's mmap threshold at 1 MiB, so that every large buffer a decode frees goes back to
/// the system at once, and lets each heap keep 4 MiB of free memory rather than fault it in
/// again. The `tessera` tool calls this first; a program that renders with the library under a
/// memory budget should too (it changes the process's allocator, so the library does not do it
/// on its own).
public func useBoundedMemoryAllocator() {
    _ = tessera_set_mmap_threshold(1 << 20)
    _ = tessera_set_trim_threshold(4 << 20)
}
