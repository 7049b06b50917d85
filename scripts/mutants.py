#!/usr/bin/env python3
"""Mutation testing: does the suite notice when an invariant that matters is broken?

Each mutant below is one small edit (an exact text replaced once in one file) to code that
keeps a promise: Deep Zoom tile geometry and the overlap crop, RST numbering and the restart
interval, the stripe window's ordering, the EXIF orientation cases, the pre-flight multipliers,
the atomic commit order, cancellation checks, budget arithmetic, the scan and work limits, and
colour conversion. For each, the script copies the tree (tracked and new files, not .build)
once into a scratch folder, applies the edit, builds the tests, runs the tests named by the
mutant's filter, and restores the file. A mutant is *killed* when a test fails (or the build
fails: reported apart, as stillborn, and not counted), *survived* when every test passes.

    scripts/mutants.sh [--only ID[,ID...]] [--list] [--keep]
    scripts/mutants.sh --check      (CI: every mutant's text occurs exactly once; no build)

Slow (a build and a test run per mutant: about 1-3 minutes each on 2 cores), so CI does not run
the mutants; it runs `--check`, so that a mutant whose code moved fails CI instead of rotting. Prints a line per mutant and the score; exits 0 even when mutants survive (a survivor is
something to read, not a build failure).
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

WINDOW_TESTS = ("ParallelEncoderOracleTests|outputIsIdenticalForAnyWorkers|parallelIsByteIdentical|parallelOutputIsIdentical"
                "|restartMarkersCycle|pyramidIsTheSameForAnyStripes|Golden")

# (id, file, original text, mutated text, test filter, what the mutant breaks)
MUTANTS = [
    # Deep Zoom tile geometry and the overlap crop.
    ("dz-span-start", "Sources/Tessera/Outputs/DeepZoom/DeepZoomGeometry.swift",
     "max(0, index * tileSize - overlap)..<", "max(0, index * tileSize)..<",
     "DeepZoomGeometry|DeepZoomOracleTests|everyHeight", "a tile loses its left/top overlap"),
    ("dz-span-end", "Sources/Tessera/Outputs/DeepZoom/DeepZoomGeometry.swift",
     "min(extent, (index + 1) * tileSize + overlap)", "min(extent, (index + 1) * tileSize)",
     "DeepZoomGeometry|DeepZoomOracleTests|everyHeight", "a tile loses its right/bottom overlap"),
    ("dz-max-level", "Sources/Tessera/Outputs/DeepZoom/DeepZoomGeometry.swift",
     "while (1 << maxLevel) < max(width, height)", "while (1 << maxLevel) <= max(width, height)",
     "DeepZoomGeometry|DeepZoomOracleTests", "one level too many (a power-of-two side)"),
    ("dz-level-rounding", "Sources/Tessera/Outputs/DeepZoom/DeepZoomGeometry.swift",
     "let w = (width + (1 << shift) - 1) >> shift", "let w = width >> shift",
     "DeepZoomGeometry|DeepZoomOracleTests", "level widths rounded down instead of up"),
    ("dz-average-rounding", "Sources/CTesseraShims/tessera_pyramid.c",
     "two = _mm_set1_epi16(2)", "two = _mm_set1_epi16(0)",
     "DeepZoomOracleTests", "the 2x2 average (the vector path) truncates instead of rounding"),
    # (Moving a column's first averaged pixel down, `column * tileSize / 2`, is equivalent: two
    # columns then average the same pixel from the same rows. Its end moved down is not.)
    ("dz-half-column", "Sources/Tessera/Outputs/DeepZoom/DeepZoomWriter.swift",
     ": ((column + 1) * tileSize + 1) / 2", ": ((column + 1) * tileSize) / 2",
     "DeepZoomOracleTests", "a column's averaging stops a pixel short (odd tile sizes): that pixel of the level below is never made"),
    # RST numbering and the restart interval.
    ("rst-cycle", "Sources/Tessera/Outputs/JPEG/RestartMarkerJPEG.swift",
     "[0xFF, 0xD0 + UInt8(index % 8)]", "[0xFF, 0xD0 + UInt8(index % 7)]",
     "ParallelEncoderOracleTests|Parallel|restartMarkers|ShardIdentity|Shard", "RST markers cycle mod 7 (in the encoder and the join alike)"),
    ("rst-dri-value", "Sources/Tessera/Outputs/JPEG/RestartMarkerJPEG.swift",
     "UInt8(restartInterval >> 8), UInt8(restartInterval & 0xFF)]",
     "UInt8(restartInterval >> 8), UInt8((restartInterval - 1) & 0xFF)]",
     "ParallelEncoderOracleTests|Parallel", "the DRI says one MCU fewer than a stripe holds"),
    ("rst-sof-height", "Sources/Tessera/Outputs/JPEG/RestartMarkerJPEG.swift",
     "header[sof + 6] = UInt8(height & 0xFF)", "header[sof + 6] = UInt8((height - 1) & 0xFF)",
     "ParallelEncoderOracleTests|Parallel", "the joined file's SOF height is one row short"),
    ("rst-mcu-rows", "Sources/Tessera/Render/RenderPlan.swift",
     "stripeHeight = min((requested + mcu - 1) / mcu, maxMcuRows) * mcu",
     "stripeHeight = min(requested, maxMcuRows * mcu)",
     "ParallelEncoderOracleTests|Parallel", "parallel stripes that are not whole MCU rows"),
    ("rst-interval-limit", "Sources/Tessera/Render/RenderPlan.swift",
     "let maxMcuRows = max(1, 65_535 / settings.subsampling.mcusPerRow(width: width))",
     "let maxMcuRows = max(1, 4 * 65_535 / settings.subsampling.mcusPerRow(width: width))",
     "ParallelEncoderOracleTests|Parallel", "a restart interval past 16 bits at the widest canvases"),
    # The stripe window's ordering.
    ("window-slot-reuse", "Sources/Tessera/Render/StripePipeline.swift",
     "&& slots[nextToStart % window] == .free && errors.error == nil {", "&& errors.error == nil {",
     WINDOW_TESTS, "a stripe is started in a slot the writer has not finished with"),
    ("window-early-free", "Sources/Tessera/Render/StripePipeline.swift",
     "slots[slot] = .taken(index)", "slots[slot] = .free",
     WINDOW_TESTS, "the writer frees a slot while the outputs still read it"),
    ("window-worker-count", "Sources/Tessera/Render/StripePipeline.swift",
     "while filling < plan.workers && nextToStart", "while nextToStart",
     "MemoryTests|RenderCancellation", "more stripes filled at once than --workers"),
    # EXIF orientation cases.
    ("orient-rot90", "Sources/Tessera/Cells/OrientationTransform.swift",
     "case .rotate90Clockwise: return (y, h - 1 - x)", "case .rotate90Clockwise: return (w - 1 - y, x)",
     "OrientationTests|everyExifOrientation|exifOrientationIsApplied", "orientation 6 turned the wrong way"),
    ("orient-transverse", "Sources/Tessera/Cells/OrientationTransform.swift",
     "case .transverse: return (w - 1 - y, h - 1 - x)", "case .transverse: return (y, x)",
     "OrientationTests|everyExifOrientation|exifOrientationIsApplied", "orientation 7 drawn as 5"),
    ("orient-mirror", "Sources/Tessera/Cells/OrientationTransform.swift",
     "case .mirrorHorizontal: return (w - 1 - x, y)", "case .mirrorHorizontal: return (x, y)",
     "OrientationTests|everyExifOrientation|exifOrientationIsApplied", "orientation 2 not mirrored"),
    ("orient-swaps", "Sources/Tessera/Cells/OrientationTransform.swift",
     "public var swapsAxes: Bool { rawValue >= 5 }", "public var swapsAxes: Bool { rawValue > 5 }",
     "OrientationTests|everyExifOrientation|exifOrientationIsApplied", "orientation 5 keeps the stored width"),
    # Pre-flight multipliers.
    ("preflight-same-fs", "Sources/Tessera/Render/DiskPreflight.swift",
     "totals[index].bytes += need.bytes", "totals[index].bytes = max(totals[index].bytes, need.bytes)",
     "preflight|Preflight|Inodes", "needs on one filesystem are not added up"),
    ("preflight-bpp", "Sources/Tessera/Render/RenderPlan.swift",
     "let base: Double = quality <= 75 ? 0.35 : quality <= 90 ? 0.6 :",
     "let base: Double = quality <= 75 ? 0.35 : quality <= 90 ? 0.06 :",
     "preflight|Preflight|FullFilesystem", "the JPEG's size estimated at a tenth"),
    ("preflight-window", "Sources/Tessera/Render/RenderPlan.swift",
     "stripeDiskBytes: pageRounded * Int64(window)", "stripeDiskBytes: pageRounded",
     "preflight|Preflight|FullFilesystem", "the stripe window counted as one stripe on disk"),
    # Atomic commit order.
    ("commit-after-failure", "Sources/Tessera/Render/StripePipeline.swift",
     "        try errors.check()\n        for sink in sinks { try sink.finish() }", "        for sink in sinks { try sink.finish() }",
     "failedRenderLeaves|diskFilling|failedOrCancelledPyramid|FullFilesystem|fullDisk|Cancellation", "a failed render commits its output"),
    ("commit-recheck", "Sources/Tessera/Outputs/DeepZoom/DeepZoomOutput.swift",
     "changed since the render started).\n        try DeepZoomOutput.checkReplaceable(destination: destination, viewer: viewer)",
     "changed since the render started).",
     "PyramidIsReplaced|IsNotReplaced|FailedCommit|failedOrCancelledPyramid", "the pyramid replaces what it must not, checked only at the start"),
    ("commit-undo", "Sources/Tessera/Outputs/DeepZoom/DeepZoomOutput.swift",
     "for step in undo.reversed() { step() }\n            throw error", "_ = undo\n            throw error",
     "PyramidIsReplaced|IsNotReplaced|FailedCommit|failedOrCancelledPyramid", "a failed commit leaves the old pyramid half replaced"),
    ("commit-keeps-earlier-outputs", "Sources/Tessera/Outputs/OutputCommit.swift",
     "            commit.rollBack()\n", "            commit.finish()\n",
     "FailedCommit|aFailureAtTheLastOutput|IsNotReplaced|failedOrCancelledPyramid",
     "the outputs moved in before a failed one are kept, beside the old ones of the rest"),
    # Cancellation checks.
    ("cancel-writer", "Sources/Tessera/Render/StripePipeline.swift",
     "            if cancellation?.isCancelled == true {\n                errors.record(.cancelled)\n                break",
     "            if cancellation?.isCancelled == true && false {\n                errors.record(.cancelled)\n                break",
     "Cancellation|signalStops", "the writer ignores cancellation"),
    ("cancel-start", "Sources/Tessera/Render/StripePipeline.swift",
     "            if cancellation?.isCancelled == true {\n                errors.record(.cancelled)\n                changed.broadcast()",
     "            if cancellation?.isCancelled == true && false {\n                errors.record(.cancelled)\n                changed.broadcast()",
     "Cancellation|signalStops", "stripes are still started after a cancellation"),
    ("cancel-libjpeg", "Sources/CTesseraShims/tessera_jpeg.c",
     "if (tessera_flag_is_raised(d->cancel_flag)) {", "if (0 && tessera_flag_is_raised(d->cancel_flag)) {",
     "Cancellation", "a long libjpeg decode ignores cancellation"),
    # Budget arithmetic.
    ("budget-admit", "Sources/Tessera/Cells/DecodeBudget.swift",
     "while inUseBytes + grant > poolBytes { released.wait() }", "while inUseBytes > poolBytes { released.wait() }",
     "decodesSharingABudget|MemoryTests|Cgroup", "the decode pool admits past its size"),
    ("budget-pool", "Sources/Tessera/Cells/DecodeBudget.swift",
     "max(workers * (2 << 20), budgetBytes / 8)", "max(workers * (2 << 20), budgetBytes / 2)",
     "PlanBudget|PlanTests|MemoryTests", "the decode pool takes half the budget"),
    ("budget-segments", "Sources/Tessera/Render/RenderPlan.swift",
     "let forCells = budget - fixed - averagedBytes - window * stripeBytes - segmentBytes",
     "let forCells = budget - fixed - averagedBytes - window * stripeBytes",
     "PlanBudget|PlanTests|MemoryTests", "the cell cache is sized without the waiting segments"),
    ("budget-allowance", "Sources/Tessera/Render/RenderPlan.swift",
     "public static let processAllowanceBytes = 16 << 20", "public static let processAllowanceBytes = 2 << 20",
     "PlanBudget|PlanTests|MemoryTests", "the process's own memory undercounted"),
    ("one-arena", "Sources/Tessera/System/Allocator.swift",
     "_ = tessera_use_one_malloc_arena()", "_ = 0",
     "everyThreadAllocatesFromOneArena", "every thread allocates from an arena of its own"),
    # A photo whose data ends early: drawn as far as it goes, and refused under --strict.
    ("early-end", "Sources/Tessera/Formats/JPEG/JPEGFormat.swift",
     "reader.allowEarlyEnd()", "_ = reader.endedEarly",
     "truncatedBaselineJPEGIsDrawnAsFarAsItGoes|truncatedProgressivePhotoIsDrawnFromTheScansItHolds",
     "a truncated JPEG is a grey placeholder"),
    # A JPEG's DCT scale leaves the area average at least 2:1: a cell is not drawn from a scale
    # that only just covers it (softer than the photo allows).
    ("sharp-scale", "Sources/Tessera/Formats/JPEG/JPEGFormat.swift",
     "return scaled.width >= 2 * stored.width && scaled.height >= 2 * stored.height",
     "return covers",
     "aCellIsAsSharpAsTheFullSizeAverage|theScaleLeavesTwoToOneOrIsFullSize",
     "a cell is drawn from the DCT scale that only just covers it"),
    ("strict-incomplete", "Sources/Tessera/Cells/CellCache.swift",
     "if failOnPlaceholder, case .success(let notes) = outcome, let missing = notes.incomplete {",
     "if !failOnPlaceholder && failOnPlaceholder, case .success(let notes) = outcome, let missing = notes.incomplete {",
     "strictRefusesAPhotoThatBreaksWhileDrawn", "--strict draws a truncated photo in part"),
    ("early-end-once", "Sources/CTesseraShims/tessera_jpeg.c",
     "if (d->allow_early_end && !d->stopped_early) {", "if (d->allow_early_end) {",
     "scansThatStopEarlyOneAfterAnotherAreRefused", "scans that stop early one after another each cost a pass"),
    ("cells-checksum", "Sources/Tessera/Shards/SharedCells.swift",
     "return UInt32(littleEndian: trailer) == CRC32C.checksum(UnsafeRawBufferPointer(bytes))", "return true",
     "cellsSomeoneElsePlacedAreNeverTrusted", "a shard draws a cell another job changed"),
    # Files that are not tessera's, and hostile photos (stop 50's helpers).
    ("written-folder", "Sources/Tessera/Outputs/WrittenFolder.swift",
     "guard isFolder || isFile, admits(path, isFolder) else {", "guard isFolder || isFile || !isFile else {",
     "onlyOurOwnPyramidIsReplaced", "a file put in a pyramid folder goes with the old tiles"),
    ("stale-shape", "Sources/Tessera/System/StaleTemporaries.swift",
     "guard stem.hasSuffix(\".dzi\") || stem.hasSuffix(\".iiif\"), (1...6).contains(unique.utf8.count),",
     "guard (1...6).contains(unique.utf8.count),",
     "staleTemporariesOfDeadProcessesAreRemoved", "a folder of notes named like a temporary is removed"),
    ("viewer-page", "Sources/Tessera/Outputs/DeepZoom/DeepZoomViewer.swift",
     "guard case .success(let info) = linkStatus(path), (info.st_mode & S_IFMT) == S_IFREG else { return }",
     "return",
     "theCommandLineSaysWhatItNeeds", "a hand-written index.html is replaced by the viewer"),
    ("bomb-cap", "Sources/Tessera/Photos/PhotoLibrary.swift",
     "guard pixels > freePixels else { return nil }",
     "guard pixels > 100 * freePixels else { return nil }",
     "gridOfHostileFileStaysInsideTheBudget", "a 121 MP PNG of 15 KB is decoded"),
    # Past 1 GP, 20 px a byte: a 1,225 MP 1-bit PNG of 9.6 MB (128 px a byte) is refused.
    ("bomb-beyond", "Sources/Tessera/Photos/PhotoLibrary.swift",
     "let needed = min(pixels, densePixels) / pixelsPerFileByte + max(0, pixels - densePixels) / pixelsPerFileByteBeyond",
     "let needed = pixels / pixelsPerFileByte",
     "gridOfHostileFileStaysInsideTheBudget", "a 1,225 MP 1-bit PNG of 9.6 MB is decoded"),
    ("color-budget", "Sources/CTesseraShims/tessera_color.c",
     "if (held + size > budget->limit) {", "if (held + size > 64 * budget->limit) {",
     "gridOfHostileFileStaysInsideTheBudget", "a lookup-table profile is made outside the budget"),
    ("mosaic-whole", "Sources/Tessera/Mosaic/MosaicAnalysis.swift",
     "if let missing = notes.incomplete {", "if let missing = notes.incomplete, missing.isEmpty {",
     "aCutPhotoIsLeftOutOfAMosaic", "a cut photo fills a mosaic's grey cells"),
    # Scan and work limits.
    ("scan-limit", "Sources/CTesseraShims/tessera_jpeg.c",
     "if (dinfo->input_scan_number > TESSERA_JPEG_MAX_SCANS) {",
     "if (dinfo->input_scan_number > 10 * TESSERA_JPEG_MAX_SCANS) {",
     "ScanBomb|scansOutOfProportion|Bomb", "a scan bomb is decoded"),
    ("work-limit-libjpeg", "Sources/CTesseraShims/tessera_jpeg.c",
     "if (d->work_limit_blocks != 0 && d->work_blocks > d->work_limit_blocks) {",
     "if (d->work_limit_blocks != 0 && d->work_blocks > 1000 * d->work_limit_blocks) {",
     "ScanBomb|scansOutOfProportion|Bomb", "empty scans repeated are decoded"),
    ("work-limit-dc", "Sources/CTesseraCodec/tessera_dc.c",
     "if (d->work_limit_blocks != 0 && d->work_blocks > d->work_limit_blocks) {",
     "if (d->work_limit_blocks != 0 && d->work_blocks > 1000 * d->work_limit_blocks) {",
     "ScanBomb|scansOutOfProportion|Bomb|repeatedChromaScans", "the DC decoder decodes a work bomb"),
    # Colour conversion.
    ("colour-dc-green", "Sources/CTesseraCodec/tessera_dc.c",
     "clamp255(yv + ((-22554 * u - 46802 * v + 32768) >> 16))", "clamp255(yv + ((-22554 * u - 36802 * v + 32768) >> 16))",
     "BaselineTwin", "the DC decoder's green from Cr off by 15%"),
    ("colour-oklab", "Sources/Tessera/Mosaic/Oklab.swift",
     "0.4122214708", "0.4222214708",
     "OklabTests|MatcherTests|flatTarget", "the Oklab matrix's first coefficient off by 0.01"),
    # The DC decoder (tessera_dc.c): its refusals of scan parameters libjpeg refuses, and the
    # arithmetic that turns coefficients into samples.
    ("dc-scan-se-range", "Sources/CTesseraCodec/tessera_dc.c",
     "scan->ss > scan->se || scan->se > 63 || scan->count != 1", "scan->ss > scan->se || scan->count != 1",
     "DCDecoderCorruptFileTests", "a progressive AC scan ending past coefficient 63 is decoded"),
    ("dc-scan-al-limit", "Sources/CTesseraCodec/tessera_dc.c",
     "if (scan->al > 13) bad = 1;", "if (scan->al > 14) bad = 1;",
     "DCDecoderCorruptFileTests", "a successive approximation of Al = 14 is decoded"),
    ("dc-refinement-step", "Sources/CTesseraCodec/tessera_dc.c",
     "if (scan->ah != 0 && scan->al != scan->ah - 1) bad = 1;", "if (scan->ah != 0 && scan->al >= scan->ah) bad = 1;",
     "DCDecoderCorruptFileTests", "a refinement of more than one bit is decoded"),
    ("dc-mcu-blocks", "Sources/CTesseraCodec/tessera_dc.c",
     "if (blocks > 10) {", "if (blocks > 18) {",
     "DCDecoderCorruptFileTests", "an interleaved MCU of 18 blocks is decoded"),
    ("dc-category", "Sources/CTesseraCodec/tessera_dc.c",
     "if (size > 11) fail_with", "if (size > 15) fail_with",
     "DCDecoderCorruptFileTests", "a DC difference over 11 bits is drawn as garbage"),
    ("dc-sample-rounding", "Sources/CTesseraCodec/tessera_dc.c",
     "long value = (((long)dc * quant + 4) >> 3) + 128;", "long value = (((long)dc * quant) >> 3) + 128;",
     "DCDecoderAgreementTests", "a block's sample truncated, not rounded as libjpeg's 1x1 IDCT"),
    ("dc-refinement-bit", "Sources/CTesseraCodec/tessera_dc.c",
     "*coefficient = (int16_t)(*coefficient | (1 << scan->al));",
     "*coefficient = (int16_t)(*coefficient | (1 << (scan->al + 1)));",
     "DCDecoderAgreementTests|ProgressiveTests", "a DC refinement sets the wrong bit"),
    ("dc-point-transform", "Sources/CTesseraCodec/tessera_dc.c",
     "*coefficient = (int16_t)((unsigned)c->prediction << scan->al);", "*coefficient = (int16_t)c->prediction;",
     "DCDecoderAgreementTests|ProgressiveTests", "a first DC scan at Al > 0 is not shifted back up"),
    ("dc-restart-prediction", "Sources/CTesseraCodec/tessera_dc.c",
     "        unsupported(d, \"missing restart marker\");\n    }\n    for (int i = 0; i < scan->count; i++) scan->components[i]->prediction = 0;",
     "        unsupported(d, \"missing restart marker\");\n    }",
     "ProgressiveTests", "the DC prediction runs on across a restart marker"),
    ("dc-quarter-weight", "Sources/CTesseraCodec/tessera_dc.c",
     "#define QUARTER_FIRST 7423", "#define QUARTER_FIRST 3711",
     "DCDecoderAgreementTests|ProgressiveTests", "the 2/8 approximation weighs the first AC coefficients at half"),
    # The format readers: budgets and refusals (Photos/, tessera_png.c, tessera_heif.c).
    ("png-inflate-bound", "Sources/Tessera/Formats/PNG.swift",
     "if rawBytes > 1032 * photo.fileBytes + (1 << 16) {", "if rawBytes > Int64(1) << 40 {",
     "FormatRefusalTests|hostileAndTruncatedFilesAreRefused", "a PNG header claiming more pixels than its bytes can inflate to is decoded"),
    # (Raising libspng's chunk count limit a hundredfold is equivalent: its chunk cache limit
    # refuses the 200,000 text chunks just the same.)
    ("png-text-count", "Sources/CTesseraShims/tessera_png.c",
     "memcmp(head + 4, \"iTXt\", 4) == 0) png->text_chunks++;", "memcmp(head + 4, \"iTXt\", 4) == 0) {}",
     "HostileMemoryTests", "a PNG refused for its text chunks is not told why"),
    ("webp-alpha-budget", "Sources/Tessera/Formats/WebP.swift",
     "let alpha = info.has_alpha == 0 ? 0 : lossless > 0 ? lossless : pixels + pixels / 8",
     "let alpha = info.has_alpha == 0 ? 0 : pixels + pixels / 8",
     "HostileMemoryTests", "a lossy WebP's alpha stream counted at a byte and an eighth a pixel, whatever libwebp decodes it at"),
    ("webp-groups", "Sources/CTesseraShims/tessera_vp8l.c",
     "groups = mapped ? distinct : groups_max;", "groups = mapped ? 1 : groups_max;",
     "HostileMemoryTests", "a lossless WebP's prefix-code groups left out of its budget"),
    ("heif-data-sps", "Sources/CTesseraShims/tessera_heif.c",
     "found = hevc_data_size(&stream, length_bytes, found, w, h, shown_w, shown_h, &heif->coded_bits);", "(void)hevc_data_size;",
     "HostileMemoryTests", "an SPS in a HEIC's data, past what hvcC says, is not read"),
    ("heif-stream-bits", "Sources/CTesseraShims/tessera_heif.c",
     "if (heif->coded_bits > info->luma_bits) info->luma_bits = heif->coded_bits;", "(void)heif->coded_bits;",
     "MemoryTests", "an AVIF claiming 8 bits over a 12-bit stream is admitted at the 8-bit cost"),
    ("heif-items", "Sources/CTesseraShims/tessera_heif.c",
     "if (items > TESSERA_HEIF_ITEMS || located > TESSERA_HEIF_ITEMS) {", "if (items > 100 * TESSERA_HEIF_ITEMS) {",
     "HostileMemoryTests", "a HEIC of thousands of items is given to libheif to parse"),
    ("heif-whole-budget", "Sources/Tessera/Formats/HEIF.swift",
     "(av1 ? pixels * 8 : pixels * 13 / 2) * depth", "(av1 ? pixels * 8 : pixels / 2) * depth",
     "HEIFBudgetTests", "a HEIF decoded whole budgeted at a thirteenth"),
    ("heif-ispe-lie", "Sources/CTesseraShims/tessera_heif.c",
     "if (size_differs(m, id, sw, sh, ispe_w, ispe_h)) {", "if (0) {",
     "HostileMemoryTests", "a HEIC whose ispe is smaller than its coded picture is decoded"),
    ("heif-grid-ispe", "Sources/CTesseraShims/tessera_heif.c",
     "if (size_differs(m, id, out->width, out->height, ispe_w, ispe_h)) {", "if (0) {",
     "HostileMemoryTests", "a HEIC grid larger than its ispe is decoded"),
    # The shard join's checks (Shards/PartFile.swift, ShardJoin.swift).
    ("part-record-crc", "Sources/Tessera/Shards/PartFile.swift",
     "guard checksum.value == record.checksum else {", "guard checksum.value == record.checksum || true else {",
     "aChangedByteFailsItsChecksum", "a changed byte in a segment or tile is joined"),
    ("part-header-crc", "Sources/Tessera/Shards/PartFile.swift",
     "guard checksum.value == expectedChecksum else {", "guard checksum.value == expectedChecksum || true else {",
     "aChangedByteFailsItsChecksum", "a changed byte in a part's header text is joined"),
    ("part-data-gap", "Sources/Tessera/Shards/PartFile.swift",
     "guard dataEnd == headerOffset else {", "guard dataEnd <= headerOffset else {",
     "PartGapTests|PartFileTests", "bytes no record holds are let through"),
    ("join-picture-side", "Sources/Tessera/Shards/ShardJoin.swift",
     "guard width <= side, height <= side else {", "guard width <= Int.max / 4, height <= Int.max / 4 else {",
     "impossibleHeaderValuesAreRefused", "a part claiming a picture larger than any render is trusted"),
    ("join-inside-shard-folder", "Sources/Tessera/Shards/ShardJoin.swift",
     "if canonical == folder || canonical.hasPrefix(folder == \"/\" ? \"/\" : folder + \"/\") {", "if canonical == folder {",
     "partsCannotChooseWhatTheJoinReplaces", "a part may name an output inside the shard folder"),
    ("join-existing-file", "Sources/Tessera/Shards/ShardJoin.swift",
     "if given.isEmpty, case .success = linkStatus(file.path) {", "if false, case .success = linkStatus(file.path) {",
     "partsCannotChooseWhatTheJoinReplaces", "a path named by the parts replaces an existing file"),
    ("join-nul-path", "Sources/Tessera/Shards/ShardJoin.swift",
     "where path.utf8.contains(0) {", "where path.utf8.contains(0) && false {",
     "aPathWithANulIsRefused", "a part's path with a NUL byte is written (cut at the NUL)"),
    # The matcher (Mosaic/MosaicMatcher.swift): the cost, the max-uses and min-distance rules.
    ("matcher-cost", "Sources/Tessera/Mosaic/MosaicMatcher.swift",
     "sum += diff * diff", "sum += abs(diff)",
     "MatcherTests|LocalSearchTests|MatcherCostTests", "the cost is the L1 distance, not the squared Oklab distance"),
    ("matcher-max-uses-refusal", "Sources/Tessera/Mosaic/MosaicMatcher.swift",
     "if let maxUses, maxUses * n < cells {", "if let maxUses, maxUses * n < cells - 4 {",
     "impossibleConstraintsAreRefused", "a max-uses too small to fill the grid is not refused"),
    ("matcher-min-distance-refusal", "Sources/Tessera/Mosaic/MosaicMatcher.swift",
     "if minDistance > 0 && n < window && cells > 1 {", "if minDistance > 0 && n < window - 1 && cells > 1 {",
     "impossibleConstraintsAreRefused", "too few pictures for the minimum distance is not refused"),
    ("matcher-uses-allowed", "Sources/Tessera/Mosaic/MosaicMatcher.swift",
     "usesOf(photo) < limit && holders(of: photo, near: cell, most: 1).isEmpty",
     "usesOf(photo) <= limit && holders(of: photo, near: cell, most: 1).isEmpty",
     "MatcherTests|LocalSearchTests", "a photo may be used once more than --max-uses"),
    ("matcher-distance-window", "Sources/Tessera/Mosaic/MosaicMatcher.swift",
     "for x in max(0, column - minDistance)...min(columns - 1, column + minDistance) {",
     "for x in max(0, column - minDistance + 1)...min(columns - 1, column + minDistance) {",
     "MatcherTests|LocalSearchTests|identicalPicturesNeverTouch", "a repeat just left of a cell is not seen"),
    # The duplicate search's grid (Mosaic/DuplicateGrid.swift): the ranges it searches cover every
    # pair `same` accepts.
    ("duplicate-grid-cell-range", "Sources/Tessera/Mosaic/DuplicateGrid.swift",
     "let light = tolerance + cellDifference * weight", "let light = tolerance + cellDifference * weight * 0.5",
     "gridMatchesComparingEveryPair|gridNeverHidesAJoinedPair", "the sub-cells' ranges miss rich pairs `same` accepts"),
    ("duplicate-grid-contrast-range", "Sources/Tessera/Mosaic/DuplicateGrid.swift",
     "return [logf(contrastRatio)] + keyCells", "return [logf(1.15)] + keyCells",
     "gridMatchesComparingEveryPair|gridNeverHidesAJoinedPair", "the contrast's range is narrower than the ratio `same` allows"),
]


def run(command, cwd, log, timeout=None):
    with open(log, "ab") as out:
        out.write(("$ " + " ".join(command) + "\n").encode())
        out.flush()
        # A session of its own, so that a hang is stopped whole: swift test, the test bundle and
        # any tessera it started.
        process = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            out.write(b"timed out\n")
            return 124


def check(mutants, root):
    """What is wrong with the mutants: a file that is missing, an original text that does not
    occur exactly once in its file (the code moved: the mutant would test nothing, or the wrong
    place), a mutated text equal to the original, an id used twice. Empty when all are sound."""
    problems = []
    seen = set()
    for ident, path, original, mutated, _, _ in mutants:
        if ident in seen:
            problems.append(f"mutant {ident}: the id is used twice")
        seen.add(ident)
        if original == mutated:
            problems.append(f"mutant {ident}: its mutated text is its original text")
        try:
            with open(os.path.join(root, path)) as source:
                count = source.read().count(original)
        except OSError as error:
            problems.append(f"mutant {ident}: cannot read {path}: {error.strerror}")
            continue
        if count != 1:
            problems.append(f"mutant {ident}: its text occurs {count} times in {path} (the code moved: update the mutant)")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated mutant ids, run in that order")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--check", action="store_true",
                        help="only check that every mutant's text occurs exactly once in its file (fast, no build); exit 1 if not")
    parser.add_argument("--keep", action="store_true", help="keep the scratch tree (for reading a log)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds a mutant's tests may take (a hang is killed and counts as killed)")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    mutants = MUTANTS
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {m[0] for m in MUTANTS}
        if unknown:
            sys.exit("unknown mutant(s): " + ", ".join(sorted(unknown)))
        # In the order given (the ones most worth a look first).
        by_id = {m[0]: m for m in MUTANTS}
        mutants = [by_id[ident] for ident in dict.fromkeys(args.only.split(","))]
    if args.list:
        for m in mutants:
            print(f"{m[0]:22} {m[1]}: {m[5]}  (tests: {m[4]})")
        return
    problems = check(mutants, root)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        sys.exit(1)
    if args.check:
        print(f"every mutant's text occurs exactly once in its file ({len(mutants)} mutants)")
        return

    scratch = tempfile.mkdtemp(prefix="tessera-mutants-", dir=os.environ.get("TMPDIR", "/tmp"))
    tree = os.path.join(scratch, "tree")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = os.path.join(root, name)
        if not os.path.isfile(source):
            continue
        os.makedirs(os.path.dirname(os.path.join(tree, name)), exist_ok=True)
        shutil.copy2(source, os.path.join(tree, name))
    log = os.path.join(scratch, "baseline.log")
    print(f"scratch tree {tree}; building the unmutated tests first", flush=True)
    if run(["swift", "build", "--build-tests"], tree, log) != 0:
        sys.exit(f"the unmutated tree does not build: see {log}")
    killed, survived, stillborn = [], [], []
    for ident, path, original, mutated, filt, what in mutants:
        target = os.path.join(tree, path)
        text = open(target).read()
        started = time.monotonic()
        log = os.path.join(scratch, ident + ".log")
        try:
            open(target, "w").write(text.replace(original, mutated, 1))
            if run(["swift", "build", "--build-tests"], tree, log) != 0:
                stillborn.append(ident)
                verdict = "stillborn (does not build)"
            else:
                status = run(["swift", "test", "--skip-build", "--filter", filt], tree, log, timeout=args.timeout)
                if status == 0:
                    survived.append((ident, what))
                    verdict = "SURVIVED"
                else:
                    killed.append(ident)
                    verdict = "killed" + (" (hang, timed out)" if status == 124 else "")
        finally:
            open(target, "w").write(text)
        print(f"{ident:22} {verdict:28} {time.monotonic() - started:6.0f} s  {what}", flush=True)
    counted = len(killed) + len(survived)
    print(f"\nmutants: {len(mutants)}; killed {len(killed)}, survived {len(survived)}, stillborn {len(stillborn)}")
    if counted:
        print(f"mutation score: {100.0 * len(killed) / counted:.1f}% ({len(killed)}/{counted})")
    for ident, what in survived:
        print(f"  survived: {ident}: {what}")
    if args.keep:
        print(f"logs and tree kept in {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
