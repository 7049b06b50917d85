// DiskPreflight.swift — is there room on disk for the output and the temporaries?
import Glibc

/// Space a render needs on one filesystem, and what is free there.
public struct DiskRequirement: Equatable, Sendable {
    public let directory: String
    public let neededBytes: Int64
    public let freeBytes: Int64
    public var fits: Bool { neededBytes <= freeBytes }
}

public enum DiskPreflight {
    /// What `plan` needs on each filesystem it writes to: the output in its folder, the stripe
    /// window in `stripeDirectory`, the tile spill in `temporaryDirectory`. Needs on the same
    /// filesystem are added up and reported under the first folder named for it.
    /// `freeSpace` is statvfs by default; tests pass their own.
    public static func requirements(plan: RenderPlan, outputPath: String,
                                    freeSpace: (String) throws(TesseraError) -> Int64 = freeDiskBytes) throws(TesseraError) -> [DiskRequirement] {
        let needs: [(directory: String, bytes: Int64)] = [
            (parentDirectory(of: outputPath), plan.estimatedOutputBytes),
            (plan.stripeDirectory, plan.stripeDiskBytes),
            (plan.temporaryDirectory, plan.spillDiskBytes),
        ]
        var devices: [UInt64] = []
        var totals: [(directory: String, bytes: Int64)] = []
        for need in needs {
            let device = try deviceID(need.directory)
            if let index = devices.firstIndex(of: device) {
                totals[index].bytes += need.bytes
            } else {
                devices.append(device)
                totals.append(need)
            }
        }
        var result: [DiskRequirement] = []
        for total in totals {
            result.append(DiskRequirement(directory: total.directory, neededBytes: total.bytes, freeBytes: try freeSpace(total.directory)))
        }
        return result
    }

    /// Throws `insufficientDiskSpace` for the first filesystem that lacks room.
    public static func check(plan: RenderPlan, outputPath: String,
                             freeSpace: (String) throws(TesseraError) -> Int64 = freeDiskBytes) throws(TesseraError) {
        for requirement in try requirements(plan: plan, outputPath: outputPath, freeSpace: freeSpace) where !requirement.fits {
            throw .insufficientDiskSpace(directory: requirement.directory, neededBytes: requirement.neededBytes,
                                         freeBytes: requirement.freeBytes)
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
