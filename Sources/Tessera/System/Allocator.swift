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
import CTesseraShims

/// Fixes glibc's mmap threshold at 1 MiB, so that every large buffer a decode frees goes back to
/// the system at once. The `tessera` tool calls this first; a program that renders with the
/// library under a memory budget should too (it changes the process's allocator, so the
/// library does not do it on its own).
public func useBoundedMemoryAllocator() {
    _ = tessera_set_mmap_threshold(1 << 20)
}
