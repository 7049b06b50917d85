// DiskPreflight.swift — is there room on disk for the outputs and the temporaries?
import Glibc

/// Space (and, for a Deep Zoom pyramid, inodes) a render needs on one filesystem, and what is
/// free there.
public struct DiskRequirement: Equatable, Sendable {
    public let directory: String
    public let neededBytes: Int64
    public let freeBytes: Int64
    public var neededInodes: Int64 = 0
    public var freeInodes: Int64 = .max
    public var fits: Bool { neededBytes <= freeBytes && neededInodes <= freeInodes }
}

public enum DiskPreflight {
    /// What `plan` needs on each filesystem it writes to: the JPEG in its folder, the pyramid
    /// in its folder (bytes and files), a TIFF in its folder and its spool in `temporaryDirectory`,
    /// the stripe window in `stripeDirectory`, the cell spill
    /// in `temporaryDirectory`. Needs on the same filesystem are added up and reported under the
    /// first folder named for it. `freeSpace` and `freeFiles` are statvfs by default; tests pass
    /// their own.
    /// `shard`: a shard's folder and its share of the outputs (0...1): its part goes there
    /// instead of the outputs into theirs.
    public static func requirements(plan: RenderPlan, outputPath: String?, deepZoomPath: String? = nil,
                                    archivePath: String? = nil, iiifPath: String? = nil, tiffPath: String? = nil,
                                    shard: (directory: String, share: Double)? = nil,
                                    freeSpace: (String) throws(TesseraError) -> Int64 = freeDiskBytes,
                                    freeFiles: (String) throws(TesseraError) -> Int64 = freeInodes) throws(TesseraError) -> [DiskRequirement] {
        var needs: [(directory: String, bytes: Int64, inodes: Int64)] = []
        if let shard {
            let bytes = Double(plan.estimatedOutputBytes + plan.deepZoomDiskBytes + plan.tiffDiskBytes) * min(1, shard.share)
            needs.append((shard.directory, Int64(bytes) + (1 << 20), 1))
        } else {
            if let outputPath { needs.append((parentDirectory(of: outputPath), plan.estimatedOutputBytes, 1)) }
            if let deepZoomPath { needs.append((parentDirectory(of: deepZoomPath), plan.deepZoomDiskBytes, plan.deepZoomInodes)) }
            // An SZI: the tiles (counted as the folder's, with its per-file rounding to spare)
            // and, in the temporary folder, its central directory (a record of under 128 bytes
            // a tile) until it is copied in.
            if let archivePath {
                let directoryBytes = (plan.deepZoomInodes + 2) * 128
                needs.append((parentDirectory(of: archivePath), plan.deepZoomDiskBytes + directoryBytes, 1))
                needs.append((plan.temporaryDirectory, directoryBytes, 1))
            }
            // An IIIF folder: the tiles (at most the Deep Zoom folder's), each in three folders of
            // its own (region, size, rotation), with their blocks.
            if let iiifPath {
                needs.append((parentDirectory(of: iiifPath), plan.deepZoomDiskBytes + plan.deepZoomInodes * 3 * 4096, plan.deepZoomInodes * 4))
            }
            // A TIFF: the file, and its smaller pages waiting in the temporary folder until they
            // are copied in (both at once, at the end).
            if let tiffPath {
                needs.append((parentDirectory(of: tiffPath), plan.tiffDiskBytes, 1))
                needs.append((plan.temporaryDirectory, plan.tiffSpoolBytes, 1))
            }
        }
        needs.append((plan.stripeDirectory, plan.stripeDiskBytes, 1))
        needs.append((plan.temporaryDirectory, plan.spillDiskBytes, 1))
        var devices: [UInt64] = []
        var totals: [(directory: String, bytes: Int64, inodes: Int64)] = []
        for need in needs {
            let device = try deviceID(need.directory)
            if let index = devices.firstIndex(of: device) {
                totals[index].bytes += need.bytes
                totals[index].inodes += need.inodes
            } else {
                devices.append(device)
                totals.append(need)
            }
        }
        var result: [DiskRequirement] = []
        for total in totals {
            var requirement = DiskRequirement(directory: total.directory, neededBytes: total.bytes, freeBytes: try freeSpace(total.directory))
            // Inodes matter only where a pyramid's thousands of files go.
            if (deepZoomPath != nil || iiifPath != nil) && shard == nil && total.inodes > 16 {
                requirement.neededInodes = total.inodes
                requirement.freeInodes = try freeFiles(total.directory)
            }
            result.append(requirement)
        }
        return result
    }

    /// Throws `insufficientDiskSpace` (or `insufficientInodes`) for the first filesystem that
    /// lacks room.
    public static func check(plan: RenderPlan, outputPath: String?, deepZoomPath: String? = nil,
                             archivePath: String? = nil, iiifPath: String? = nil, tiffPath: String? = nil,
                             shard: (directory: String, share: Double)? = nil,
                             freeSpace: (String) throws(TesseraError) -> Int64 = freeDiskBytes,
                             freeFiles: (String) throws(TesseraError) -> Int64 = freeInodes) throws(TesseraError) {
        for requirement in try requirements(plan: plan, outputPath: outputPath, deepZoomPath: deepZoomPath, archivePath: archivePath,
                                            iiifPath: iiifPath, tiffPath: tiffPath, shard: shard,
                                            freeSpace: freeSpace, freeFiles: freeFiles) where !requirement.fits {
            if requirement.neededBytes > requirement.freeBytes {
                throw .insufficientDiskSpace(directory: requirement.directory, neededBytes: requirement.neededBytes,
                                             freeBytes: requirement.freeBytes)
            }
            throw .insufficientInodes(directory: requirement.directory, neededFiles: requirement.neededInodes,
                                      freeFiles: requirement.freeInodes)
        }
    }

    private static func deviceID(_ directory: String) throws(TesseraError) -> UInt64 {
        switch fileStatus(directory) {
        case .success(let info):
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                throw TesseraError.system(operation: "stat", errno: ENOTDIR, path: directory)
            }
            return UInt64(info.st_dev)
        case .failure(let code):
            throw TesseraError.system(operation: "stat", errno: code.rawValue, path: directory)
        }
    }
}
